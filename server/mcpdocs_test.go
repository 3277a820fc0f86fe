package server_test

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

var updateMCPDocs = flag.Bool("update-mcp-docs", false, "rewrite docs/mcp.md from the tool registry of a demo server")

const mcpDocsIntro = `Every tool an agent is offered over MCP, as the demo server lists it: its
title, description, annotations, an example call, and the JSON Schemas of
its arguments and of its structured answer. Arguments that break the input
schema are refused before the tool runs, as ` + "`invalid_params`" + ` naming the
argument (see [http.md](http.md) for the error shape). Tools an
application registers at run time (Recipe tools, screen tools) are listed
with their own schemas by ` + "`tools/list`" + `.

This page is generated from the tool registry; do not edit it by hand.
Regenerate it with ` + "`go test ./server -run TestMCPDocsMatchRegistry -update-mcp-docs`" + `.`

// TestMCPDocsMatchRegistry keeps docs/mcp.md the reference of the tools a
// demo server offers an agent.
func TestMCPDocsMatchRegistry(t *testing.T) {
	const path = "../docs/mcp.md"
	f := assenttest.StartDemo(t)
	agent := store.Principal{ID: "docs-agent", Kind: store.KindAgent}
	var b bytes.Buffer
	if err := tool.WriteReference(&b, "MCP tools", mcpDocsIntro, f.Srv.Tools().ListFor(agent)); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, name := range []string{"controls_list", "actors_run_spawn", "flows_start", "show_screen", "inbox_wait", "runtime_status"} {
		if !strings.Contains(got, "\n## "+name+"\n") {
			t.Errorf("the reference has no section for %s", name)
		}
	}
	if *updateMCPDocs {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run go test ./server -run TestMCPDocsMatchRegistry -update-mcp-docs", err)
	}
	if string(doc) != got {
		t.Errorf("docs/mcp.md is not what the tool registry gives; run go test ./server -run TestMCPDocsMatchRegistry -update-mcp-docs")
	}
}

package oauth_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
)

// TestTypeScriptSDKClient drives the official MCP TypeScript SDK client
// (e2e/mcpauth, installed with `npm ci --prefix e2e/mcpauth`) with only the
// server's URL: it discovers, registers, sends the person to consent, gets
// a token and lists the tools. It is skipped without node or the package.
func TestTypeScriptSDKClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; skipping")
	}
	dir, _ := filepath.Abs("../../e2e/mcpauth")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("the MCP TypeScript SDK is not installed (npm ci --prefix e2e/mcpauth); skipping")
	}
	k := assenttest.Start(t, nil)
	cookie, csrf := k.SignIn()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "connect.mjs", k.URL()+"/mcp")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	lines := bufio.NewScanner(stdout)
	var step struct {
		Authorize string   `json:"authorize"`
		Tools     []string `json:"tools"`
		Prefix    string   `json:"token_prefix"`
		Refresh   bool     `json:"refresh"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &step) != nil || step.Authorize == "" {
		t.Fatalf("the client did not ask for authorization: %q", lines.Text())
	}
	loc := consent(t, k, step.Authorize, cookie, csrf, nil)
	io.WriteString(stdin, loc.Query().Get("code")+"\n")
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &step) != nil {
		t.Fatalf("the client did not list the tools: %q", lines.Text())
	}
	if !slices.Contains(step.Tools, "flows_start") || step.Prefix != "asat_" || !step.Refresh {
		t.Errorf("client answer %+v: want the tools, an access token and a refresh token", step)
	}
	if oauthAgent(t, k).Name != "hosted agent" {
		t.Error("no agent principal was created by the consent")
	}
}

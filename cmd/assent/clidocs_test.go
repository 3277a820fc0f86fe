package main

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

var updateCLIDocs = flag.Bool("update-cli-docs", false, "rewrite the help blocks of docs/cli.md from the commands' help")

// helpBlock finds, in docs/cli.md, a "## assent CMD" heading followed by a
// fenced block: the block is CMD's --help.
var helpBlock = regexp.MustCompile("(?m)^## assent ([a-z ]+)\n\n```\n((?s:.*?))```\n")

// TestCLIDocsMatchHelp keeps the help blocks of docs/cli.md what the
// commands print. go test ./cmd/assent -run TestCLIDocsMatchHelp
// -update-cli-docs rewrites them.
func TestCLIDocsMatchHelp(t *testing.T) {
	const path = "../../docs/cli.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	out := helpBlock.ReplaceAllStringFunc(string(doc), func(block string) string {
		m := helpBlock.FindStringSubmatch(block)
		n++
		var help, errw bytes.Buffer
		if code := execute(append(strings.Fields(m[1]), "--help"), strings.NewReader(""), &help, &errw); code != 0 {
			t.Errorf("assent %s --help: exit %d: %s", m[1], code, errw.String())
			return block
		}
		if got := help.String(); got != m[2] && !*updateCLIDocs {
			t.Errorf("docs/cli.md shows another help for assent %s than it prints; run go test ./cmd/assent -run TestCLIDocsMatchHelp -update-cli-docs\n--- docs\n%s\n--- help\n%s", m[1], m[2], got)
		}
		return "## assent " + m[1] + "\n\n```\n" + help.String() + "```\n"
	})
	if n == 0 {
		t.Fatal("docs/cli.md has no help block")
	}
	if *updateCLIDocs && out != string(doc) {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

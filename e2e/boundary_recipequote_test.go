package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// TestBoundaryRecipeValueInjectsShellInsideQuotes: an operator's Recipe
// writes a placeholder inside double quotes ("note: {msg}"), as shell
// scripts commonly do. An agent WITHOUT command.execute may start that
// Recipe with values of its own (no person's approval is asked). The value
// is "shell-quoted" as '…', but inside the template's double quotes the
// single quotes are literal, so $(…) in the value runs: the agent runs a
// command of its own choosing without the grant or a person's approval.
// docs/runs.md promises "a value can never inject shell syntax".
func TestBoundaryRecipeValueInjectsShellInsideQuotes(t *testing.T) {
	a := newAppIn(t, t.TempDir(), false, nil)
	agent := a.issue(store.KindAgent, "plain", "state.write", "tool.invoke") // no command.execute
	// A value with "$" is refused unless the argument is declared
	// !special; declared, it must still stand as written.
	plain := `{"description":"append a note","args":["msg"],"template":"echo \"note: {msg}\" > note.txt"}`
	if err := os.WriteFile(filepath.Join(a.Dir, "recipes", "plainnote.json"), []byte(plain), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, raw := a.API("POST", "/v1/runs", agent, map[string]any{"recipe": "plainnote", "run_id": "note0",
		"values": map[string]any{"msg": "$(echo INJECTED-BY-AGENT)"}}); code/100 != 4 || !strings.Contains(string(raw), "invalid_value") {
		t.Fatalf("a value with $ for an argument not declared !special: %d %s, want a 4xx invalid_value", code, raw)
	}
	recipe := `{"description":"append a note","args":["msg:string!special"],"template":"echo \"note: {msg}\" > note.txt"}`
	if err := os.WriteFile(filepath.Join(a.Dir, "recipes", "note.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, raw := a.API("POST", "/v1/runs", agent, map[string]any{"recipe": "note", "run_id": "note1",
		"values": map[string]any{"msg": "$(echo INJECTED-BY-AGENT)"}})
	if code >= 300 {
		t.Fatalf("spawn: %d %s", code, raw)
	}
	got := filepath.Join(a.Dir, "runs", "note1", "note.txt")
	var b []byte
	testwait.Eventually(t, 20*time.Second, func() bool {
		b, _ = os.ReadFile(got)
		return len(b) > 0
	}, "the Run writing note.txt")
	if strings.Contains(string(b), "note: 'INJECTED-BY-AGENT'") {
		t.Fatalf("the agent's value ran as a command inside the Recipe's quotes: note.txt = %q (want the literal text $(echo INJECTED-BY-AGENT))", b)
	}
	if !strings.Contains(string(b), "$(echo INJECTED-BY-AGENT)") {
		t.Fatalf("unexpected note.txt %q", b)
	}
}

// TestBoundaryRecipeValueBreaksSingleQuotes: the same with a placeholder
// inside single quotes: the value's own quotes close the template's, so a
// value without any quote character, "x;echo PWNED>pwned.txt;", runs.
func TestBoundaryRecipeValueBreaksSingleQuotes(t *testing.T) {
	a := newAppIn(t, t.TempDir(), false, nil)
	agent := a.issue(store.KindAgent, "plain", "state.write", "tool.invoke")
	recipe := `{"description":"greet","args":["name"],"template":"echo 'hello {name}' > hello.txt"}`
	if err := os.WriteFile(filepath.Join(a.Dir, "recipes", "greet.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, raw := a.API("POST", "/v1/runs", agent, map[string]any{"recipe": "greet", "run_id": "greet1",
		"values": map[string]any{"name": "x;echo PWNED>pwned.txt;"}})
	if code >= 300 {
		t.Fatalf("spawn: %d %s", code, raw)
	}
	dir := filepath.Join(a.Dir, "runs", "greet1")
	// The Run's own output must appear; without it the check below
	// would pass for a Run that never ran.
	testwait.Eventually(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
		return err == nil && len(b) > 0
	}, "hello.txt (without it the Run did not run, so this test proves nothing)")
	// The injected command would run after the echo: wait for the Run's
	// end, not for a moment.
	testwait.Eventually(t, 20*time.Second, func() bool {
		_, v, _ := a.API("GET", "/v1/runs/greet1", agent, nil)
		return v["status"] != nil && v["status"] != "running"
	}, "the end of Run greet1")
	if b, err := os.ReadFile(filepath.Join(dir, "pwned.txt")); err == nil {
		t.Fatalf("the agent's value ran a command of its own (pwned.txt = %q)", b)
	}
}

// TestBoundaryRecipeValueBecomesOption: an agent without command.execute
// starts an operator's Recipe whose value is handed to git; a value that
// begins with "-" would be read by git as an option (--upload-pack runs a
// command), so it is refused invalid_value and nothing runs.
func TestBoundaryRecipeValueBecomesOption(t *testing.T) {
	a := newAppIn(t, t.TempDir(), false, nil)
	agent := a.issue(store.KindAgent, "plain", "state.write", "tool.invoke")
	recipe := `{"description":"remote head","args":["repo:string"],"template":"git ls-remote {repo} HEAD"}`
	if err := os.WriteFile(filepath.Join(a.Dir, "recipes", "head.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, raw := a.API("POST", "/v1/runs", agent, map[string]any{"recipe": "head", "run_id": "head1",
		"values": map[string]any{"repo": "--upload-pack=touch /tmp/x;"}})
	if code < 400 || !strings.Contains(string(raw), "invalid_value") {
		t.Fatalf("spawn with an option as the value: %d %s; want a refusal with invalid_value", code, raw)
	}
	if _, err := os.Stat(filepath.Join(a.Dir, "runs", "head1")); err == nil {
		t.Error("the refused Run left a directory")
	}
}

// TestBoundaryRecipeValueBecomesPlusOption: the same with the options
// that begin with "+": less and more run the command after "+!", vi runs
// an editor command after "+". An agent without command.execute starting
// an operator's pager Recipe with such a value is refused invalid_value.
func TestBoundaryRecipeValueBecomesPlusOption(t *testing.T) {
	a := newAppIn(t, t.TempDir(), false, nil)
	agent := a.issue(store.KindAgent, "plain", "state.write", "tool.invoke")
	recipe := `{"description":"page a report","args":["file:path"],"template":"less {file} < /dev/null"}`
	if err := os.WriteFile(filepath.Join(a.Dir, "recipes", "page.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"+!touch pwned", "+:!touch pwned", "+5"} {
		id := "page" + strconv.Itoa(i)
		code, _, raw := a.API("POST", "/v1/runs", agent, map[string]any{"recipe": "page", "run_id": id,
			"values": map[string]any{"file": v}})
		if code < 400 || !strings.Contains(string(raw), "invalid_value") {
			t.Fatalf("spawn with %q as the file: %d %s; want a refusal with invalid_value", v, code, raw)
		}
		if _, err := os.Stat(filepath.Join(a.Dir, "runs", id)); err == nil {
			t.Errorf("the refused Run %s left a directory", id)
		}
	}
}

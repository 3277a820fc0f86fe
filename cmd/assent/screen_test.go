package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func runScreen(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(append([]string{"screen"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type checkOut struct {
	Issues []struct {
		Line    *int   `json:"line"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"issues"`
	Nodes     map[string]json.RawMessage `json:"nodes"`
	State     map[string]any             `json:"state"`
	Mutations map[string]json.RawMessage `json:"mutations"`
	Missing   []string                   `json:"missing"`
	Updates   []struct {
		Applied bool              `json:"applied"`
		Issues  []json.RawMessage `json:"issues"`
	} `json:"updates"`
}

func decodeCheck(t *testing.T, s string) checkOut {
	t.Helper()
	var c checkOut
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return c
}

const payScreen = `root = Stack([pay])
$amount = 42.5
pay = Button("Pay", action="pay")
m = McpMutation(pay, tool="payments.confirm", params={amount: $amount})
`

func TestScreenCheckOK(t *testing.T) {
	code, out, errOut := runScreen(t, payScreen, "check", "--tools", "payments.confirm")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q, out %s", code, errOut, out)
	}
	c := decodeCheck(t, out)
	if len(c.Issues) != 0 || c.Issues == nil {
		t.Errorf("issues = %v, want []", c.Issues)
	}
	var pay struct {
		Type     string         `json:"type"`
		Props    map[string]any `json:"props"`
		Children []string       `json:"children"`
	}
	if err := json.Unmarshal(c.Nodes["pay"], &pay); err != nil || pay.Type != "Button" || pay.Props["action"] != "pay" || pay.Children == nil {
		t.Errorf("pay node = %s", c.Nodes["pay"])
	}
	var m struct {
		ID     string         `json:"id"`
		Tool   string         `json:"tool"`
		Params map[string]any `json:"params"`
	}
	_ = json.Unmarshal(c.Mutations["pay"], &m)
	if m.ID != "m" || m.Tool != "payments.confirm" || m.Params["amount"].(map[string]any)["state"] != "$amount" {
		t.Errorf("mutation = %+v", m)
	}
	if c.State["$amount"] != 42.5 {
		t.Errorf("state = %v", c.State)
	}
	if c.Missing == nil || len(c.Missing) != 0 {
		t.Errorf("missing = %v, want []", c.Missing)
	}
	if strings.Contains(out, `"updates"`) {
		t.Errorf("updates present without --update:\n%s", out)
	}
}

func TestScreenCheckErrors(t *testing.T) {
	// Default tool registry is empty: the tool is unknown and the Button
	// ungoverned.
	code, out, _ := runScreen(t, payScreen, "check", "-")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	c := decodeCheck(t, out)
	got := map[string]bool{}
	for _, i := range c.Issues {
		line := "null"
		if i.Line != nil {
			line = strconv.Itoa(*i.Line)
		}
		got[line+":"+i.Code] = true
		if i.Message == "" {
			t.Errorf("issue %s has no message", i.Code)
		}
	}
	for _, want := range []string{"4:unknown_tool", "3:ungoverned_mutation"} {
		if !got[want] {
			t.Errorf("missing issue %s in %v", want, got)
		}
	}
}

func TestScreenCheckWarningOnly(t *testing.T) {
	code, out, _ := runScreen(t, "# omni-ir 9.0\nroot = Text(\"a\\qb\")\n", "check")
	if code != 0 {
		t.Fatalf("exit %d, want 0 (warnings only)\n%s", code, out)
	}
	c := decodeCheck(t, out)
	if len(c.Issues) != 2 {
		t.Errorf("issues = %+v, want newer_version and unknown_escape", c.Issues)
	}
	if c.Issues[0].Line == nil || *c.Issues[0].Line != 1 {
		t.Errorf("first issue %+v", c.Issues[0])
	}
}

func TestScreenCheckMissingRootHasNullLine(t *testing.T) {
	code, out, _ := runScreen(t, "", "check")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, `"line": null`) || !strings.Contains(out, `"missing_root"`) {
		t.Errorf("output:\n%s", out)
	}
}

func TestScreenCheckUpdates(t *testing.T) {
	base := writeTemp(t, "order.omni", "root = Card([status])\nstatus = Badge(\"Shipped\")\n")
	good := writeTemp(t, "good.omni", "status = Badge(\"Delivered\")\n")
	bad := writeTemp(t, "bad.omni", "status = Banner(\"x\")\n")
	code, out, _ := runScreen(t, "", "check", "--update", good, "--update", bad, base)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (second update rejected)\n%s", code, out)
	}
	c := decodeCheck(t, out)
	if len(c.Updates) != 2 || !c.Updates[0].Applied || c.Updates[1].Applied {
		t.Fatalf("updates = %+v", c.Updates)
	}
	if c.Updates[0].Issues == nil || len(c.Updates[1].Issues) != 1 {
		t.Errorf("update issues = %+v", c.Updates)
	}
	if !strings.Contains(string(c.Nodes["status"]), "Delivered") {
		t.Errorf("status after updates = %s", c.Nodes["status"])
	}
}

func TestScreenCheckAppDeclarations(t *testing.T) {
	comps := writeTemp(t, "c.json", `{"Tile": {"description": "A tile.", "positional": ["name"], "props": {"name": {"kind": "text"}, "photo": {"kind": "picture", "optional": true}}}}`)
	pics := writeTemp(t, "p.json", `[{"prefix": "item-", "id": "digits", "maxLength": 6}]`)
	code, out, _ := runScreen(t, "root = Tile(\"Tote\", photo=\"item-42\")\n", "check", "--components", comps, "--pictures", pics)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !strings.Contains(out, `"app": true`) {
		t.Errorf("app node not marked:\n%s", out)
	}
	bad := writeTemp(t, "bad.json", `{"lower": {"description": "x", "props": {}}}`)
	code, _, errOut := runScreen(t, "", "check", "--components", bad)
	if code != 1 || !strings.Contains(errOut, "component") {
		t.Errorf("malformed declaration: exit %d, stderr %q", code, errOut)
	}
}

func TestScreenCheckJSONFlag(t *testing.T) {
	code, out, _ := runScreen(t, "root = Divider()\n", "check", "--json")
	if code != 0 || decodeCheck(t, out).Nodes["root"] == nil {
		t.Errorf("check --json: exit %d\n%s", code, out)
	}
}

func TestScreenCheckUsage(t *testing.T) {
	if code, _, _ := runScreen(t, "", "check", "a", "b"); code != 2 {
		t.Errorf("two files: exit %d, want 2", code)
	}
	if code, _, _ := runScreen(t, "", "check", "--nope"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if code, _, errOut := runScreen(t, "", "check", filepath.Join(t.TempDir(), "absent.omni")); code != 1 || errOut == "" {
		t.Errorf("absent file: exit %d, stderr %q", code, errOut)
	}
}

func TestScreenDescribe(t *testing.T) {
	in := "root = Card([i, b])\n$n = \"Ada\"\ni = Input($n, label=\"Name\", required=true)\nb = Button(\"Save\")\n"
	code, out, _ := runScreen(t, in, "describe")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if want := "Card\n  Input: Name (required)\n  Button: Save\n"; out != want {
		t.Errorf("describe = %q, want %q", out, want)
	}
	_, out, _ = runScreen(t, in, "describe", "--values")
	if !strings.Contains(out, `Input: Name (required) = "Ada"`) {
		t.Errorf("describe --values = %q", out)
	}
	_, out, _ = runScreen(t, in, "describe", "--json")
	var j struct {
		Outline string            `json:"outline"`
		Issues  []json.RawMessage `json:"issues"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil || !strings.HasPrefix(j.Outline, "Card\n") || j.Issues == nil {
		t.Errorf("describe --json = %q (%v)", out, err)
	}
}

func TestScreenHelp(t *testing.T) {
	for _, sub := range []string{"check", "describe"} {
		code, out, _ := runScreen(t, "", sub, "--help")
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("%s --help: exit %d\n%s", sub, code, out)
		}
	}
}

func TestScreenDescribeFile(t *testing.T) {
	path := writeTemp(t, "pay.omni", payScreen)
	code, out, errOut := runScreen(t, "", "describe", "--tools", "payments.confirm", path)
	if code != 0 || out != "Button: Pay (action: payments.confirm)\n" || errOut != "" {
		t.Errorf("describe FILE: exit %d, out %q, stderr %q", code, out, errOut)
	}
	// Without the tool the Button is ungoverned: the outline still prints,
	// and stderr points to check.
	code, out, errOut = runScreen(t, "", "describe", path)
	if code != 0 || out != "Button: Pay\n" || !strings.Contains(errOut, "screen check") {
		t.Errorf("describe without tools: exit %d, out %q, stderr %q", code, out, errOut)
	}
	if code, _, _ := runScreen(t, "", "describe", filepath.Join(t.TempDir(), "absent.omni")); code != 1 {
		t.Errorf("describe of an absent file: exit %d, want 1", code)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const flowExamplesDir = "../../examples/flows/"

func flowRun(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = execute(args, strings.NewReader(stdin), &out, &errw)
	return code, out.String(), errw.String()
}

func flowExample(t *testing.T, name string) string {
	t.Helper()
	p := flowExamplesDir + name
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not available", p)
	}
	return p
}

func flowTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFlowCheckValid(t *testing.T) {
	code, out, _ := flowRun(t, "", "flow", "check", flowExample(t, "expense-approval.json"))
	want := `{"ok":true,"program_id":"expense-approval","fingerprint":"sha256:650a4e95cd7c8e42883e3a6114806c367a12162dd321a168a6d700cc289b5ede","transitions":7,"errors":[]}` + "\n"
	if code != 0 || out != want {
		t.Errorf("exit %d, output\n%s\nwant\n%s", code, out, want)
	}
	code, out, _ = flowRun(t, "", "flow", "check", flowExample(t, "deployment.json"))
	if code != 0 || !strings.HasPrefix(out, `{"ok":true,"program_id":"deployment",`) {
		t.Errorf("deployment: exit %d, %s", code, out)
	}
}

func TestFlowCheckInvalid(t *testing.T) {
	src, err := os.ReadFile(flowExample(t, "expense-approval.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  string
		path  string
		id    any
	}{
		{"unknown key", []string{"-"}, strings.Replace(string(src), `"program_version"`, `"owner": "x", "program_version"`, 1), "PROGRAM_INVALID", "owner", "expense-approval"},
		{"newer schema", []string{"-"}, strings.Replace(string(src), `"schema_version": 1`, `"schema_version": 2`, 1), "PROGRAM_SCHEMA_UNSUPPORTED", "schema_version", "expense-approval"},
		{"old runtime", []string{"--runtime", "0.0.9", "-"}, string(src), "RUNTIME_TOO_OLD", "requires_runtime", "expense-approval"},
		{"not JSON", []string{"-"}, "{", "PROGRAM_INVALID", "", nil},
		{"unknown capability", []string{"-"}, strings.Replace(string(src), `"tool.invoke"]`, `"tool.invoke", "ledger.post"]`, 1), "PROGRAM_INVALID", "capabilities.capability_surface[3]", "expense-approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := flowRun(t, tt.stdin, append([]string{"flow", "check"}, tt.args...)...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			var rep struct {
				OK          bool `json:"ok"`
				ProgramID   any  `json:"program_id"`
				Fingerprint any  `json:"fingerprint"`
				Transitions int  `json:"transitions"`
				Errors      []struct{ Code, Path, Message string }
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if rep.OK || rep.Fingerprint != nil || len(rep.Errors) == 0 || rep.ProgramID != tt.id {
				t.Errorf("report = %+v", rep)
			}
			if len(rep.Errors) > 0 && (rep.Errors[0].Code != tt.code || rep.Errors[0].Path != tt.path || rep.Errors[0].Message == "") {
				t.Errorf("first error = %+v, want %s at %q", rep.Errors[0], tt.code, tt.path)
			}
			for _, k := range []string{`"ok":`, `"program_id":`, `"fingerprint":`, `"transitions":`, `"errors":`} {
				if !strings.Contains(out, k) {
					t.Errorf("output lacks %s", k)
				}
			}
		})
	}
}

func TestFlowCheckCapabilityFlag(t *testing.T) {
	src, err := os.ReadFile(flowExample(t, "expense-approval.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(src), `"tool.invoke"]`, `"tool.invoke", "ledger.post"]`, 1)
	if code, out, _ := flowRun(t, doc, "flow", "check", "--capability", "ledger.post", "-"); code != 0 {
		t.Errorf("with --capability: exit %d, %s", code, out)
	}
}

func TestFlowFingerprintAndCanonical(t *testing.T) {
	for _, name := range []string{"expense-approval", "deployment"} {
		golden, err := os.ReadFile("../../flow/testdata/" + name + ".canonical.json")
		if err != nil {
			t.Skip("golden files are not available")
		}
		code, out, _ := flowRun(t, "", "flow", "canonical", flowExample(t, name+".json"))
		if code != 0 || out != string(golden) {
			t.Errorf("%s: canonical exit %d, differs from golden:\n%s", name, code, out)
		}
		code, fp, _ := flowRun(t, "", "flow", "fingerprint", flowExample(t, name+".json"))
		if code != 0 || !strings.HasSuffix(fp, "\n") || len(fp) != len("sha256:")+64+1 {
			t.Errorf("%s: fingerprint exit %d, %q", name, code, fp)
		}
		_, check, _ := flowRun(t, "", "flow", "check", flowExample(t, name+".json"))
		if !strings.Contains(check, strings.TrimSpace(fp)) {
			t.Errorf("check and fingerprint disagree: %s vs %s", check, fp)
		}
	}
	code, out, errOut := flowRun(t, "{}", "flow", "fingerprint", "-")
	if code != 1 || out != "" || !strings.Contains(errOut, "PROGRAM_INVALID") {
		t.Errorf("invalid program: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestFlowResolve(t *testing.T) {
	prog := flowExample(t, "deployment.json")
	state := flowTemp(t, "state.json", `{"phase":"ready","facts":{"build.status":{"status":"known","value":"passed"}},"revision":4}`)
	service := flowTemp(t, "p.json", `{"id":"deployer","kind":"service","grants":["command.execute"]}`)
	tests := []struct {
		name string
		args []string
		exit int
		kind string
	}{
		{"missing parameter", []string{prog, "--state", state}, 0, "FRONTIER"},
		{"prescribed", []string{prog, "--state", state, "--param", "version=1.4.2"}, 0, "PRESCRIBED"},
		{"principal file", []string{prog, "--state", state, "--principal", service, "--param", "version=1.4.2"}, 0, "PRESCRIBED"},
		{"requested observed", []string{prog, "--state", state, "--request", "deploy-finished"}, 1, "REFUSED"},
		{"requested elsewhere", []string{prog, "--state", state, "--request", "mark-deployed"}, 1, "REFUSED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := flowRun(t, "", append([]string{"flow", "resolve"}, tt.args...)...)
			var d struct {
				Kind         string            `json:"kind"`
				Transition   string            `json:"transition"`
				Candidates   []string          `json:"candidates"`
				Reasons      []json.RawMessage `json:"reasons"`
				Prescription *struct {
					ID       string `json:"id"`
					Revision int    `json:"revision"`
				} `json:"prescription"`
			}
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("exit %d, output is not JSON: %v\n%s%s", code, err, out, errOut)
			}
			if code != tt.exit || d.Kind != tt.kind {
				t.Errorf("exit %d kind %s, want %d %s\n%s", code, d.Kind, tt.exit, tt.kind, out)
			}
			if tt.kind == "PRESCRIBED" && (d.Prescription == nil || !strings.HasPrefix(d.Prescription.ID, "prx-") || d.Prescription.Revision != 4 || d.Transition != "deployment/deploy") {
				t.Errorf("prescription = %+v", d.Prescription)
			}
			if d.Candidates == nil || d.Reasons == nil {
				t.Error("candidates and reasons must be arrays")
			}
		})
	}
}

func TestFlowResolveInputErrors(t *testing.T) {
	prog := flowExample(t, "deployment.json")
	good := flowTemp(t, "state.json", `{"phase":"ready","facts":{},"revision":0}`)
	bad := flowTemp(t, "bad.json", `{"phase":"ready","flags":{}}`)
	badPrincipal := flowTemp(t, "p.json", `{"id":"x","kind":"robot","grants":[]}`)
	tests := []struct {
		name string
		args []string
		exit int
	}{
		{"no state", []string{prog}, 2},
		{"bad param", []string{prog, "--state", good, "--param", "novalue"}, 2},
		{"bad state", []string{prog, "--state", bad}, 1},
		{"missing state file", []string{prog, "--state", filepath.Join(t.TempDir(), "none.json")}, 1},
		{"bad principal", []string{prog, "--state", good, "--principal", badPrincipal}, 1},
		{"bad runtime", []string{prog, "--state", good, "--runtime", "latest"}, 2},
		{"two programs", []string{prog, prog, "--state", good}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := flowRun(t, "", append([]string{"flow", "resolve"}, tt.args...)...)
			if code != tt.exit || errOut == "" {
				t.Errorf("exit %d (stderr %q), want %d with a message", code, errOut, tt.exit)
			}
		})
	}
}

func TestFlowUsage(t *testing.T) {
	for _, args := range [][]string{{"flow", "check"}, {"flow", "check", "a", "b"}, {"flow", "fingerprint"}, {"flow", "canonical"}, {"flow", "check", "--runtime", "1.2", "-"}, {"flow", "check", "--bogus", "-"}} {
		if code, _, _ := flowRun(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	for _, sub := range []string{"check", "fingerprint", "canonical", "resolve"} {
		code, out, _ := flowRun(t, "", "flow", sub, "--help")
		if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "assent flow "+sub) {
			t.Errorf("flow %s --help: exit %d\n%s", sub, code, out)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestTokenCreateFor(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := execute(append(args, "--data", dir), strings.NewReader(""), &out, &errw)
		return code, out.String(), errw.String()
	}
	var alice struct {
		Principal struct {
			ID string `json:"id"`
		} `json:"principal"`
	}
	code, out, _ := run("token", "create", "--kind", "human", "--name", "alice", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &alice) != nil {
		t.Fatalf("create alice: %d %s", code, out)
	}
	code, out, _ = run("token", "create", "--kind", "agent", "--name", "triage", "--for", "alice", "--json")
	if code != 0 {
		t.Fatalf("create --for alice: %d %s", code, out)
	}
	var agent struct {
		Principal struct {
			Supervisors []string `json:"supervisors"`
		} `json:"principal"`
	}
	if err := json.Unmarshal([]byte(out), &agent); err != nil || len(agent.Principal.Supervisors) != 1 || agent.Principal.Supervisors[0] != alice.Principal.ID {
		t.Fatalf("supervisors %q: %v", out, err)
	}
	code, _, errs := run("token", "create", "--kind", "agent", "--name", "x", "--for", "nobody")
	if code != exitRefused || !strings.Contains(errs, "unknown_supervisor") {
		t.Fatalf("unknown --for: exit %d %q", code, errs)
	}
}

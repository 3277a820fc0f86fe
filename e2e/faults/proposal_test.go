package faults

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// TestCommandProposalOutlivesItsNode runs two `assent serve` nodes on one
// PostgreSQL database. The agent files a command proposal on node A (an
// inline template, which an agent without command.execute may only
// propose), node A is killed with SIGKILL, and a person approves the
// proposal on node B: B runs exactly the recorded command as the agent's
// Run, which ends done with exit code 0 and the command's output, and the
// proposal reads approved on B.
func TestCommandProposalOutlivesItsNode(t *testing.T) {
	storeURL, _ := pgtest.URL(t)
	exe := buildAssent(t)
	dirB := t.TempDir()
	a := serve(t, exe, t.TempDir(), "ASSENT_STORE="+storeURL, "ASSENT_NODE=node-a")
	b := serve(t, exe, dirB, "ASSENT_STORE="+storeURL, "ASSENT_NODE=node-b")
	agent := a.token
	if agent == "" {
		t.Fatal("the first node printed no agent token")
	}
	const runID = "outlives-node-a"
	const marker = "proposed-on-node-a"
	code, filed, err := a.call("POST", "/v1/runs", agent, nil, map[string]any{
		"template": "echo " + marker, "run_id": runID, "reason": "check that a proposal outlives its node"})
	prop, _ := filed["proposal"].(string)
	if err != nil || code != http.StatusAccepted || prop == "" {
		t.Fatalf("filing on node A: %d %v %v; want 202 with a proposal", code, filed, err)
	}

	a.kill()
	if _, _, err := a.call("GET", "/v1/health", "", nil, nil); err == nil {
		t.Fatal("node A still answers after SIGKILL")
	}

	person := tokens(t, exe, dirB, storeURL, "human", 1)[0]
	if code, got, err := b.call("GET", "/v1/proposals/"+prop, person, nil, nil); err != nil || code != http.StatusOK || got["status"] != "pending" {
		t.Fatalf("node B reads the proposal: %d %v %v; want it pending", code, got, err)
	}
	if code, got, err := b.call("POST", "/v1/proposals/"+prop+"/approve", person, nil, map[string]any{}); err != nil || code != http.StatusOK {
		t.Fatalf("approving on node B: %d %v %v", code, got, err)
	}

	var view map[string]any
	testwait.EventuallyC(t, 20*time.Second, func(c *testwait.C) {
		var code int
		code, view, _ = b.call("GET", "/v1/runs/"+runID, agent, nil, nil)
		if code != http.StatusOK || view["status"] == "running" {
			c.Errorf("run %s on node B: %d %v", runID, code, view)
		}
	}, "the approved command's Run ending on node B")
	if view["status"] != "done" || view["exit_code"] != float64(0) {
		t.Errorf("the Run ended %v with exit code %v, want done and 0: %v", view["status"], view["exit_code"], view)
	}
	if out := b.text(t, "/v1/runs/"+runID+"/logs?stream=stdout", agent); !strings.Contains(out, marker) {
		t.Errorf("the Run's output is %q, want it to hold %q", out, marker)
	}
	if _, got, _ := b.call("GET", "/v1/proposals/"+prop, person, nil, nil); got["status"] != "approved" {
		t.Errorf("the proposal reads %v on node B, want approved", got)
	}
}

// text GETs path from s with token and returns the body as text.
func (s *server) text(t *testing.T, path, token string) string {
	t.Helper()
	req, err := http.NewRequest("GET", s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

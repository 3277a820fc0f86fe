package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/assent-run/assent/store"
)

func TestOversees(t *testing.T) {
	f := newFixture(t, nil)
	_, eve := f.issue(store.KindHuman, "eve")
	_, other := f.issue(store.KindAgent, "other")
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		p     store.Principal
		owner string
		want  bool
	}{
		{"owner supervises bootstrap agent", f.boot.Owner, f.boot.Agent.ID, true},
		{"owner supervises agents issued later", f.boot.Owner, other.ID, true},
		{"second person does not supervise", eve, f.boot.Agent.ID, false},
		{"agent does not oversee another agent", other, f.boot.Agent.ID, false},
		{"owning is seeing", eve, eve.ID, true},
		{"unowned is everyone's", eve, "", true},
	} {
		if got := f.srv.oversees(ctx, tc.p, tc.owner); got != tc.want {
			t.Errorf("%s: oversees = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A second person who does not supervise an agent asks for its Run by id
// and for the list of Runs: the Run is not_found and not listed; the
// agent's supervisor sees it.
func TestAttackUnsupervisingPersonReadsAgentRun(t *testing.T) {
	f := newFixture(t, nil)
	builder, _ := f.issue(store.KindAgent, "builder", "command.execute")
	eveTok, _ := f.issue(store.KindHuman, "eve")
	code, res, raw := f.api("POST", "/v1/runs", builder, map[string]any{"run_id": "sv", "template": "true"})
	if code != http.StatusOK && code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("spawn: %d %s", code, raw)
	}
	_ = res
	code, res, raw = f.api("GET", "/v1/runs/sv", eveTok, nil)
	if code != http.StatusNotFound || errCode(res) != "not_found" {
		t.Fatalf("eve reads the Run: %d %s", code, raw)
	}
	_, _, raw = f.api("GET", "/v1/runs", eveTok, nil)
	if strings.Contains(raw, `"sv"`) {
		t.Fatalf("eve lists the Run: %s", raw)
	}
	// The owner, who supervises every agent issued without --for, sees it.
	c, _ := f.signInAs(f.boot.Owner.ID)
	if page := readAll(f.get("/runs/sv", c)); !strings.Contains(page, "sv") {
		t.Fatalf("owner's Run page: %s", page)
	}
}

func TestWhoamiListsSupervisors(t *testing.T) {
	f := newFixture(t, nil)
	code, res, raw := f.api("GET", "/v1/whoami", f.token, nil)
	if code != http.StatusOK {
		t.Fatalf("whoami: %d %s", code, raw)
	}
	sup, _ := res["supervisors"].([]any)
	if len(sup) != 1 {
		t.Fatalf("supervisors: %s", raw)
	}
	s0, _ := sup[0].(map[string]any)
	if s0["id"] != f.boot.Owner.ID || s0["name"] != "owner" {
		t.Fatalf("supervisor: %s", raw)
	}
}

func TestIssueTokenForRejectsNonPerson(t *testing.T) {
	f := newFixture(t, nil)
	if _, _, err := IssueTokenFor(context.Background(), f.db, store.KindAgent, "x", nil, []string{f.boot.Agent.ID}, f.boot.Owner.CreatedAt); err == nil {
		t.Fatal("an agent was accepted as a supervisor")
	}
	if _, _, err := IssueTokenFor(context.Background(), f.db, store.KindAgent, "x", nil, []string{"p_missing"}, f.boot.Owner.CreatedAt); err == nil {
		t.Fatal("an unknown id was accepted as a supervisor")
	}
}

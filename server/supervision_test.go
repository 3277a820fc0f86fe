package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

func TestOversees(t *testing.T) {
	f := assenttest.Start(t, nil)
	_, eve := f.Issue(store.KindHuman, "eve")
	_, other := f.Issue(store.KindAgent, "other")
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		p     store.Principal
		owner string
		want  bool
	}{
		{"owner supervises bootstrap agent", f.Boot.Owner, f.Boot.Agent.ID, true},
		{"owner supervises agents issued later", f.Boot.Owner, other.ID, true},
		{"second person does not supervise", eve, f.Boot.Agent.ID, false},
		{"agent does not oversee another agent", other, f.Boot.Agent.ID, false},
		{"owning is seeing", eve, eve.ID, true},
		{"unowned is everyone's", eve, "", true},
	} {
		if got := f.Srv.Oversees(ctx, tc.p, tc.owner); got != tc.want {
			t.Errorf("%s: oversees = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A second person who does not supervise an agent asks for its Run by id
// and for the list of Runs: the Run is not_found and not listed; the
// agent's supervisor sees it.
func TestAttackUnsupervisingPersonReadsAgentRun(t *testing.T) {
	f := assenttest.Start(t, nil)
	builder, _ := f.Issue(store.KindAgent, "builder", "command.execute")
	eveTok, _ := f.Issue(store.KindHuman, "eve")
	code, res, raw := f.API("POST", "/v1/runs", builder, map[string]any{"run_id": "sv", "template": "true"})
	if code != http.StatusOK && code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("spawn: %d %s", code, raw)
	}
	_ = res
	code, res, raw = f.API("GET", "/v1/runs/sv", eveTok, nil)
	if code != http.StatusNotFound || assenttest.ErrCode(res) != "not_found" {
		t.Fatalf("eve reads the Run: %d %s", code, raw)
	}
	_, _, raw = f.API("GET", "/v1/runs", eveTok, nil)
	if strings.Contains(raw, `"sv"`) {
		t.Fatalf("eve lists the Run: %s", raw)
	}
	// The owner, who supervises every agent issued without --for, sees it.
	c, _ := f.SignInAs(f.Boot.Owner.ID)
	if page := assenttest.ReadAll(f.Get("/runs/sv", c)); !strings.Contains(page, "sv") {
		t.Fatalf("owner's Run page: %s", page)
	}
}

func TestWhoamiListsSupervisors(t *testing.T) {
	f := assenttest.Start(t, nil)
	code, res, raw := f.API("GET", "/v1/whoami", f.Token, nil)
	if code != http.StatusOK {
		t.Fatalf("whoami: %d %s", code, raw)
	}
	sup, _ := res["supervisors"].([]any)
	if len(sup) != 1 {
		t.Fatalf("supervisors: %s", raw)
	}
	s0, _ := sup[0].(map[string]any)
	if s0["id"] != f.Boot.Owner.ID || s0["name"] != "owner" {
		t.Fatalf("supervisor: %s", raw)
	}
}

func TestIssueTokenForRejectsNonPerson(t *testing.T) {
	f := assenttest.Start(t, nil)
	if _, _, err := auth.IssueTokenFor(context.Background(), f.DB, store.KindAgent, "x", nil, []string{f.Boot.Agent.ID}, f.Boot.Owner.CreatedAt); err == nil {
		t.Fatal("an agent was accepted as a supervisor")
	}
	if _, _, err := auth.IssueTokenFor(context.Background(), f.DB, store.KindAgent, "x", nil, []string{"p_missing"}, f.Boot.Owner.CreatedAt); err == nil {
		t.Fatal("an unknown id was accepted as a supervisor")
	}
}

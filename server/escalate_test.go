package server_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// escClock is a settable clock for a server.
type escClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *escClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *escClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// escalation is a server with a clock, an agent supervised by ada, and
// group oncall whose one member is carol.
type escalation struct {
	f               *assenttest.Kit
	c               *escClock
	mod             func(*server.Config)
	token, adaToken string
	ada, ben, carol store.Principal
}

func newEscalation(t *testing.T) *escalation {
	e := &escalation{c: &escClock{now: time.Now().UTC().Truncate(time.Second)}}
	e.mod = func(cfg *server.Config) { cfg.Now = e.c.Now }
	e.f = assenttest.Start(t, e.mod)
	e.adaToken, e.ada = e.f.Issue(store.KindHuman, "ada", "state.write")
	_, e.ben = e.f.Issue(store.KindHuman, "ben", "state.write")
	_, e.carol = e.f.Issue(store.KindHuman, "carol", "state.write")
	if err := e.f.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "oncall", PrincipalID: e.carol.ID, AddedAt: e.c.Now()}); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.token, _, err = e.f.Srv.AddAgent(context.Background(), "planner", e.f.Boot.Agent.Grants, e.ada.ID); err != nil {
		t.Fatal(err)
	}
	return e
}

// propose files a command proposal of the agent with body's extras.
func (e *escalation) propose(t *testing.T, runID string, extra map[string]any) (int, map[string]any, string) {
	t.Helper()
	body := map[string]any{"template": "true", "run_id": runID}
	for k, v := range extra {
		body[k] = v
	}
	return e.f.API("POST", "/v1/runs", e.token, body)
}

// sweep runs n sweeps of the command proposals' deadlines at once, as
// nodes sharing a store do.
func (e *escalation) sweep(t *testing.T, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := e.f.Srv.Runs().ExpireDue(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func auditCount(t *testing.T, db store.Store, subject, action string) int {
	t.Helper()
	recs, err := db.Audit().ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Subject == subject && r.Action == action {
			n++
		}
	}
	return n
}

// escalate_to is refused before anything is filed when it names a group
// without members (invalid_value) or comes without a deadline
// (invalid_request).
func TestCommandProposalEscalationRefused(t *testing.T) {
	e := newEscalation(t)
	for _, tc := range []struct {
		name  string
		extra map[string]any
		code  int
		err   string
	}{
		{"group without members", map[string]any{"deadline_seconds": 60, "escalate_to": "nobody"}, 403, "invalid_value"},
		{"not a group name", map[string]any{"deadline_seconds": 60, "escalate_to": strings.Repeat("x", 300)}, 403, "invalid_value"},
		{"no deadline", map[string]any{"escalate_to": "oncall"}, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, raw := e.propose(t, "refused", tc.extra)
			if code != tc.code || assenttest.ErrCode(body) != tc.err {
				t.Errorf("%d %s, want %d %s", code, raw, tc.code, tc.err)
			}
		})
	}
	if ps, _ := e.f.DB.Proposals().ListProposals(t.Context(), "", "", 0); len(ps) != 0 {
		t.Errorf("refused requests filed %d proposals", len(ps))
	}
	if ds, _ := e.f.DB.Deadlines().DueDeadlines(t.Context(), "", e.c.Now().Add(time.Hour), 10); len(ds) != 0 {
		t.Errorf("refused requests kept deadlines %+v", ds)
	}
}

// At its first deadline a command proposal naming escalate_to is routed
// to that group once, even with several sweeps at once: it gets a new
// deadline as long as the first, its card says so and is asked of the
// group, the agent's supervisor may no longer decide it (403
// not_routed), the group's member may, inbox_wait says it was escalated,
// and at the second deadline it is declined.
func TestCommandProposalEscalatesOnce(t *testing.T) {
	e := newEscalation(t)
	ids := map[string]string{}
	for _, runID := range []string{"kept", "decided"} {
		code, body, raw := e.propose(t, runID, map[string]any{"deadline_seconds": 60, "escalate_to": "oncall"})
		if code != 202 || !strings.Contains(raw, "escalated to group oncall") {
			t.Fatalf("propose %s: %d %s", runID, code, raw)
		}
		ids[runID] = body["proposal"].(string)
	}
	e.c.Add(time.Minute)
	e.sweep(t, 4)
	for _, id := range ids {
		p, err := e.f.DB.Proposals().Proposal(t.Context(), id)
		if err != nil || p.Status != store.ProposalPending {
			t.Fatalf("after the first deadline: %+v %v, want pending", p, err)
		}
		d, err := e.f.DB.Deadlines().Deadline(t.Context(), store.DeadlineCommandProposal, id)
		if err != nil || !d.Escalated() || !d.Due.Equal(e.c.Now().Add(time.Minute)) {
			t.Fatalf("deadline after escalation = %+v %v, want escalated, due in a minute", d, err)
		}
		if n := auditCount(t, e.f.DB, "proposal:"+id, "proposal.escalate"); n != 1 {
			t.Fatalf("%d audit records of the escalation, want 1", n)
		}
	}

	ownerCookie, _ := e.f.SignInAs(e.f.Boot.Owner.ID)
	var owners api.Inbox
	if c := session(t, e.f, ownerCookie, "", "GET", "/v1/inbox", nil, &owners); c != 200 {
		t.Fatalf("owner's inbox: %d", c)
	}
	card, ok := byKind(owners, "command_proposal")
	if !ok || card.AskedOf != "Asked of group oncall: carol" {
		t.Fatalf("card = %+v (found %v), want asked of group oncall", card, ok)
	}
	escalated := false
	for _, fl := range card.Fields {
		escalated = escalated || strings.HasPrefix(fl.Value, "Escalated to oncall")
	}
	if !escalated {
		t.Errorf("the card does not say it was escalated: %+v", card.Fields)
	}

	adaCookie, adaCSRF := e.f.SignInAs(e.ada.ID)
	var we struct {
		Error wire.Error `json:"error"`
	}
	decided := "command_proposal:" + ids["decided"] + "@pending"
	path := "/v1/inbox/" + url.PathEscape(decided) + "/decision"
	if c := session(t, e.f, adaCookie, adaCSRF, "POST", path, api.InboxDecision{Decision: api.DecisionDecline}, &we); c != 403 || we.Error.Code != wire.NotRouted {
		t.Fatalf("the supervisor's decision after escalation = %d %+v, want 403 not_routed", c, we)
	}
	if code, body, raw := e.f.API("POST", "/v1/proposals/"+ids["decided"]+"/decline", e.adaToken, map[string]any{}); code != 403 || assenttest.ErrCode(body) != "not_routed" {
		t.Fatalf("the supervisor's API decline after escalation = %d %s, want 403 not_routed", code, raw)
	}
	carolCookie, carolCSRF := e.f.SignInAs(e.carol.ID)
	if c := session(t, e.f, carolCookie, carolCSRF, "POST", path, api.InboxDecision{Decision: api.DecisionDecline}, nil); c != 200 {
		t.Fatalf("the group member's decision = %d, want 200", c)
	}
	if p, _ := e.f.DB.Proposals().Proposal(t.Context(), ids["decided"]); p.Status != store.ProposalDeclined || p.DecidedBy != e.carol.ID {
		t.Fatalf("after carol's decline: %+v", p)
	}

	cs, err := e.f.MCPSession(e.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"command_proposal": ids["kept"]}}, "timeout_ms": 0})
	items, _ := out["items"].([]any)
	if isErr || len(items) != 1 {
		t.Fatalf("inbox_wait: %v", out)
	}
	if got := items[0].(map[string]any); got["status"] != "pending" || !strings.Contains(got["reason"].(string), "escalated to group oncall") {
		t.Fatalf("inbox_wait after escalation: %v", got)
	}

	e.c.Add(time.Minute)
	e.sweep(t, 4)
	p, err := e.f.DB.Proposals().Proposal(t.Context(), ids["kept"])
	if err != nil || p.Status != store.ProposalDeclined || p.Reason != run.NoDecision {
		t.Fatalf("after the second deadline: %+v %v", p, err)
	}
	if n := auditCount(t, e.f.DB, "proposal:"+ids["kept"], "proposal.expire"); n != 1 {
		t.Fatalf("%d audit records of the decline, want 1", n)
	}
	if n := auditCount(t, e.f.DB, "proposal:"+ids["kept"], "proposal.escalate"); n != 1 {
		t.Fatalf("%d audit records of the escalation after the second deadline, want 1", n)
	}
}

// A proposal whose first deadline passed while no server ran is escalated
// by the next process, and declined by a later one at its second: both
// stages are kept in the store.
func TestCommandProposalEscalationSurvivesRestart(t *testing.T) {
	e := newEscalation(t)
	code, body, raw := e.propose(t, "later", map[string]any{"deadline_seconds": 3600, "escalate_to": "oncall"})
	if code != 202 {
		t.Fatalf("propose: %d %s", code, raw)
	}
	id := body["proposal"].(string)
	e.c.Add(2 * time.Hour)
	g := e.f.Restart(e.mod)
	testwait.Eventually(t, 10*time.Second, func() bool {
		d, err := g.DB.Deadlines().Deadline(t.Context(), store.DeadlineCommandProposal, id)
		return err == nil && d.Escalated()
	}, "the restarted server escalates the proposal past its first deadline")
	if p, _ := g.DB.Proposals().Proposal(t.Context(), id); p.Status != store.ProposalPending {
		t.Fatalf("escalated proposal is %s, want pending", p.Status)
	}
	e.c.Add(2 * time.Hour)
	h := g.Restart(e.mod)
	testwait.Eventually(t, 10*time.Second, func() bool {
		p, err := h.DB.Proposals().Proposal(t.Context(), id)
		return err == nil && p.Status == store.ProposalDeclined && p.Reason == run.NoDecision
	}, "the next server declines it past its second deadline")
	if n := auditCount(t, h.DB, "proposal:"+id, "proposal.escalate"); n != 1 {
		t.Fatalf("%d audit records of the escalation, want 1", n)
	}
}

// escalate_to goes with actors_run_spawn and actors_tool_register too: a
// group with members is kept with the proposal's deadline, one without is
// refused (invalid_value) before anything is filed.
func TestCommandProposalEscalationOverMCP(t *testing.T) {
	e := newEscalation(t)
	cs, err := e.f.MCPSession(e.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"actors_run_spawn", map[string]any{"template": "true", "as": "run:mcp-spawn"}},
		{"actors_tool_register", map[string]any{"name": "planner_hello", "template": "echo hi", "description": "hi"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			args := map[string]any{"deadline_seconds": 60, "escalate_to": "nobody"}
			for k, v := range tc.args {
				args[k] = v
			}
			out, isErr := assenttest.CallTool(t, cs, tc.tool, args)
			if b, _ := json.Marshal(out); !isErr || !strings.Contains(string(b), "invalid_value") {
				t.Fatalf("escalate_to a group without members: %s", b)
			}
			args["escalate_to"] = "oncall"
			out, isErr = assenttest.CallTool(t, cs, tc.tool, args)
			id, _ := out["proposal"].(string)
			if isErr || id == "" {
				t.Fatalf("propose: %v", out)
			}
			d, err := e.f.DB.Deadlines().Deadline(t.Context(), store.DeadlineCommandProposal, id)
			if err != nil || d.EscalateTo != "oncall" || d.Escalated() {
				t.Fatalf("kept deadline = %+v %v, want one escalating to oncall", d, err)
			}
		})
	}
	if ps, _ := e.f.DB.Proposals().ListProposals(t.Context(), "", "", 0); len(ps) != 2 {
		t.Errorf("%d proposals filed, want the 2 accepted", len(ps))
	}
}

// An agent waiting on its command proposal in inbox_wait hears when the
// proposal is escalated to a group at its first deadline: the wait ends
// with the item still pending and the group named, before its timeout.
func TestInboxWaitHearsEscalation(t *testing.T) {
	e := newEscalation(t)
	cs, err := e.f.MCPSession(e.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	code, body, raw := e.propose(t, "esc-wait", map[string]any{"deadline_seconds": 60, "escalate_to": "oncall"})
	id, _ := body["proposal"].(string)
	if code/100 != 2 || id == "" {
		t.Fatalf("propose: %d %s", code, raw)
	}
	started := make(chan struct{})
	done := make(chan map[string]any, 1)
	go func() {
		close(started)
		out, _ := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"command_proposal": id}}, "timeout_ms": 30000})
		done <- out
	}()
	<-started
	// The wait is not over while nothing happened.
	select {
	case out := <-done:
		t.Fatalf("inbox_wait ended before the deadline: %v", out)
	case <-time.After(500 * time.Millisecond):
	}
	e.c.Add(61 * time.Second)
	e.sweep(t, 1)
	var out map[string]any
	select {
	case out = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("inbox_wait did not end when the proposal was escalated")
	}
	items, _ := out["items"].([]any)
	if len(items) != 1 || out["timed_out"] != false {
		t.Fatalf("inbox_wait: %v", out)
	}
	it, _ := items[0].(map[string]any)
	if reason, _ := it["reason"].(string); it["status"] != "pending" || !strings.HasPrefix(reason, "escalated to group oncall") {
		t.Fatalf("the escalated item: %v, want pending and escalated to group oncall", it)
	}
}

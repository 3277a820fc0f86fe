package runs_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// clock is a settable clock for a server.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newClock() *clock { return &clock{now: time.Now().UTC().Truncate(time.Second)} }

// expireAudits counts the audit records of proposal id declined at its
// deadline.
func expireAudits(t *testing.T, f *fixture, id string) int {
	t.Helper()
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Subject == "proposal:"+id && r.Action == "proposal.expire" {
			n++
		}
	}
	return n
}

// A command proposal filed with deadline_seconds shows its deadline on the
// card; once it passes with nobody deciding, it is declined once with the
// reason "no decision before the deadline", even when several sweeps run
// at once, the audit log records it once, and the agent learns it through
// inbox_wait. A proposal without a deadline (and no default) stays.
func TestCommandProposalDeadlineDeclinesOnce(t *testing.T) {
	c := newClock()
	f := newFixture(t, func(cfg *server.Config) { cfg.Now = c.Now })
	var timed, open run.PendingApproval
	if code := f.Do("POST", "/v1/runs", f.Token, map[string]any{"template": "true", "run_id": "timed", "deadline_seconds": 60}, &timed); code != 202 {
		t.Fatalf("propose with a deadline: %d", code)
	}
	if want := store.FormatTime(c.Now().Add(time.Minute)); timed.Deadline != want {
		t.Fatalf("deadline %q, want %q", timed.Deadline, want)
	}
	if code := f.Do("POST", "/v1/runs", f.Token, map[string]any{"template": "true", "run_id": "open"}, &open); code != 202 || open.Deadline != "" {
		t.Fatalf("propose without a deadline: %d %+v", code, open)
	}
	cookie, _ := f.SignIn()
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	if !strings.Contains(inbox, "Decide by") || !strings.Contains(inbox, `datetime="`+c.Now().Add(time.Minute).Format("2006-01-02T15:04:05Z")) {
		t.Fatalf("the card does not show the deadline %s:\n%s", timed.Deadline, inbox)
	}

	c.Add(time.Minute)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := f.Srv.Runs().ExpireDue(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	p, err := f.DB.Proposals().Proposal(t.Context(), timed.Proposal)
	if err != nil || p.Status != store.ProposalDeclined || p.Reason != run.NoDecision || p.DecidedBy != "" {
		t.Fatalf("after the deadline: %+v %v", p, err)
	}
	if n := expireAudits(t, f, timed.Proposal); n != 1 {
		t.Fatalf("%d audit records of the expiry, want 1", n)
	}
	if p, _ := f.DB.Proposals().Proposal(t.Context(), open.Proposal); p.Status != store.ProposalPending {
		t.Fatalf("the proposal without a deadline is %s", p.Status)
	}
	if _, err := f.DB.Deadlines().Deadline(t.Context(), store.DeadlineCommandProposal, timed.Proposal); err == nil {
		t.Error("the deadline is still kept after it fired")
	}

	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"command_proposal": timed.Proposal}}, "timeout_ms": 0})
	items, _ := out["items"].([]any)
	if isErr || len(items) != 1 {
		t.Fatalf("inbox_wait: %v", out)
	}
	if got := items[0].(map[string]any); got["status"] != "declined" || got["reason"] != run.NoDecision {
		t.Fatalf("inbox_wait: %v", got)
	}
}

// A proposal filed under the server's default deadline for commands is
// declined by the next process when its deadline passed while no server
// ran: the deadline is kept in the store.
func TestCommandProposalDeadlineSurvivesRestart(t *testing.T) {
	c := newClock()
	withDefault := func(cfg *server.Config) {
		cfg.Now = c.Now
		cfg.DecisionDeadlines = map[string]time.Duration{server.DeadlineCommand: time.Hour}
	}
	f := newFixture(t, withDefault)
	var pa run.PendingApproval
	if code := f.Do("POST", "/v1/runs", f.Token, map[string]any{"template": "true", "run_id": "later"}, &pa); code != 202 {
		t.Fatalf("propose: %d", code)
	}
	if want := store.FormatTime(c.Now().Add(time.Hour)); pa.Deadline != want {
		t.Fatalf("default deadline %q, want %q", pa.Deadline, want)
	}
	c.Add(2 * time.Hour)
	g := &fixture{f.Restart(withDefault)}
	testwait.Eventually(t, 10*time.Second, func() bool {
		p, err := g.DB.Proposals().Proposal(t.Context(), pa.Proposal)
		return err == nil && p.Status == store.ProposalDeclined && p.Reason == run.NoDecision
	}, "the restarted server declines the proposal past its deadline")
	if n := expireAudits(t, g, pa.Proposal); n != 1 {
		t.Fatalf("%d audit records of the expiry, want 1", n)
	}
}

// deadline_seconds out of bounds is refused before anything is filed.
func TestCommandProposalDeadlineBounds(t *testing.T) {
	f := newFixture(t, nil)
	for _, n := range []int64{-1, run.MaxDeadlineSeconds + 1} {
		code, body, raw := f.API("POST", "/v1/runs", f.Token, map[string]any{"template": "true", "deadline_seconds": n})
		if code != 400 || assenttest.ErrCode(body) != "invalid_request" {
			t.Errorf("deadline_seconds %d: %d %s", n, code, raw)
		}
	}
	if ps, _ := f.DB.Proposals().ListProposals(t.Context(), "", "", 0); len(ps) != 0 {
		t.Errorf("refused requests filed %d proposals", len(ps))
	}
}

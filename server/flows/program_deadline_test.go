package flows_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
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

// programExpireAudits counts the audit records of the program with
// fingerprint fp declined at its deadline.
func programExpireAudits(t *testing.T, f *assenttest.Kit, fp string) int {
	t.Helper()
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Subject == "program:"+fp && r.Action == "flow.program.expire" {
			if r.Source != "deadline" || r.Reason != flow.NoDecision {
				t.Errorf("audit record %+v", r)
			}
			n++
		}
	}
	return n
}

// An agent's program proposed with deadline_seconds shows "Decide by" on
// its card; once the deadline passes with nobody deciding, it is declined
// once, by the deadline rather than a person, with the reason "no decision
// before the deadline", even when several sweeps run at once; the audit
// log records it once and the agent hears it through inbox_wait.
func TestProgramProposalDeadlineDeclinesOnce(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	f := assenttest.StartDemo(t, func(cfg *server.Config) { cfg.Now = c.Now })
	code, out, raw := f.API("POST", "/v1/flows/programs?deadline_seconds=60&reason=pay+faster", f.Token, []byte(sneakProgram))
	proposal := assenttest.As[api.ProgramProposal](t, out)
	fp := proposal.Program.Fingerprint
	due := c.Now().Add(time.Minute)
	if code != 202 || !proposal.Deadline.Equal(due) {
		t.Fatalf("propose with a deadline: %d %s", code, raw)
	}
	_, person := f.Issue(store.KindHuman, "approver")
	cookie, _ := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	if !strings.Contains(inbox, "Decide by") || !strings.Contains(inbox, `datetime="`+due.Format("2006-01-02T15:04:05Z")) {
		t.Fatalf("the card does not show the deadline %s:\n%s", due, inbox)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wait := func() map[string]any {
		t.Helper()
		out, isErr := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"program": fp}}, "timeout_ms": 0})
		items, _ := out["items"].([]any)
		if isErr || len(items) != 1 {
			t.Fatalf("inbox_wait: %v", out)
		}
		return items[0].(map[string]any)
	}
	if got := wait(); got["status"] != "pending" {
		t.Fatalf("inbox_wait before the deadline: %v", got)
	}

	c.Add(time.Minute)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := f.Srv.Flows().ExpireProgramProposals(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	l, err := f.Srv.Flows().Kernel().ProgramLoad(t.Context(), fp)
	if err != nil || l.Status != flow.ProgramDeclined || l.Reason != flow.NoDecision || l.DecidedBy != "" || l.DecidedBySystem != flow.DeciderDeadline {
		t.Fatalf("after the deadline: %+v %v", l, err)
	}
	if n := programExpireAudits(t, f, fp); n != 1 {
		t.Fatalf("%d audit records of the expiry, want 1", n)
	}
	if _, err := f.DB.Deadlines().Deadline(t.Context(), store.DeadlineProgramProposal, fp); err == nil {
		t.Error("the deadline is still kept after it fired")
	}
	if got := wait(); got["status"] != "declined" || got["reason"] != flow.NoDecision || got["decided_by"] != flow.DeciderDeadline {
		t.Fatalf("inbox_wait after the deadline: %v", got)
	}
	// Another agent does not learn of it.
	otherTok, _ := f.Issue(store.KindAgent, "other")
	ocs, err := f.MCPSession(otherTok, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ocs.Close()
	if out, _ := assenttest.CallTool(t, ocs, "inbox_wait", map[string]any{"items": []any{map[string]any{"program": fp}}, "timeout_ms": 0}); !strings.Contains(fmt.Sprint(out), "not_found") {
		t.Fatalf("another agent's inbox_wait: %v", out)
	}
	if inbox := assenttest.ReadAll(f.Get("/inbox", cookie)); strings.Contains(inbox, "/web/flows/programs/"+fp+"/approve") {
		t.Fatal("the declined program is still decidable in the inbox")
	}
}

// A program a person decides before its deadline is not declined when the
// deadline passes, a person's decision removes the deadline, and a
// proposal naming no deadline (with no default) waits on, even one
// proposed again after a decline.
func TestProgramProposalDeadlineLeavesDecided(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	f := assenttest.StartDemo(t, func(cfg *server.Config) { cfg.Now = c.Now })
	code, out, raw := f.API("POST", "/v1/flows/programs?deadline_seconds=60", f.Token, []byte(sneakProgram))
	if code != 202 {
		t.Fatalf("propose: %d %s", code, raw)
	}
	fp := assenttest.As[api.ProgramProposal](t, out).Program.Fingerprint
	if _, err := f.Srv.Flows().Kernel().ApproveProgram(t.Context(), fp, flow.Principal{ID: "p1", Kind: flow.AuthorityHuman}); err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(sneakProgram, `"program_id": "sneak"`, `"program_id": "sneak-two"`, 1)
	code, out, raw = f.API("POST", "/v1/flows/programs", f.Token, []byte(other))
	open := assenttest.As[api.ProgramProposal](t, out)
	if code != 202 || !open.Deadline.IsZero() {
		t.Fatalf("propose without a deadline: %d %s", code, raw)
	}
	// A person declines a third in the inbox: its deadline goes with the
	// decision, and proposing it again without one waits on.
	third := strings.Replace(sneakProgram, `"program_id": "sneak"`, `"program_id": "sneak-three"`, 1)
	code, out, raw = f.API("POST", "/v1/flows/programs?deadline_seconds=60", f.Token, []byte(third))
	redo := assenttest.As[api.ProgramProposal](t, out).Program.Fingerprint
	if code != 202 {
		t.Fatalf("propose a third: %d %s", code, raw)
	}
	_, person := f.Issue(store.KindHuman, "approver")
	cookie, csrf := f.SignInAs(person.ID)
	f.Decide("/web/flows/programs/"+redo+"/decline", url.Values{"csrf": {csrf}, "reason": {"not now"}}, cookie)
	if l, _ := f.Srv.Flows().Kernel().ProgramLoad(t.Context(), redo); l.Status != flow.ProgramDeclined || l.DecidedBy != person.ID {
		t.Fatalf("the person's decline: %+v", l)
	}
	if _, err := f.DB.Deadlines().Deadline(t.Context(), store.DeadlineProgramProposal, redo); err == nil {
		t.Error("the deadline is kept after a person decided")
	}
	if code, _, raw := f.API("POST", "/v1/flows/programs", f.Token, []byte(third)); code != 202 {
		t.Fatalf("propose the third again: %d %s", code, raw)
	}
	c.Add(time.Hour)
	if got, err := f.Srv.Flows().ExpireProgramProposals(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("expired %v, %v; want none", got, err)
	}
	if l, _ := f.Srv.Flows().Kernel().ProgramLoad(t.Context(), fp); l.Status != flow.ProgramActive {
		t.Fatalf("the approved program is %s", l.Status)
	}
	for _, fp := range []string{open.Program.Fingerprint, redo} {
		if l, _ := f.Srv.Flows().Kernel().ProgramLoad(t.Context(), fp); l.Status != flow.ProgramProposed {
			t.Fatalf("the program %s without a deadline is %s", fp, l.Status)
		}
	}
}

// A program proposed under the server's default deadline for programs is
// declined by the next process when its deadline passed while no server
// ran: the deadline is kept in the store.
func TestProgramProposalDeadlineSurvivesRestart(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	withDefault := func(cfg *server.Config) {
		cfg.Now = c.Now
		cfg.DecisionDeadlines = map[string]time.Duration{server.DeadlineProgram: time.Hour}
	}
	f := assenttest.StartDemo(t, withDefault)
	code, out, raw := f.API("POST", "/v1/flows/programs", f.Token, []byte(sneakProgram))
	proposal := assenttest.As[api.ProgramProposal](t, out)
	if code != 202 || !proposal.Deadline.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("propose under the default: %d %s", code, raw)
	}
	fp := proposal.Program.Fingerprint
	c.Add(2 * time.Hour)
	g := f.Restart(withDefault)
	testwait.Eventually(t, 10*time.Second, func() bool {
		l, err := g.Srv.Flows().Kernel().ProgramLoad(t.Context(), fp)
		return err == nil && l.Status == flow.ProgramDeclined && l.Reason == flow.NoDecision
	}, "the restarted server declines the program past its deadline")
	if n := programExpireAudits(t, g, fp); n != 1 {
		t.Fatalf("%d audit records of the expiry, want 1", n)
	}
}

// deadline_seconds that is not a whole number from 1 to 30 days is
// refused with 400 before anything is stored.
func TestProgramProposalDeadlineBounds(t *testing.T) {
	f := assenttest.StartDemo(t)
	for _, v := range []string{"-1", "0", "2592001", "1.5", "soon", "99999999999999999999"} {
		code, body, raw := f.API("POST", "/v1/flows/programs?deadline_seconds="+v, f.Token, []byte(sneakProgram))
		if code != 400 || assenttest.ErrCode(body) != "invalid_request" {
			t.Errorf("deadline_seconds %s: %d %s", v, code, raw)
		}
	}
	loads, err := f.Srv.Flows().Kernel().ProgramLoads(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range loads {
		if l.ProgramID == "sneak" {
			t.Errorf("a refused request stored %+v", l)
		}
	}
}

package controls_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/store"
)

// clock is a settable clock for a server.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// deadlineDiscards counts the audit records of discards a deadline made
// on control profile/plan.
func deadlineDiscards(t *testing.T, f *assenttest.Kit) int {
	t.Helper()
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{FormID: "profile"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.ControlID == "plan" && r.Action == "discard" && r.Source == string(controls.SourceDeadline) {
			if r.Reason != controls.NoDecision || r.PrincipalID != "" || !r.OK {
				t.Errorf("deadline's audit record: %+v", r)
			}
			n++
		}
	}
	return n
}

// A value an agent stages with deadline_seconds shows its deadline on the
// card; once it passes with nobody deciding, it is discarded once, even
// when several sweeps run at once, the audit log records it once with the
// reason "no decision before the deadline", and the agent learns it
// through inbox_wait.
func TestStagedValueDeadlineDiscardsOnce(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	f := assenttest.StartDemo(t, func(cfg *server.Config) { cfg.Now = c.Now })
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "pro", "deadline_seconds": 30})
	if isErr || out["ok"] != true || out["deadline"] != store.FormatTime(c.Now().Add(30*time.Second)) {
		t.Fatalf("stage: %v", out)
	}
	rev := out["snapshot"].(map[string]any)["state"].(map[string]any)["staged"].(map[string]any)["revision"].(float64)
	cookie, _ := f.SignIn()
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	if !strings.Contains(inbox, "Decide by") || !strings.Contains(inbox, `datetime="`+c.Now().Add(30*time.Second).Format("2006-01-02T15:04:05Z")) {
		t.Fatalf("the card does not show the deadline:\n%s", inbox)
	}

	c.Add(30 * time.Second)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := f.Srv.Controls().ExpireDue(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": plan})
	if st := snap["state"].(map[string]any); st["staged"] != nil {
		t.Fatalf("after the deadline the value is still staged: %v", st)
	}
	if n := deadlineDiscards(t, f); n != 1 {
		t.Fatalf("%d discards by the deadline in the audit log, want 1", n)
	}
	// The discard's event reaches the wait through the bus (on PostgreSQL
	// a notification after the commit), so the agent waits for it rather
	// than reading at once.
	w, isErr := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"proposal": plan, "revision": rev}}, "timeout_ms": 10000})
	items, _ := w["items"].([]any)
	if isErr || len(items) != 1 {
		t.Fatalf("inbox_wait: %v", w)
	}
	if got := items[0].(map[string]any); got["status"] != "discarded" || got["reason"] != controls.NoDecision {
		t.Fatalf("inbox_wait: %v", got)
	}
}

// The server's default deadline for staged values applies to a stage
// without deadline_seconds, is kept in the store, and a restarted server
// discards the value when the deadline passed while no server ran.
func TestStagedValueDefaultDeadlineSurvivesRestart(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	withDefault := func(cfg *server.Config) {
		cfg.Now = c.Now
		cfg.DecisionDeadlines = map[string]time.Duration{server.DeadlineProposal: time.Hour}
	}
	f := assenttest.StartDemo(t, withDefault)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "team"})
	cs.Close()
	if isErr || out["deadline"] != store.FormatTime(c.Now().Add(time.Hour)) {
		t.Fatalf("stage: %v", out)
	}
	c.Add(2 * time.Hour)
	g := f.Restart(withDefault)
	testwait.Eventually(t, 10*time.Second, func() bool { return deadlineDiscards(t, g) == 1 }, "the restarted server discards the value past its deadline")
	if snap, ok := g.Srv.Controls().Registry().Get(t.Context(), controlID("profile", "plan")); !ok || snap.State.Staged != nil {
		t.Fatalf("after restart: %+v", snap.State)
	}
}

// deadline_seconds out of bounds, or with another action than stage, is
// refused.
func TestStagedValueDeadlineBounds(t *testing.T) {
	f := assenttest.StartDemo(t)
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	for _, body := range []map[string]any{
		{"action": "stage", "identity": plan, "value": "pro", "deadline_seconds": -1},
		{"action": "stage", "identity": plan, "value": "pro", "deadline_seconds": controls.MaxDeadlineSeconds + 1},
		{"action": "focus", "identity": plan, "deadline_seconds": 60},
	} {
		code, out, raw := f.API("POST", "/v1/controls/execute", f.Token, body)
		if code != 400 || out["reason"] != "invalid_request" {
			t.Errorf("%v: %d %s", body, code, raw)
		}
	}
}

func controlID(form, ctl string) control.Identity {
	return control.Identity{FormID: form, ControlID: ctl}
}

// A value staged while no deadline was kept for it (a process that
// stopped between staging it and keeping its deadline, here one without a
// default) gets the default deadline, counted from when it was staged,
// from the next process, which discards it once that has passed.
func TestStagedValueWithoutKeptDeadlineGetsTheDefault(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	f := assenttest.StartDemo(t, func(cfg *server.Config) { cfg.Now = c.Now })
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "team"})
	cs.Close()
	if isErr || out["ok"] != true || out["deadline"] != nil {
		t.Fatalf("stage without a deadline: %v", out)
	}
	c.Add(2 * time.Hour)
	g := f.Restart(func(cfg *server.Config) {
		cfg.Now = c.Now
		cfg.DecisionDeadlines = map[string]time.Duration{server.DeadlineProposal: time.Hour}
	})
	testwait.Eventually(t, 10*time.Second, func() bool { return deadlineDiscards(t, g) == 1 }, "the value staged two hours ago is discarded under the one-hour default")
}

// The server's default deadline is for values agents stage: a person's own
// stage gets none unless it names one.
func TestDefaultDeadlineIsForAgentsStages(t *testing.T) {
	f := assenttest.StartDemo(t, func(cfg *server.Config) {
		cfg.DecisionDeadlines = map[string]time.Duration{server.DeadlineProposal: time.Hour}
	})
	person, _ := f.Issue(store.KindHuman, "ada", "state.write")
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	for _, c := range []struct {
		token   string
		seconds int
		want    bool
	}{{f.Token, 0, true}, {person, 0, false}, {person, 60, true}} {
		body := map[string]any{"action": "stage", "identity": plan, "value": "pro"}
		if c.seconds > 0 {
			body["deadline_seconds"] = c.seconds
		}
		code, out, raw := f.API("POST", "/v1/controls/execute", c.token, body)
		if code != 200 || (out["deadline"] != nil) != c.want {
			t.Errorf("stage by %s with deadline_seconds %d: %d %s; want a deadline: %v", c.token[:8], c.seconds, code, raw, c.want)
		}
	}
}

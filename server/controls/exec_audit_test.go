package controls_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// auditedStore is a store whose control registry writes changes with
// their audit records in one transaction, counting the writes of each kind
// and refusing the combined ones while failing is set.
type auditedStore struct {
	store.Store
	w *auditedWrites
}

var errAuditedDown = errors.New("the database is down")

type auditedWrites struct {
	failing           atomic.Bool
	plain, withRecord atomic.Int32
	// withDeadline counts the combined writes that keep a deadline, and
	// deadlinesAlone the deadlines set by themselves.
	withDeadline, deadlinesAlone atomic.Int32
}

func (s auditedStore) Deadlines() store.Deadlines {
	return countedDeadlines{s.Store.Deadlines(), s.w}
}

type countedDeadlines struct {
	store.Deadlines
	w *auditedWrites
}

func (d countedDeadlines) SetDeadline(ctx context.Context, dl store.DecisionDeadline) error {
	d.w.deadlinesAlone.Add(1)
	return d.Deadlines.SetDeadline(ctx, dl)
}

func (s auditedStore) ControlRegistry() store.Controls {
	return auditedControls{s.Store.ControlRegistry(), s.w}
}

type auditedControls struct {
	store.Controls
	w *auditedWrites
}

func (c auditedControls) SaveControl(ctx context.Context, u control.Update) error {
	c.w.plain.Add(1)
	return c.Controls.SaveControl(ctx, u)
}

func (c auditedControls) SaveControlAudited(ctx context.Context, u control.Update, rec store.AuditRecord, dl *store.DecisionDeadline) (int64, error) {
	if c.w.failing.Load() {
		return 0, errAuditedDown
	}
	c.w.withRecord.Add(1)
	if dl != nil {
		c.w.withDeadline.Add(1)
	}
	return c.Controls.SaveControlAudited(ctx, u, rec, dl)
}

// TestCommandAuditedInOneWrite: a command that changes a control is saved
// with its audit record in one write; one refused, by the policy or by the
// store, is recorded after it runs; a failed write changes nothing.
func TestCommandAuditedInOneWrite(t *testing.T) {
	w := &auditedWrites{}
	f := assenttest.StartDemo(t, func(c *server.Config) { c.Store = auditedStore{c.Store, w} })
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	steps := []struct {
		name       string
		body       map[string]any
		failing    bool
		status     int
		withRecord int32 // combined writes the step makes
		ok         bool
		reason     string
	}{
		{"stage", map[string]any{"action": "stage", "identity": plan, "value": "pro"}, false, http.StatusOK, 1, true, ""},
		{"apply refused by the policy", map[string]any{"action": "apply", "identity": plan}, false, http.StatusForbidden, 0, false, "human_confirmation_required"},
		{"stage refused by the store", map[string]any{"action": "stage", "identity": plan, "value": "team"}, true, http.StatusServiceUnavailable, 0, false, "store_unavailable"},
	}
	for _, step := range steps {
		plainBefore, withBefore := w.plain.Load(), w.withRecord.Load()
		w.failing.Store(step.failing)
		code, _, raw := f.API("POST", "/v1/controls/execute", f.Token, step.body)
		w.failing.Store(false)
		if code != step.status {
			t.Fatalf("%s: %d %s, want %d", step.name, code, raw, step.status)
		}
		if got := w.withRecord.Load() - withBefore; got != step.withRecord {
			t.Errorf("%s: %d combined writes, want %d", step.name, got, step.withRecord)
		}
		if got := w.plain.Load() - plainBefore; got != 0 {
			t.Errorf("%s: %d control writes without the audit record", step.name, got)
		}
		recs, err := f.DB.Audit().ListAudit(context.Background(), store.AuditFilter{FormID: "profile"})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			t.Fatalf("%s: no audit record", step.name)
		}
		last := recs[len(recs)-1]
		if last.Action != step.body["action"] || last.OK != step.ok || last.Reason != step.reason || last.ControlID != "plan" || last.Source != "agent" {
			t.Errorf("%s: last audit record %+v", step.name, last)
		}
		if step.name == "stage" && last.Detail != `{"value":"pro"}` {
			t.Errorf("stage: audit detail %q, want the staged value", last.Detail)
		}
	}
	snap, _ := f.Srv.Controls().Registry().Get(context.Background(), control.Identity{FormID: "profile", ControlID: "plan"})
	if snap.State.Staged == nil || snap.State.StagedValue != "pro" {
		t.Errorf("after the refused stage the proposal is %+v (%v), want the first one", snap.State.Staged, snap.State.StagedValue)
	}
}

// TestStagedDeadlineSavedWithTheStage: a value staged with a deadline is
// saved with it in one write, so no reader (a notification among them)
// finds the value without its deadline.
func TestStagedDeadlineSavedWithTheStage(t *testing.T) {
	w := &auditedWrites{}
	f := assenttest.StartDemo(t, func(c *server.Config) { c.Store = auditedStore{c.Store, w} })
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	tests := []struct {
		name         string
		body         map[string]any
		withDeadline int32
	}{
		{"with a deadline", map[string]any{"action": "stage", "identity": plan, "value": "pro", "deadline_seconds": 120}, 1},
		{"without one", map[string]any{"action": "stage", "identity": plan, "value": "team"}, 0},
	}
	for _, tc := range tests {
		before := w.withDeadline.Load()
		code, _, raw := f.API("POST", "/v1/controls/execute", f.Token, tc.body)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, code, raw)
		}
		if got := w.withDeadline.Load() - before; got != tc.withDeadline {
			t.Errorf("%s: %d stages saved with their deadline, want %d", tc.name, got, tc.withDeadline)
		}
		if tc.withDeadline == 0 {
			continue
		}
		snap, _ := f.Srv.Controls().Registry().Get(context.Background(), control.Identity{FormID: "profile", ControlID: "plan"})
		if snap.State.Staged == nil {
			t.Fatalf("%s: nothing staged", tc.name)
		}
		due := f.Srv.Controls().ProposalDeadline(context.Background(), control.Identity{FormID: "profile", ControlID: "plan"}, snap.State.Staged.Revision)
		// The store keeps milliseconds.
		if want := snap.State.Staged.StagedAt.Add(120 * time.Second); due.Sub(want).Abs() >= time.Millisecond {
			t.Errorf("%s: deadline %v, want %v", tc.name, due, want)
		}
	}
	if n := w.deadlinesAlone.Load(); n != 0 {
		t.Errorf("%d deadlines set in a write of their own", n)
	}
}

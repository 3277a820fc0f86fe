package controls

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store/sqlite"
)

// TestCatchUpAfterMissedEvents checks that a node which missed other
// nodes' events (its subscription lagged) finds, on catching up, a form
// declared elsewhere and then loses it once it is removed elsewhere.
func TestCatchUpAfterMissedEvents(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Two parts on one store that hear nothing of each other, as a node
	// that missed every event.
	build := func() *Part {
		h, err := host.NewHost(t.Context(), host.Config{DataDir: t.TempDir(), Store: db})
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(ctx, hostDeps(h))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Close()
			h.Close()
		})
		return p
	}
	a, b := build(), build()
	hosted := func(p *Part) bool {
		p.formsMu.Lock()
		defer p.formsMu.Unlock()
		d, ok := p.forms["billing"]
		return ok && d.hosted
	}
	ctrls := []HostedControl{{ControlID: "plan", Metadata: control.Metadata{Kind: "text", Label: "Plan"}, Value: "free"}}
	if err := a.declareForm(ctx, "p_svc", "billing", false, ctrls); err != nil {
		t.Fatal(err)
	}
	if hosted(b) {
		t.Fatal("B holds the form before catching up; the test hears events it should not")
	}
	b.catchUp(ctx)
	if !hosted(b) {
		t.Fatal("B does not hold the form declared on A after catching up")
	}
	if _, ok := b.controls.Get(ctx, control.Identity{FormID: "billing", ControlID: "plan"}); !ok {
		t.Fatal("B's registry lacks the form's control after catching up")
	}
	if err := a.removeForm(ctx, "p_svc", "billing"); err != nil {
		t.Fatal(err)
	}
	b.catchUp(ctx)
	if hosted(b) {
		t.Fatal("B still holds the form removed on A after catching up")
	}
}

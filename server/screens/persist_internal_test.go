package screens

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/assent-run/assent/store"
)

// docWrites records, for each UpdateScreen, whether it left the document
// out.
type docWrites struct {
	store.Screens
	mu   sync.Mutex
	same []bool
}

func (d *docWrites) UpdateScreen(ctx context.Context, sc store.Screen, prev int64) error {
	d.mu.Lock()
	d.same = append(d.same, sc.SameDocument)
	d.mu.Unlock()
	return d.Screens.UpdateScreen(ctx, sc, prev)
}

func (d *docWrites) take() []bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.same
	d.same = nil
	return out
}

// A screen's document is written when its stream ends; the saves of its
// state after that leave it out, here and on a node that read the screen
// again, and the store still holds it whole.
func TestSavesLeaveTheDocumentOut(t *testing.T) {
	a, b, agent := twoNodes(t)
	ctx := context.Background()
	b.stopFollowing()
	b.stopFollowing = nil
	wa, wb := &docWrites{Screens: a.Store.Screens}, &docWrites{Screens: b.Store.Screens}
	a.Store.Screens, b.Store.Screens = wa, wb

	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := wa.take(); !slices.Equal(got, []bool{false}) {
		t.Fatalf("saves of the shown screen left the document out: %v, want [false]", got)
	}
	onA, onB := mustScreen(t, a, agent, id), mustScreen(t, b, agent, id)
	if _, err := a.Update(ctx, id, `$s = "paid"`); err != nil {
		t.Fatal(err)
	}
	if err := a.change(ctx, onA, func() error { return onA.doc.SetState("$note", "from A") }); err != nil {
		t.Fatal(err)
	}
	if got := wa.take(); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("saves of the state left the document out: %v, want [true true]", got)
	}

	// B's copy is stale: its save is refused, it reads the screen again
	// and saves on top, still without the document.
	if err := b.change(ctx, onB, func() error { return onB.doc.SetState("$note", "from B") }); err != nil {
		t.Fatal(err)
	}
	if got := wb.take(); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("B's saves left the document out: %v, want [true true]", got)
	}
	rec, err := a.Store.Screens.Screen(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Document != nodesStream {
		t.Errorf("the store holds the document %q, want %q", rec.Document, nodesStream)
	}
}

package flow

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
)

// countingStore counts a store's transactions.
type countingStore struct {
	Store
	views, updates atomic.Int32
}

func (s *countingStore) View(ctx context.Context, fn func(Tx) error) error {
	s.views.Add(1)
	return s.Store.View(ctx, fn)
}

func (s *countingStore) Update(ctx context.Context, fn func(Tx) error) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, fn)
}

func (s *countingStore) reset() { s.views.Store(0); s.updates.Store(0) }

// A Flow step by a caller that reads the instance itself (to check who
// owns it) costs the kernel one write to prescribe, and one read and two
// writes to apply: begun and executing commit together.
func TestStepTransactions(t *testing.T) {
	ctx := context.Background()
	inv := testInventory()
	if err := inv.RegisterEffect(EffectToolCall, CapabilityToolInvoke, labelEffect(nil)); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: NewMemoryStore()}
	k := NewKernel(cs, inv, WithClock((&clock{t: t0}).now))
	p, err := k.AddProgram(ctx, fullProgram(t))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := k.Start(ctx, Instance{ID: "o1", Program: p.Fingerprint(), Phase: "reserved", Facts: reservedFacts(), Objective: "shipped", Owner: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	pr := agent(CapabilityToolInvoke, CapabilityStateWrite)

	cs.reset()
	d, err := k.PrescribeInstance(ctx, inst, pr, shipReq)
	if err != nil || d.Kind != Prescribed {
		t.Fatalf("prescribe: %+v %v", d, err)
	}
	if v, u := cs.views.Load(), cs.updates.Load(); v != 0 || u != 1 {
		t.Errorf("PrescribeInstance: %d reads, %d writes; want 0 and 1", v, u)
	}

	cs.reset()
	var checked Instance
	r, err := k.ApplyChecked(ctx, d.Prescription.ID, pr, func(rx Prescription, in Instance) error {
		checked = in
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, u := cs.views.Load(), cs.updates.Load(); v != 1 || u != 2 {
		t.Errorf("ApplyChecked: %d reads, %d writes; want 1 and 2", v, u)
	}
	if checked.ID != "o1" || checked.Owner != "agent-1" || checked.Revision != 0 {
		t.Errorf("the check saw %+v", checked)
	}
	if r.Revision != 1 {
		t.Errorf("receipt = %+v", r)
	}
	if got := journalStatuses(t, k, "o1"); !slices.Equal(got, []JournalStatus{JournalBegun, JournalExecuting, JournalCommitted}) {
		t.Errorf("journal = %v", got)
	}
}

// A check that refuses ends the apply before anything is written, with
// the check's error, and a prescription applied before is refused too
// rather than answered with its receipt.
func TestApplyCheckedRefuses(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, labelEffect(nil))
	f.start(t, "o1", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke, CapabilityStateWrite)
	rx := f.prescribe(t, "o1", pr, shipReq)
	notYours := errors.New("not yours")
	refuse := func(Prescription, Instance) error { return notYours }
	if _, err := f.k.ApplyChecked(ctx, rx.ID, pr, refuse); !errors.Is(err, notYours) {
		t.Fatalf("ApplyChecked = %v, want the check's error", err)
	}
	if in, _ := f.k.Instance(ctx, "o1"); in.Revision != 0 || in.Pending != "" {
		t.Fatalf("instance after a refused apply: %+v", in)
	}
	if j := journalStatuses(t, f.k, "o1"); len(j) != 0 {
		t.Fatalf("journal after a refused apply: %v", j)
	}
	if _, err := f.k.Apply(ctx, rx.ID, pr); err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.ApplyChecked(ctx, rx.ID, pr, refuse); !errors.Is(err, notYours) {
		t.Fatalf("ApplyChecked of an applied prescription = %v, want the check's error", err)
	}
	if _, err := f.k.ApplyChecked(ctx, "prx-nope", pr, refuse); ErrorCode(err) != CodeNotFound {
		t.Fatalf("ApplyChecked of an unknown prescription = %v, want %s", err, CodeNotFound)
	}
}

package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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

// contendedStore fails chosen Updates with ErrContention, as a store that
// could not order them with concurrent ones.
type contendedStore struct {
	Store
	mu    sync.Mutex
	calls int
	fail  func(call int) bool
}

func (s *contendedStore) Update(ctx context.Context, fn func(Tx) error) error {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if s.fail(n) {
		return fmt.Errorf("flow store: %w", ErrContention)
	}
	return s.Store.Update(ctx, fn)
}

// contendedKernel returns a kernel running full.json with tool.call wired
// to effect and instance o1 started in phase reserved, on a store whose
// Updates numbered by fail (from 1, after the setup) fail with
// ErrContention.
func contendedKernel(t *testing.T, effect Effect, fail func(call int) bool) *Kernel {
	t.Helper()
	ctx := context.Background()
	inv := testInventory()
	if err := inv.RegisterEffect(EffectToolCall, CapabilityToolInvoke, effect); err != nil {
		t.Fatal(err)
	}
	mem := NewMemoryStore()
	setup := NewKernel(mem, inv, WithClock((&clock{t: t0}).now))
	p, err := setup.AddProgram(ctx, fullProgram(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Start(ctx, Instance{ID: "o1", Program: p.Fingerprint(), Phase: "reserved", Facts: reservedFacts(), Objective: "shipped"}); err != nil {
		t.Fatal(err)
	}
	return NewKernel(&contendedStore{Store: mem, fail: fail}, inv, WithClock((&clock{t: t0}).now))
}

// An apply whose marking or whose commit the store cannot order with
// concurrent transactions runs it again: the step commits, once, instead
// of ending in recovery although the effect's outcome is known.
func TestApplyRunsContendedTransactionsAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(call int) bool // call 1 is the prescription's write
	}{
		{"begin", func(n int) bool { return n >= 2 && n <= 4 }},
		{"commit", func(n int) bool { return n >= 3 && n <= 6 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var calls atomic.Int32
			k := contendedKernel(t, labelEffect(&calls), tc.fail)
			pr := agent(CapabilityToolInvoke, CapabilityStateWrite)
			d, err := k.Prescribe(ctx, "o1", pr, shipReq)
			if err != nil || d.Kind != Prescribed {
				t.Fatalf("prescribe: %+v %v", d, err)
			}
			r, err := k.Apply(ctx, d.Prescription.ID, pr)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			in, _ := k.Instance(ctx, "o1")
			if r.Revision != 1 || in.Revision != 1 || in.Recovery != nil || in.Pending != "" || calls.Load() != 1 {
				t.Fatalf("after the apply: receipt %+v, instance %+v, effect ran %d times", r, in, calls.Load())
			}
			if got := journalStatuses(t, k, "o1"); !slices.Equal(got, []JournalStatus{JournalBegun, JournalExecuting, JournalCommitted}) {
				t.Errorf("journal = %v", got)
			}
		})
	}
}

// An apply whose effect failed settles as aborted even when the store
// cannot order the settling with concurrent transactions at first: the
// mark is cleared and the instance is not left for the sweep to put in
// recovery.
func TestSettleRunsContendedTransactionsAgain(t *testing.T) {
	ctx := context.Background()
	failing := EffectFunc(func(ctx context.Context, req *EffectRequest) EffectResult {
		return Fail(errors.New("the carrier refused"))
	})
	// Call 1 writes the prescription, 2 marks the instance, 3 and 4 are
	// the settling's first runs.
	k := contendedKernel(t, failing, func(n int) bool { return n == 3 || n == 4 })
	pr := agent(CapabilityToolInvoke, CapabilityStateWrite)
	d, err := k.Prescribe(ctx, "o1", pr, shipReq)
	if err != nil || d.Kind != Prescribed {
		t.Fatalf("prescribe: %+v %v", d, err)
	}
	if _, err := k.Apply(ctx, d.Prescription.ID, pr); ErrorCode(err) != CodeEffectFailed {
		t.Fatalf("apply = %v, want %s", err, CodeEffectFailed)
	}
	in, _ := k.Instance(ctx, "o1")
	if in.Pending != "" || in.Recovery != nil || in.Revision != 0 {
		t.Fatalf("after the failed effect: %+v", in)
	}
	if got := journalStatuses(t, k, "o1"); !slices.Equal(got, []JournalStatus{JournalBegun, JournalExecuting, JournalAborted}) {
		t.Errorf("journal = %v", got)
	}
}

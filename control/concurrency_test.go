package control

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentUse runs many goroutines staging, applying, undoing,
// discarding, reading, registering and subscribing at once. Under -race it
// checks the locking; afterwards it checks that every result was one the
// contract allows and that the registry's bookkeeping adds up.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	r := New(Config{HistoryDepth: 8, EventQueue: 64})
	var events atomic.Int64
	stop := r.Subscribe(func(Event) { events.Add(1) })
	defer stop()

	const controls = 4
	ids := make([]Identity, controls)
	vals := make([]*Value, controls)
	for i := range ids {
		ids[i] = Identity{FormID: "f", ControlID: fmt.Sprint("c", i)}
		vals[i] = NewValue(0)
		mustRegister(t, r, Registration{Identity: ids[i], Metadata: Metadata{Kind: KindNumber}, Handles: vals[i].Handles()})
	}
	allowed := map[Reason]bool{
		"": true, ReasonNoStagedValue: true, ReasonNothingToUndo: true,
		ReasonStaleRevision: true, ReasonStagedValueStale: true,
		ReasonHumanConfirmationRequired: true,
	}
	var mu sync.Mutex
	unexpected := map[Reason]int{}
	var applied atomic.Int64

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			id := ids[g%controls]
			for i := range 300 {
				var res Result
				switch i % 6 {
				case 0, 3:
					res = r.Execute(ctx, Command{Action: Stage, Identity: id, Value: g*1000 + i}, agent)
				case 1:
					rev := int64(0)
					if s, ok := r.Get(ctx, id); ok && s.State.Staged != nil {
						rev = s.State.Staged.Revision
					}
					res = r.Execute(ctx, Command{Action: Apply, Identity: id, Revision: rev}, person)
					if res.OK {
						applied.Add(1)
					}
				case 2:
					res = r.Execute(ctx, Command{Action: Undo, Identity: id}, person)
				case 4:
					res = r.Execute(ctx, Command{Action: Discard, Identity: id}, person)
				case 5:
					res = r.Execute(ctx, Command{Action: Apply, Identity: id}, agent)
				}
				if !allowed[res.Reason] {
					mu.Lock()
					unexpected[res.Reason]++
					mu.Unlock()
				}
				if i%50 == 0 {
					vals[g%controls].Store(-1) // a person's direct edit
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 300 {
				_ = r.List(ctx, "")
				_ = r.Proposals(ctx, "f")
				_ = r.Changes(ctx, "")
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			id := Identity{FormID: "churn", ControlID: fmt.Sprint(i % 10)}
			dispose := mustRegister(t, r, Registration{Identity: id, Metadata: text(""), Handles: NewValue(i).Handles()})
			_ = r.Execute(ctx, Command{Action: Stage, Identity: id, Value: i}, agent)
			if i%2 == 0 {
				dispose()
			}
			s := r.Subscribe(func(Event) {})
			s()
		}
	})
	wg.Wait()

	if len(unexpected) > 0 {
		t.Errorf("unexpected reasons: %v", unexpected)
	}
	if applied.Load() == 0 {
		t.Error("no apply succeeded")
	}
	for i, id := range ids {
		s, ok := r.Get(ctx, id)
		if !ok {
			t.Fatalf("%s vanished", id)
		}
		if s.State.Value != vals[i].Load() {
			t.Errorf("%s: snapshot %v, holder %v", id, s.State.Value, vals[i].Load())
		}
	}
	if n := len(r.List(ctx, "churn")); n != 5 {
		t.Errorf("%d churn controls left, want 5", n)
	}
	for _, c := range r.Changes(ctx, "f") {
		if c.Depth > 8 {
			t.Errorf("history of %s holds %d entries, bound is 8", c.Identity, c.Depth)
		}
	}
}

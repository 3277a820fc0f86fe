package flow

import (
	"context"
	"sync"
	"testing"
)

// TestDeclineProgramAtDeadline: the deadline's decline ends a proposed
// program once, recorded as the system decider rather than a person; a
// program already decided, active, or never stored is left as it is, and
// of several declines racing, exactly one wins.
func TestDeclineProgramAtDeadline(t *testing.T) {
	ctx := context.Background()
	k := NewKernel(NewMemoryStore(), testInventory(), WithClock((&clock{t: t0}).now))
	src := fullProgram(t)
	if _, _, err := k.LoadProgram(ctx, src, person()); err != nil {
		t.Fatal(err)
	}
	proposed := variant(t, src, func(m doc) { set(m, "transitions.0.priority", 7) })
	p, l, err := k.LoadProgram(ctx, proposed, agent())
	if err != nil || l.Status != ProgramProposed {
		t.Fatalf("agent's load = %+v, %v", l, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 4 {
		wg.Go(func() {
			l, err := k.DeclineProgramAtDeadline(ctx, p.Fingerprint(), NoDecision)
			switch {
			case err == nil:
				if l.Status != ProgramDeclined || l.DecidedBy != "" || l.DecidedBySystem != DeciderDeadline || l.Reason != NoDecision {
					t.Errorf("decline = %+v", l)
				}
				mu.Lock()
				won++
				mu.Unlock()
			case ErrorCode(err) != CodeApprovalClosed:
				t.Errorf("a racing decline: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d declines won, want 1", won)
	}
	// A person may no longer decide it either.
	if _, err := k.ApproveProgram(ctx, p.Fingerprint(), person()); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("approve after the deadline: %v", err)
	}
	active, _ := Load(src, testInventory())
	for _, fp := range []string{active.Fingerprint(), "sha256:00"} {
		if _, err := k.DeclineProgramAtDeadline(ctx, fp, NoDecision); ErrorCode(err) != CodeApprovalClosed && ErrorCode(err) != CodeNotFound {
			t.Errorf("decline of %s: %v", fp, err)
		}
	}
	if l, _ := k.ProgramLoad(ctx, active.Fingerprint()); l.Status != ProgramActive {
		t.Fatalf("the active program is %s", l.Status)
	}
}

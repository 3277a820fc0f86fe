package flow

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Two nodes share one store. Node A claimed an approval and marked the
// instance, then died mid-apply. Node B, starting, leaves A's fresh mark
// alone (A may be applying now); once the mark is older than the bound,
// B's sweep settles it: the instance enters recovery and the approval is
// handed back rather than staying "approving" until node A returns.
func TestSweepSettlesAnotherNodesInterruptedApply(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.start(t, "o1", "new", nil)
	nodeB := NewKernel(f.store, f.inv, WithClock(f.clk.now), WithNode("node-b"), WithInterruptedAfter(time.Minute))
	a, err := f.k.RequestApproval(ctx, "o1", agent(CapabilityStateWrite), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	alice := person(CapabilityStateWrite, CapabilityHumanApprove)
	rx := f.prescribe(t, "o1", alice, Request{Transition: "cancel"})
	// What node A's apply leaves when A dies after its begin.
	err = f.store.Update(ctx, func(tx Tx) error {
		inst, err := tx.Instance("o1")
		if err != nil {
			return err
		}
		next := inst.Clone()
		next.Pending, next.PendingNode, next.PendingAt = rx.ID, "node-a", f.clk.now()
		if err := tx.UpdateInstance(next, inst.Revision, ""); err != nil {
			return err
		}
		return (&approvalClaim{id: a.ID, person: alice.ID}).claim(tx, f.clk.now())
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := nodeB.RecoverInterrupted(ctx); err != nil || n != 0 {
		t.Fatalf("RecoverInterrupted on node B = %d, %v; want 0 (node A may be applying)", n, err)
	}
	f.clk.advance(59 * time.Second)
	if n, err := nodeB.SweepInterrupted(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before the bound = %d, %v; want 0", n, err)
	}
	if got, _ := nodeB.Approval(ctx, a.ID); got.Status != ApprovalApproving {
		t.Fatalf("approval before the bound = %s, want approving", got.Status)
	}

	f.clk.advance(time.Second)
	if n, err := nodeB.SweepInterrupted(ctx); err != nil || n != 1 {
		t.Fatalf("sweep after the bound = %d, %v; want 1", n, err)
	}
	inst, _ := nodeB.Instance(ctx, "o1")
	if inst.Pending != "" || inst.PendingNode != "" || !inst.PendingAt.IsZero() || inst.Recovery == nil || inst.Revision != 0 {
		t.Fatalf("instance after the sweep = %+v, want recovery mode at revision 0 with no mark", inst)
	}
	if !strings.Contains(inst.Recovery.Cause, `node "node-a"`) {
		t.Errorf("recovery cause = %q, want it to name node-a", inst.Recovery.Cause)
	}
	if got, _ := nodeB.Approval(ctx, a.ID); got.Status != ApprovalPending || got.Decider != "" {
		t.Fatalf("approval after the sweep = %s by %q, want pending", got.Status, got.Decider)
	}
	if n, err := nodeB.SweepInterrupted(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep = %d, %v; want 0", n, err)
	}
	// Node A's commit, had it been only slow, loses: the mark it would
	// clear is gone.
	err = f.store.Update(ctx, func(tx Tx) error {
		cur, err := tx.Instance("o1")
		if err != nil {
			return err
		}
		next := cur.Clone()
		next.Revision++
		return tx.UpdateInstance(next, 0, rx.ID)
	})
	if err == nil {
		t.Fatal("a commit of node A's apply succeeded after node B settled it")
	}
}

// A node's own marks are settled at its start, whatever their age, but its
// sweep leaves marks younger than the bound alone: an apply of this process
// holds the instance's lock meanwhile.
func TestRecoverInterruptedSettlesOwnMarksAtStart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.start(t, "o1", "new", nil)
	f.start(t, "o2", "new", nil)
	pr := person(CapabilityStateWrite, CapabilityHumanApprove)
	mark := func(id, node string) {
		t.Helper()
		rx := f.prescribe(t, id, pr, Request{Transition: "cancel"})
		err := f.store.Update(ctx, func(tx Tx) error {
			inst, err := tx.Instance(id)
			if err != nil {
				return err
			}
			next := inst.Clone()
			next.Pending, next.PendingNode, next.PendingAt = rx.ID, node, f.clk.now()
			return tx.UpdateInstance(next, inst.Revision, "")
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mark("o1", "node-b")
	mark("o2", "node-c")
	nodeB := NewKernel(f.store, f.inv, WithClock(f.clk.now), WithNode("node-b"))
	if n, err := nodeB.SweepInterrupted(ctx); err != nil || n != 0 {
		t.Fatalf("sweep of fresh marks = %d, %v; want 0", n, err)
	}
	if n, err := nodeB.RecoverInterrupted(ctx); err != nil || n != 1 {
		t.Fatalf("RecoverInterrupted on node B = %d, %v; want 1 (its own mark only)", n, err)
	}
	if o1, _ := nodeB.Instance(ctx, "o1"); o1.Pending != "" || o1.Recovery == nil {
		t.Errorf("o1 = %+v, want settled", o1)
	}
	if o2, _ := nodeB.Instance(ctx, "o2"); o2.Pending == "" || o2.PendingNode != "node-c" {
		t.Errorf("o2 = %+v, want node C's mark kept", o2)
	}
	f.clk.advance(DefaultInterruptedAfter)
	if n, err := nodeB.SweepInterrupted(ctx); err != nil || n != 1 {
		t.Fatalf("sweep after the default bound = %d, %v; want 1", n, err)
	}
}

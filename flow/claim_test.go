package flow

import (
	"context"
	"testing"
)

// An approval claimed by an apply that a crash cut short is handed back:
// recovering the interrupted apply returns it to pending, so it does not
// stay "approving" for good.
func TestRecoverReleasesApprovalClaim(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.start(t, "o1", "new", nil)
	a, err := f.k.RequestApproval(ctx, "o1", agent(CapabilityStateWrite), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	alice := person(CapabilityStateWrite, CapabilityHumanApprove)
	rx := f.prescribe(t, "o1", alice, Request{Transition: "cancel"})
	// The state an apply leaves when the process dies after its begin:
	// the instance marked with the prescription, the approval claimed.
	err = f.store.Update(ctx, func(tx Tx) error {
		inst, err := tx.Instance("o1")
		if err != nil {
			return err
		}
		next := inst.Clone()
		next.Pending = rx.ID
		if err := tx.UpdateInstance(next, inst.Revision, ""); err != nil {
			return err
		}
		return (&approvalClaim{id: a.ID, person: alice.ID}).claim(tx, f.clk.now())
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.k.Approval(ctx, a.ID); got.Status != ApprovalApproving || got.Decider != "alice" {
		t.Fatalf("claimed approval = %s by %s", got.Status, got.Decider)
	}
	if _, err := f.k.Decline(ctx, a.ID, person(), "no"); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("decline of a claimed approval = %v, want APPROVAL_CLOSED", err)
	}
	if n, err := f.k.RecoverInterrupted(ctx); err != nil || n != 1 {
		t.Fatalf("RecoverInterrupted = %d, %v", n, err)
	}
	if got, _ := f.k.Approval(ctx, a.ID); got.Status != ApprovalPending || got.Decider != "" {
		t.Fatalf("approval after recovery = %s by %q, want pending", got.Status, got.Decider)
	}
}

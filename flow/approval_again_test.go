package flow

import (
	"context"
	"testing"
)

// After a decline, the same request returns the declined approval; asking
// again files a new one that a person can decide, and the same request
// then returns the newest.
func TestRequestApprovalAgain(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	bot := agent(CapabilityStateWrite)
	alice := person(CapabilityStateWrite)
	f.start(t, "d", "new", nil)
	req := Request{Transition: "cancel"}

	first, err := f.k.RequestApproval(ctx, "d", bot, req)
	if err != nil {
		t.Fatal(err)
	}
	// Asking again while the request is pending is the same request.
	if same, err := f.k.RequestApprovalAgain(ctx, "d", bot, req); err != nil || same.ID != first.ID {
		t.Fatalf("ask again while pending = %s, %v; want %s", same.ID, err, first.ID)
	}
	if _, err := f.k.Decline(ctx, first.ID, alice, "not now"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.k.RequestApproval(ctx, "d", bot, req); err != nil || got.ID != first.ID || got.Status != ApprovalDeclined || got.Reason != "not now" {
		t.Fatalf("request after the decline = %+v, %v", got, err)
	}

	second, err := f.k.RequestApprovalAgain(ctx, "d", bot, req)
	if err != nil || second.ID == first.ID || second.Status != ApprovalPending {
		t.Fatalf("ask again = %+v, %v", second, err)
	}
	if got, _ := f.k.RequestApproval(ctx, "d", bot, req); got.ID != second.ID {
		t.Fatalf("request after asking again = %s, want %s", got.ID, second.ID)
	}
	pending, _ := f.k.PendingApprovals(ctx)
	if len(pending) != 1 || pending[0].ID != second.ID {
		t.Fatalf("pending = %+v", pending)
	}
	// Declined again, asked a third time: a third approval, which a person
	// can approve.
	if _, err := f.k.Decline(ctx, second.ID, alice, "still no"); err != nil {
		t.Fatal(err)
	}
	third, err := f.k.RequestApprovalAgain(ctx, "d", bot, req)
	if err != nil || third.ID == first.ID || third.ID == second.ID {
		t.Fatalf("third = %+v, %v", third, err)
	}
	if _, err := f.k.Approve(ctx, third.ID, alice); err != nil {
		t.Fatalf("approve the third: %v", err)
	}
	if all, _ := f.k.InstanceApprovals(ctx, "d"); len(all) != 3 {
		t.Fatalf("instance approvals = %d, want 3", len(all))
	}
}

package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/assent-run/assent/flow"
)

func openFlowTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestFlowStoreTransactions(t *testing.T) {
	ctx := context.Background()
	st := openFlowTest(t).FlowStore()
	in := flow.Instance{ID: "i1", Program: "sha256:ab", Phase: "draft", Facts: map[string]flow.Fact{"amount": {Status: "known", Value: "12"}}}

	// A failing transaction keeps nothing.
	boom := errors.New("boom")
	err := st.Update(ctx, func(tx flow.Tx) error {
		if err := tx.CreateInstance(in); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	st.View(ctx, func(tx flow.Tx) error {
		if _, err := tx.Instance("i1"); !errors.Is(err, flow.ErrNotFound) {
			t.Fatalf("rolled-back instance: %v", err)
		}
		return nil
	})

	if err := st.Update(ctx, func(tx flow.Tx) error { return tx.CreateInstance(in) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx flow.Tx) error { return tx.CreateInstance(in) }); err == nil {
		t.Fatal("duplicate instance accepted")
	}
	// Compare-and-swap on revision and pending prescription.
	next := in
	next.Revision, next.Phase = 1, "approved"
	if err := st.Update(ctx, func(tx flow.Tx) error { return tx.UpdateInstance(next, 0, "") }); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx flow.Tx) error { return tx.UpdateInstance(next, 0, "") }); !errors.Is(err, flow.ErrConflict) {
		t.Fatalf("stale update = %v", err)
	}
	st.View(ctx, func(tx flow.Tx) error {
		got, err := tx.Instance("i1")
		if err != nil || got.Phase != "approved" || got.Revision != 1 || got.Facts["amount"].Value != "12" {
			t.Fatalf("instance = %+v, %v", got, err)
		}
		return nil
	})

	// Programs are stored once per fingerprint.
	st.Update(ctx, func(tx flow.Tx) error {
		tx.PutProgram("sha256:ab", []byte("one"))
		return tx.PutProgram("sha256:ab", []byte("two"))
	})
	st.View(ctx, func(tx flow.Tx) error {
		src, err := tx.Program("sha256:ab")
		if err != nil || string(src) != "one" {
			t.Fatalf("program = %q, %v", src, err)
		}
		return nil
	})

	// Journal keeps append order; pending approvals are oldest first.
	st.Update(ctx, func(tx flow.Tx) error {
		for _, s := range []flow.JournalStatus{flow.JournalBegun, flow.JournalExecuting, flow.JournalCommitted} {
			tx.AppendJournal(flow.JournalEntry{Instance: "i1", Status: s})
		}
		tx.PutApproval(flow.ApprovalRecord{Approval: flow.Approval{ID: "a2", Status: flow.ApprovalPending}})
		tx.PutApproval(flow.ApprovalRecord{Approval: flow.Approval{ID: "a1", Status: flow.ApprovalPending}})
		return tx.PutApproval(flow.ApprovalRecord{Approval: flow.Approval{ID: "a2", Status: flow.ApprovalApproved}})
	})
	st.View(ctx, func(tx flow.Tx) error {
		j, _ := tx.Journal("i1")
		if len(j) != 3 || j[2].Status != flow.JournalCommitted {
			t.Fatalf("journal = %+v", j)
		}
		p, _ := tx.PendingApprovals()
		if len(p) != 1 || p[0].Approval.ID != "a1" {
			t.Fatalf("pending = %+v", p)
		}
		if err := tx.PutReceipt(flow.Receipt{Prescription: "prx-1"}); err == nil {
			t.Fatal("write in a read-only transaction succeeded")
		}
		return nil
	})
}

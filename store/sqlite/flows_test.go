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
	st := openFlowTest(t).Flows()
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
		apr := func(id string, st flow.ApprovalStatus) flow.ApprovalRecord {
			return flow.ApprovalRecord{Approval: flow.Approval{ID: id, Instance: "i1", Transition: "p/t", Status: st}}
		}
		tx.PutApproval(apr("apr-2", flow.ApprovalPending))
		tx.PutApproval(apr("apr-1", flow.ApprovalPending))
		return tx.PutApproval(apr("apr-2", flow.ApprovalApproved))
	})
	st.View(ctx, func(tx flow.Tx) error {
		j, _ := tx.Journal("i1")
		if len(j) != 3 || j[2].Status != flow.JournalCommitted {
			t.Fatalf("journal = %+v", j)
		}
		p, _ := tx.PendingApprovals()
		if len(p) != 1 || p[0].Approval.ID != "apr-1" {
			t.Fatalf("pending = %+v", p)
		}
		all, _ := tx.InstanceApprovals("i1")
		if len(all) != 2 || all[0].Approval.ID != "apr-2" || all[0].Approval.Status != flow.ApprovalApproved {
			t.Fatalf("instance approvals = %+v", all)
		}
		if err := tx.PutReceipt(flow.Receipt{Prescription: "prx-1"}); err == nil {
			t.Fatal("write in a read-only transaction succeeded")
		}
		return nil
	})
}

// TestFlowProgramLoadsMigration: programs stored before load records
// existed come out of the migration as proposed, with their program id,
// so nothing an unknown loader stored starts until a person approves it.
func TestFlowProgramLoadsMigration(t *testing.T) {
	ctx := context.Background()
	db := openFlowTest(t)
	// The schema as it was before the step: no load records.
	for _, q := range []string{
		`DROP TABLE flow_program_loads`,
		`DROP INDEX flow_approvals_instance`,
		`ALTER TABLE flow_approvals DROP COLUMN instance`,
		`INSERT INTO flow_approvals (id, pending, seq, body) VALUES ('apr-1', 1, 1, '{"approval":{"id":"apr-1","instance_id":"i9","transition":"p/t","status":"pending"}}')`,
		`DELETE FROM schema_migrations WHERE component = 'flows' AND version = 2`,
		`INSERT INTO flow_programs (fingerprint, source) VALUES ('sha256:aa', CAST('{"program_id":"legacy"}' AS BLOB)), ('sha256:bb', CAST('not json' AS BLOB))`,
	} {
		if _, err := db.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st := db.Flows()
	st.View(ctx, func(tx flow.Tx) error {
		loads, err := tx.ProgramLoads()
		if err != nil || len(loads) != 2 {
			t.Fatalf("loads = %+v, %v", loads, err)
		}
		if l := loads[0]; l.Fingerprint != "sha256:aa" || l.ProgramID != "legacy" || l.Status != flow.ProgramProposed {
			t.Errorf("legacy load = %+v", l)
		}
		if l := loads[1]; l.ProgramID != "" || l.Status != flow.ProgramProposed {
			t.Errorf("unreadable load = %+v", l)
		}
		// Approvals stored before are found by instance.
		if recs, err := tx.InstanceApprovals("i9"); err != nil || len(recs) != 1 || recs[0].Approval.ID != "apr-1" {
			t.Errorf("instance approvals = %+v, %v", recs, err)
		}
		return nil
	})
	// Load records are replaced whole.
	err := st.Update(ctx, func(tx flow.Tx) error {
		return tx.PutProgramLoad(flow.ProgramLoad{Fingerprint: "sha256:aa", ProgramID: "legacy", Status: flow.ProgramActive, Activation: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	st.View(ctx, func(tx flow.Tx) error {
		if l, err := tx.ProgramLoad("sha256:aa"); err != nil || l.Status != flow.ProgramActive || l.Activation != 1 {
			t.Errorf("load = %+v, %v", l, err)
		}
		if _, err := tx.ProgramLoad("sha256:cc"); !errors.Is(err, flow.ErrNotFound) {
			t.Errorf("missing load: %v", err)
		}
		return nil
	})
}

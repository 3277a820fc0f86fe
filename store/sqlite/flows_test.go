package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

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

// TestFlowDueMigration: approvals and apply marks stored before the sweeps
// read only what is due get their times from their bodies, so a deadline
// or a mark that passed before the upgrade is still found, and one still
// ahead is not.
func TestFlowDueMigration(t *testing.T) {
	ctx := context.Background()
	db := openFlowTest(t)
	for _, q := range []string{
		`DROP INDEX flow_approvals_due`,
		`ALTER TABLE flow_approvals DROP COLUMN deadline`,
		`DROP INDEX flow_instances_marked`,
		`ALTER TABLE flow_instances DROP COLUMN pending_at`,
		`INSERT INTO flow_approvals (id, pending, seq, instance, body) VALUES
			('apr-due', 1, 1, 'i1', '{"approval":{"id":"apr-due","instance_id":"i1","transition":"p/t","status":"pending","deadline":"2026-12-01T10:00:00.123456789Z"}}'),
			('apr-ahead', 1, 2, 'i2', '{"approval":{"id":"apr-ahead","instance_id":"i2","transition":"p/t","status":"pending","deadline":"2026-12-01T10:05:00Z"}}'),
			('apr-none', 1, 3, 'i3', '{"approval":{"id":"apr-none","instance_id":"i3","transition":"p/t","status":"pending"}}'),
			('apr-bad', 0, 4, 'i4', 'not json')`,
		`INSERT INTO flow_instances (id, revision, pending, body) VALUES
			('i-old', 1, 'rx-1', '{"instance_id":"i-old","program_fingerprint":"sha256:aa","phase":"new","facts":{},"revision":1,"pending":"rx-1","pending_node":"a","pending_at":"2026-12-01T09:58:00+01:00"}'),
			('i-young', 1, 'rx-2', '{"instance_id":"i-young","program_fingerprint":"sha256:aa","phase":"new","facts":{},"revision":1,"pending":"rx-2","pending_node":"a","pending_at":"2026-12-01T10:03:00Z"}'),
			('i-idle', 1, '', '{"instance_id":"i-idle","program_fingerprint":"sha256:aa","phase":"new","facts":{},"revision":1}')`,
		`DELETE FROM schema_migrations WHERE component = 'flows' AND version = 3`,
	} {
		if _, err := db.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	db.Flows().View(ctx, func(tx flow.Tx) error {
		due, err := tx.DueApprovals(now)
		if err != nil || len(due) != 1 || due[0].Approval.ID != "apr-due" {
			t.Errorf("due approvals = %+v, %v; want apr-due", due, err)
		}
		marked, err := tx.MarkedInstances(now.Add(-time.Minute))
		if err != nil || len(marked) != 1 || marked[0].ID != "i-old" {
			t.Errorf("marked instances = %+v, %v; want i-old", marked, err)
		}
		return nil
	})
}

package postgres_test

import (
	"testing"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// TestFlowDueMigration: approvals and apply marks stored before the sweeps
// read only what is due get their times from their bodies, so a deadline
// or a mark that passed before the upgrade is still found, and one still
// ahead is not.
func TestFlowDueMigration(t *testing.T) {
	u, _ := pgtest.URL(t)
	db, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP INDEX flow_approvals_due`,
		`ALTER TABLE flow_approvals DROP COLUMN deadline`,
		`DROP INDEX flow_instances_marked`,
		`ALTER TABLE flow_instances DROP COLUMN pending_at`,
		`INSERT INTO flow_approvals (id, pending, instance, body) VALUES
			('apr-due', true, 'i1', '{"approval":{"id":"apr-due","instance_id":"i1","transition":"p/t","status":"pending","deadline":"2026-12-01T10:00:00.123456789Z"}}'),
			('apr-ahead', true, 'i2', '{"approval":{"id":"apr-ahead","instance_id":"i2","transition":"p/t","status":"pending","deadline":"2026-12-01T10:05:00Z"}}'),
			('apr-none', true, 'i3', '{"approval":{"id":"apr-none","instance_id":"i3","transition":"p/t","status":"pending"}}'),
			('apr-closed', false, 'i4', 'not json')`,
		`INSERT INTO flow_instances (id, revision, pending, body) VALUES
			('i-old', 1, 'rx-1', '{"instance_id":"i-old","program_fingerprint":"sha256:aa","phase":"new","facts":{},"revision":1,"pending":"rx-1","pending_node":"a","pending_at":"2026-12-01T09:58:00+01:00"}'),
			('i-young', 1, 'rx-2', '{"instance_id":"i-young","program_fingerprint":"sha256:aa","phase":"new","facts":{},"revision":1,"pending":"rx-2","pending_node":"a","pending_at":"2026-12-01T10:03:00Z"}'),
			('i-idle', 1, '', 'not json')`,
		`DELETE FROM schema_migrations WHERE component = 'flows' AND version = 3`,
	} {
		if _, err := db.Pool().Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	db, err = postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	db.Flows().View(t.Context(), func(tx flow.Tx) error {
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

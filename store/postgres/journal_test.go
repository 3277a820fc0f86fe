package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// TestJournalIntegrity damages a journal's one record in place and checks
// that the next admission sees it as run/journal would, and that
// transitions and claims fail closed on a damaged journal.
func TestJournalIntegrity(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		damage string
		reason string // "" when the journal stays sound
	}{
		{"malformed input", `UPDATE run_controls SET input = '{not json'`, "malformed"},
		{"unknown status", `UPDATE run_controls SET status = 'lost'`, "invalid_record"},
		{"empty id", `UPDATE run_controls SET id = ''`, "invalid_record"},
		{"empty instance", `UPDATE run_controls SET instance_id = ''`, "invalid_record"},
		{"bad action", `UPDATE run_controls SET action = 'Pause'`, "invalid_record"},
		{"empty segment", `UPDATE run_controls SET action = 'player..pause'`, "invalid_record"},
		{"final dot", `UPDATE run_controls SET action = 'player.'`, "invalid_record"},
		{"long action", `UPDATE run_controls SET action = 'a' || repeat('b', 64)`, "invalid_record"},
		{"long input", `UPDATE run_controls SET input = '"' || repeat('x', 400) || '"'`, "invalid_record"},
		{"missing timestamp", `UPDATE run_controls SET queued_at = NULL`, "invalid_status_timestamp"},
		{"claimed without its time", `UPDATE run_controls SET status = 'claimed'`, "invalid_status_timestamp"},
		{"foreign pending", `UPDATE run_controls SET instance_id = 'other'`, "generation_mismatch"},
		{"oversized", `UPDATE run_controls SET bytes = 2000000`, "journal_bytes"},
		{"malformed before invalid", `UPDATE run_controls SET input = '[', status = 'lost'`, "malformed"},
		{"sound edits", `UPDATE run_controls SET action = 'player-2.pause_now.x9', input = ' {"a": [1, 2.5e3, null]} '`, ""},
		{"full action length", `UPDATE run_controls SET action = 'a' || repeat('b', 62) || 'c'`, ""},
		{"terminal of another generation", `UPDATE run_controls SET instance_id = 'other', status = 'failed', failed_at = now()`, ""},
	}
	u, _ := pgtest.URL(t)
	db, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := store.RunRecord{ID: fmt.Sprintf("r%d", i), OwnerID: "p1", InstanceID: fmt.Sprintf("r%d-1", i), Generation: 1, CreatedAt: t0, StartedAt: t0}
			if err := db.ClaimRun(ctx, run, ""); err != nil {
				t.Fatal(err)
			}
			admit := func(id string) error {
				q := t0
				_, err := db.AdmitControl(ctx, run.ID, store.Control{ID: id, InstanceID: run.InstanceID, Action: "pause", QueuedAt: &q})
				return err
			}
			if err := admit("c1"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Pool().Exec(ctx, tc.damage+` WHERE run_id = $1`, run.ID); err != nil {
				t.Fatal(err)
			}
			before, _ := db.Controls(ctx, run.ID)
			err := admit("c2")
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("admission to a sound journal: %v", err)
				}
				return
			}
			var ce *store.ControlError
			if !errors.As(err, &ce) || ce.Reason != "control_journal_integrity" || ce.IntegrityReason != tc.reason {
				t.Fatalf("admission: %v, want integrity %s", err, tc.reason)
			}
			if tc.reason != "generation_mismatch" {
				if _, err := db.TransitionControl(ctx, run.ID, before[0].ID, store.ControlFailed, nil, "", t0); !errors.As(err, &ce) {
					t.Fatalf("transition on a damaged journal: %v", err)
				}
				if _, err := db.ClaimControl(ctx, run.ID, run.InstanceID, "", t0); !errors.As(err, &ce) {
					t.Fatalf("claim on a damaged journal: %v", err)
				}
			}
			if after, _ := db.Controls(ctx, run.ID); fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatal("a refused admission changed the journal")
			}
		})
	}
}

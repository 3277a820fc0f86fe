package run

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// clock is a settable clock for lease keepers.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// claimLive stores a running generation of Run id without a process, as a
// Run another node supervises looks from here.
func claimLive(t *testing.T, f *fixture, id, def string) store.RunRecord {
	t.Helper()
	doc, _ := json.Marshal(runDoc{LaunchKind: "spawn", Definition: json.RawMessage(def), TokenID: ""})
	r := store.RunRecord{ID: id, OwnerID: "alice", InstanceID: "inst-" + id, Generation: 1, PID: 1 << 30, StartTime: "0",
		CreatedAt: t0, StartedAt: t0, Doc: doc}
	if err := f.db.ClaimRun(t.Context(), r, ""); err != nil {
		t.Fatal(err)
	}
	return r
}

func newKeeper(t *testing.T, f *fixture, node string, c *clock) *LeaseKeeper {
	t.Helper()
	k, err := NewLeaseKeeper(LeaseConfig{Node: node, Leases: f.db.Cluster(), Manager: f.m, TTL: 9 * time.Second, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestLeaseKeeperMarksLost(t *testing.T) {
	tests := []struct {
		name    string
		def     string
		restart bool
	}{
		{"no restart", `{"template":"sleep 100"}`, false},
		{"restart on lost", `{"template":"sleep 100","restart":"on_lost"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ca, cb := &clock{t0}, &clock{t0}
			a, b := newKeeper(t, f, "node-a", ca), newKeeper(t, f, "node-b", cb)
			claimLive(t, f, "r1", tt.def)
			if err := a.Acquire(t.Context(), "r1"); err != nil {
				t.Fatal(err)
			}
			if err := b.Acquire(t.Context(), "r1"); code(err) != CodeConflict {
				t.Fatalf("second node Acquire = %v, want conflict", err)
			}
			// Before expiry nothing is lost.
			cb.t = t0.Add(9*time.Second - time.Millisecond)
			if rep, err := b.Tick(t.Context()); err != nil || len(rep.Lost) != 0 {
				t.Fatalf("Tick before expiry = %+v, %v; want nothing lost", rep, err)
			}
			// node-a stops renewing; node-b finds its lease expired.
			cb.t = t0.Add(9 * time.Second)
			rep, err := b.Tick(t.Context())
			if err != nil || len(rep.Lost) != 1 || len(rep.Errors) != 0 {
				t.Fatalf("Tick at expiry = %+v, %v; want r1 lost", rep, err)
			}
			got := rep.Lost[0]
			want := Lost{Node: "node-a", LeaseExpiredAt: store.FormatTime(t0.Add(9 * time.Second)), DetectedBy: "node-b", DetectedAt: store.FormatTime(cb.t)}
			if got.Run.Status != StatusLost || got.Run.Lost == nil || *got.Run.Lost != want || got.Restart != tt.restart {
				t.Errorf("lost Run = status %s lost %+v restart %v; want lost %+v restart %v", got.Run.Status, got.Run.Lost, got.Restart, want, tt.restart)
			}
			v, err := f.m.Status(t.Context(), "alice", "r1")
			if err != nil || v.Status != StatusLost || v.EndedAt != store.FormatTime(cb.t) || !v.Status.Terminal() {
				t.Errorf("Status after = %+v, %v; want lost, ended at detection", v, err)
			}
			trace, _ := f.db.Trace(t.Context(), "r1", 0)
			if len(trace) == 0 || trace[len(trace)-1].Kind != "run.lost" {
				t.Errorf("Trace = %+v, want a run.lost event last", trace)
			}
			l, err := f.db.Lease(t.Context(), "r1")
			if tt.restart != (err == nil && l.Node == "node-b") {
				t.Errorf("lease after = %+v, %v; node-b keeps it exactly when the Recipe asks for a restart", l, err)
			}
			// node-a comes back: its lease is gone.
			ca.t = cb.t
			rep, err = a.Tick(t.Context())
			if err != nil || !slices.Equal(rep.Taken, []string{"r1"}) || len(rep.Renewed) != 0 {
				t.Errorf("Tick of the node that lost r1 = %+v, %v; want r1 taken", rep, err)
			}
			// Another round finds nothing more to do.
			if rep, err := b.Tick(t.Context()); err != nil || len(rep.Lost) != 0 || len(rep.Taken) != 0 {
				t.Errorf("second Tick = %+v, %v", rep, err)
			}
		})
	}
}

func TestLeaseKeeperReleasesEndedRuns(t *testing.T) {
	f := newFixture(t)
	ca, cb := &clock{t0}, &clock{t0.Add(time.Hour)}
	a, b := newKeeper(t, f, "node-a", ca), newKeeper(t, f, "node-b", cb)
	r := claimLive(t, f, "ended", `{"template":"true"}`)
	for _, id := range []string{"ended", "gone"} {
		if err := a.Acquire(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	code := 0
	r.ExitCode, r.EndedAt = &code, t0.Add(time.Second)
	if err := f.db.SaveRun(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Tick(t.Context())
	if err != nil || len(rep.Lost) != 0 || !slices.Equal(rep.Released, []string{"ended", "gone"}) {
		t.Fatalf("Tick = %+v, %v; want both leases released, nothing lost", rep, err)
	}
	if v, err := f.m.Status(t.Context(), "alice", "ended"); err != nil || v.Status != StatusDone {
		t.Errorf("ended Run = %+v, %v; want done", v, err)
	}
	if left, _ := f.db.ExpiredLeases(t.Context(), cb.t); len(left) != 0 {
		t.Errorf("leases left: %+v", left)
	}
}

func TestLeaseKeeperRenews(t *testing.T) {
	f := newFixture(t)
	c := &clock{t0}
	a := newKeeper(t, f, "node-a", c)
	for _, id := range []string{"r2", "r1"} {
		if err := a.Acquire(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	c.t = t0.Add(time.Minute)
	rep, err := a.Tick(t.Context())
	if err != nil || !slices.Equal(rep.Renewed, []string{"r1", "r2"}) || len(rep.Taken) != 0 {
		t.Fatalf("Tick = %+v, %v; want r1 and r2 renewed", rep, err)
	}
	if l, err := f.db.Lease(t.Context(), "r1"); err != nil || !l.ExpiresAt.Equal(c.t.Add(9*time.Second)) {
		t.Errorf("lease = %+v, %v", l, err)
	}
	if err := a.Release(context.Background(), "r1"); err != nil {
		t.Errorf("Release = %v", err)
	}
	if err := a.Release(context.Background(), "r1"); err != nil {
		t.Errorf("Release twice = %v, want nil", err)
	}
	if _, err := NewLeaseKeeper(LeaseConfig{Node: "", Leases: f.db.Cluster(), Manager: f.m}); err == nil {
		t.Error("NewLeaseKeeper without node succeeded")
	}
}

package run

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// clock is a settable clock for lease keepers.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// claimLive stores a running generation of Run id without a process, as a
// Run another node supervises looks from here.
func claimLive(t *testing.T, f *fixture, id, def string) store.RunRecord {
	t.Helper()
	doc, _ := json.Marshal(runDoc{LaunchKind: "spawn", Definition: json.RawMessage(def), Node: "node-a"})
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
			kinds := traceKinds(t, f, "r1")
			if tt.restart {
				// The next generation runs here, with the lost one's Trace.
				if next := got.Restarted; next == nil || next.Generation != 2 || next.Node != "node-b" || next.InstanceID == "inst-r1" {
					t.Errorf("restarted generation = %+v; want generation 2 on node-b", next)
				}
				if err != nil || v.Status != StatusRunning || v.Generation != 2 {
					t.Errorf("Status after restart = %+v, %v; want generation 2 running", v, err)
				}
				if i := slices.Index(kinds, "run.lost"); i < 0 || !slices.Contains(kinds[i:], "run.start") {
					t.Errorf("Trace kinds = %v; want run.lost then run.start", kinds)
				}
				t.Cleanup(func() { f.m.Kill(context.Background(), "alice", "r1") })
			} else {
				if err != nil || v.Status != StatusLost || v.EndedAt != store.FormatTime(cb.t) || !v.Status.Terminal() {
					t.Errorf("Status after = %+v, %v; want lost, ended at detection", v, err)
				}
				if len(kinds) == 0 || kinds[len(kinds)-1] != "run.lost" {
					t.Errorf("Trace kinds = %v, want run.lost last", kinds)
				}
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

func traceKinds(t *testing.T, f *fixture, id string) []string {
	t.Helper()
	trace, err := f.db.Trace(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range trace {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// openNode opens a second Manager on f's store as node, keeping leases.
func openNode(t *testing.T, f *fixture, node string) *Manager {
	t.Helper()
	m, err := New(t.Context(), Config{Store: f.db, DataDir: f.dir, PollInterval: 20 * time.Millisecond, Node: node, Leases: f.db.Cluster(), LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func TestReconcileLeavesOtherNodesRuns(t *testing.T) {
	f := newFixture(t)
	claimLive(t, f, "theirs", `{"template":"sleep 100"}`)
	if _, err := f.db.AcquireLease(t.Context(), "theirs", "node-a", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	orphan := claimLive(t, f, "orphan", `{"template":"sleep 100"}`)
	orphan.Doc = json.RawMessage(`{"launch_kind":"spawn"}`) // started before nodes had names
	if err := f.db.SaveRun(t.Context(), orphan); err != nil {
		t.Fatal(err)
	}
	b := openNode(t, f, "node-b")
	tests := []struct {
		id        string
		status    Status
		ident     string
		ended     bool
		leaseNode string
	}{
		// node-a holds the lease: its process is not checked here, and
		// the Run is not ended.
		{"theirs", StatusRunning, identityOtherNode, false, "node-a"},
		// Nobody holds it and its process is gone: node-b records the end
		// and lets go of the lease it took to do so.
		{"orphan", StatusExited, identityDead, true, ""},
	}
	for _, tt := range tests {
		v, err := b.Status(t.Context(), "alice", tt.id)
		if err != nil || v.Status != tt.status || v.ProcessIdentity != tt.ident || (v.EndedAt != "") != tt.ended {
			t.Errorf("%s on node-b = %+v, %v; want %s (%s), ended %v", tt.id, v, err, tt.status, tt.ident, tt.ended)
		}
		l, err := f.db.Lease(t.Context(), tt.id)
		if tt.leaseNode != l.Node || (tt.leaseNode == "") != errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s lease = %+v, %v; want held by %q", tt.id, l, err, tt.leaseNode)
		}
	}
}

func TestSpawnHoldsLeaseWhileRunning(t *testing.T) {
	f := newFixture(t)
	a := openNode(t, f, "node-a")
	r, err := DecodeRecipe([]byte(`{"template":"sleep 100"}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Spawn(t.Context(), "alice", SpawnRequest{Definition: r, RunID: "leased"})
	if err != nil || v.Node != "node-a" || v.Status != StatusRunning {
		t.Fatalf("Spawn = %+v, %v; want a Run running on node-a", v, err)
	}
	if l, err := f.db.Lease(t.Context(), "leased"); err != nil || l.Node != "node-a" {
		t.Errorf("lease while running = %+v, %v; want node-a's", l, err)
	}
	// Another node cannot start the same id while it runs.
	b := openNode(t, f, "node-b")
	if _, err := b.Spawn(t.Context(), "alice", SpawnRequest{Definition: r, RunID: "leased"}); code(err) != CodeRunActive {
		t.Errorf("Spawn of a running id on another node = %v, want run_active", err)
	}
	if _, err := a.Kill(t.Context(), "alice", "leased"); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("leased")
	// The lease goes once the end is recorded, just after.
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if _, err := f.db.Lease(t.Context(), "leased"); !errors.Is(err, store.ErrNotFound) {
			c.Errorf("lease after the Run ended: %v; want none", err)
		}
	}, "the lease gone")
}

func TestRestartFailsPendingControls(t *testing.T) {
	f := newFixture(t)
	c := &clock{t0}
	b := newKeeper(t, f, "node-b", c)
	r := claimLive(t, f, "svc", `{"template":"sleep 100","control":["pause"],"restart":"on_lost"}`)
	q := t0
	if _, err := f.db.AdmitControl(t.Context(), "svc", store.Control{ID: "c1", InstanceID: r.InstanceID, Action: "pause", QueuedAt: &q}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.AcquireLease(t.Context(), "svc", "node-a", t0, time.Second); err != nil {
		t.Fatal(err)
	}
	c.t = t0.Add(time.Minute)
	rep, err := b.Tick(t.Context())
	if err != nil || len(rep.Lost) != 1 || rep.Lost[0].Restarted == nil || len(rep.Errors) != 0 {
		t.Fatalf("Tick = %+v, %v; want svc lost and restarted", rep, err)
	}
	t.Cleanup(func() { f.m.Kill(context.Background(), "alice", "svc") })
	cs, err := f.db.Controls(t.Context(), "svc")
	if err != nil || len(cs) != 1 || cs[0].Status != store.ControlFailed || cs[0].Error != lostRestartReason {
		t.Fatalf("journal = %+v, %v; want c1 failed by the restart", cs, err)
	}
	// The new generation takes Controls.
	next := rep.Lost[0].Restarted
	q2 := t0.Add(2 * time.Minute)
	if _, err := f.db.AdmitControl(t.Context(), "svc", store.Control{ID: "c2", InstanceID: next.InstanceID, Action: "pause", QueuedAt: &q2}); err != nil {
		t.Errorf("admission to the restarted generation: %v", err)
	}
}

// A Run found lost that does not restart fails its pending Controls with
// terminal_state: no generation is left to handle them.
func TestLostFailsPendingControls(t *testing.T) {
	f := newFixture(t)
	c := &clock{t0}
	b := newKeeper(t, f, "node-b", c)
	r := claimLive(t, f, "svc", `{"template":"sleep 100","control":["pause"]}`)
	q := t0
	if _, err := f.db.AdmitControl(t.Context(), "svc", store.Control{ID: "c1", InstanceID: r.InstanceID, Action: "pause", QueuedAt: &q}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.AcquireLease(t.Context(), "svc", "node-a", t0, time.Second); err != nil {
		t.Fatal(err)
	}
	c.t = t0.Add(time.Minute)
	rep, err := b.Tick(t.Context())
	if err != nil || len(rep.Lost) != 1 || rep.Lost[0].Restarted != nil {
		t.Fatalf("Tick = %+v, %v; want svc lost, not restarted", rep, err)
	}
	cs, err := f.db.Controls(t.Context(), "svc")
	if err != nil || len(cs) != 1 || cs[0].Status != store.ControlFailed || cs[0].Error != terminalControlReason {
		t.Fatalf("journal = %+v, %v; want c1 failed with terminal_state", cs, err)
	}
}

// A generation this node has claimed but whose process it has not started
// yet (pid 0) reads running, process identity "starting", not exited: a
// read racing a spawn, or the restart of a Run lost with its node, does
// not see a Run about to run as gone. Once nothing starts it, the same
// record reads exited.
func TestStatusWhileStarting(t *testing.T) {
	f := newFixture(t)
	m := openNode(t, f, "node-b")
	r := store.RunRecord{ID: "phoenix", InstanceID: "gen-2", Generation: 2, Doc: json.RawMessage(`{"launch_kind":"spawn","node":"node-b"}`)}
	tests := []struct {
		name     string
		starting bool
		status   Status
		ident    string
	}{
		{"claimed, its process being started", true, StatusRunning, identityStarting},
		{"claimed, nothing starting it", false, StatusExited, identityDead},
	}
	for _, tt := range tests {
		m.setStarting(r.InstanceID, tt.starting)
		if status, ident := m.status(r); status != tt.status || ident != tt.ident {
			t.Errorf("%s: status %s (%s), want %s (%s)", tt.name, status, ident, tt.status, tt.ident)
		}
	}
}

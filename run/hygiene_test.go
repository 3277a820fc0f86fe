package run

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// writeWatch is a store that counts the writes made after closed is set.
type writeWatch struct {
	store.Runs
	closed atomic.Bool
	late   atomic.Int32
}

func (w *writeWatch) wrote() {
	if w.closed.Load() {
		w.late.Add(1)
	}
}

func (w *writeWatch) SaveRun(ctx context.Context, r store.RunRecord) error {
	w.wrote()
	return w.Runs.SaveRun(ctx, r)
}

func (w *writeWatch) AppendTraces(ctx context.Context, items []store.TraceAppend) ([]error, error) {
	w.wrote()
	return w.Runs.AppendTraces(ctx, items)
}

func (w *writeWatch) AppendTrace(ctx context.Context, id string, ev store.TraceEvent) error {
	w.wrote()
	return w.Runs.AppendTrace(ctx, id, ev)
}

func (w *writeWatch) DeleteRun(ctx context.Context, id string) error {
	w.wrote()
	return w.Runs.DeleteRun(ctx, id)
}

// Close while Runs exit: whatever the order, nothing is written once Close
// has returned, and the next Manager records the ends the closed one left.
func TestCloseWhileRunsExit(t *testing.T) {
	f := newFixture(t)
	w := &writeWatch{Runs: f.db}
	m, err := New(context.Background(), Config{Store: w, DataDir: f.dir, StartGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Each Run waits for a file in its own directory, the one place of
	// the data directory it sees.
	const n = 4
	for i := range n {
		b, _ := json.Marshal(map[string]string{"template": `while [ ! -e "$ASSENT_STATE_DIR/go" ]; do sleep 0.01; done`})
		r, err := DecodeRecipe(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Spawn(context.Background(), "alice", SpawnRequest{Definition: r, RunID: "exit" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if err := os.WriteFile(filepath.Join(f.dir, "runs", "exit"+strconv.Itoa(i), "go"), nil, 0o600); err != nil {
				t.Error(err)
			}
		}
	})
	m.Close()
	w.closed.Store(true)
	wg.Wait()
	m.waiting.Wait()
	if k := w.late.Load(); k != 0 {
		t.Fatalf("%d store writes after Close returned", k)
	}
	// The next Manager finds every end, recorded or not.
	next := f.openWith(Config{})
	for i := range n {
		id := "exit" + strconv.Itoa(i)
		if v, err := next.Status(context.Background(), "alice", id); err != nil || v.Status != StatusDone {
			t.Errorf("%s after restart: %+v, %v; want done", id, v, err)
		}
	}
}

// Every exported method that takes a context refuses a nil one with
// invalid_request instead of panicking.
func TestNilContextRefused(t *testing.T) {
	f := newFixture(t)
	ts, _ := newToolSet(t, f)
	var ctx context.Context // nil
	calls := map[string]func() error{
		"New": func() error { _, err := New(ctx, Config{Store: f.db, DataDir: f.dir}); return err },
		"Spawn": func() error {
			_, err := f.m.Spawn(ctx, "alice", SpawnRequest{Template: json.RawMessage(`"true"`)})
			return err
		},
		"Status":      func() error { _, err := f.m.Status(ctx, "alice", "r"); return err },
		"AppendTrace": func() error { _, err := f.m.AppendTrace(ctx, "alice", "r", "", TraceInput{Kind: "a"}); return err },
		"Kill":        func() error { _, err := f.m.Kill(ctx, "alice", "r"); return err },
		"Archive":     func() error { _, err := f.m.Archive(ctx, "alice", "r"); return err },
		"Prune":       func() error { _, err := f.m.Prune(ctx, "alice", "r", false); return err },
		"Logs":        func() error { _, err := f.m.Logs(ctx, "alice", "r", "stdout", 0); return err },
		"List":        func() error { _, err := f.m.List(ctx, "alice", ""); return err },
		"ListAll":     func() error { _, err := f.m.ListAll(ctx, ""); return err },
		"Owner":       func() error { _, err := f.m.Owner(ctx, "r"); return err },
		"Inspect": func() error {
			_, err := f.m.Inspect(ctx, "alice", InspectRequest{Target: "runtime", View: "status"})
			return err
		},
		"Apply":   func() error { _, err := f.m.Apply(ctx, "alice", "r", "pause", nil); return err },
		"ApplyAs": func() error { _, err := f.m.ApplyAs(ctx, "alice", "ada", "r", "pause", nil); return err },
		"Claim":   func() error { _, err := f.m.Claim(ctx, "alice", "r", "i", ""); return err },
		"Settle":  func() error { _, err := f.m.Settle(ctx, "alice", "r", "i", "c", true, ""); return err },
		"ProposeSpawn": func() error {
			_, err := ts.ProposeSpawn(ctx, mallory, SpawnRequest{Template: json.RawMessage(`"true"`)})
			return err
		},
		"Proposal":        func() error { _, err := ts.Proposal(ctx, person, "p"); return err },
		"Proposals":       func() error { _, err := ts.Proposals(ctx, person, ""); return err },
		"Approve":         func() error { _, err := ts.Approve(ctx, person, "p"); return err },
		"Decline":         func() error { _, err := ts.Decline(ctx, person, "p", "no"); return err },
		"RegisteredTools": func() error { _, err := ts.RegisteredTools(ctx, person); return err },
		"Publish":         func() error { _, err := ts.Publish(ctx, person, "x"); return err },
		"Register":        func() error { return ts.Register(ctx) },
		"ToolSet.Inspect": func() error {
			_, err := ts.Inspect(ctx, "alice", InspectRequest{Target: "runtime", View: "status"})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); code(err) != CodeInvalidRequest {
				t.Fatalf("%s(nil ctx) = %v, want code %s", name, err, CodeInvalidRequest)
			}
		})
	}
}

// A Run's lock lives only while it is held or awaited: the lock table is
// empty between operations, whatever happened to the Runs.
func TestRunLocksPruned(t *testing.T) {
	f := newFixture(t)
	f.m = f.openWith(Config{StartGrace: time.Minute})
	ctx := context.Background()
	for i := range 3 {
		id := "l" + strconv.Itoa(i)
		f.spawn("alice", id, "true")
		f.waitEnded(id)
		if _, err := f.m.Kill(ctx, "alice", id); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if _, err := f.m.Archive(ctx, "alice", id); err != nil {
				t.Fatal(err)
			}
		}
		if i > 1 {
			if _, err := f.m.Prune(ctx, "alice", id, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = f.m.Kill(ctx, "alice", "l0") })
	}
	wg.Wait()
	left := f.m.locks.Len()
	if left != 0 {
		t.Fatalf("%d Run locks kept after every operation ended", left)
	}
}

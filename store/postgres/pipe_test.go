package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/flowtest"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// TestPipeWrite holds the pipelined transaction to a transaction's
// contract: everything it wrote is kept when it commits, nothing when a
// statement fails in its first or last batch or the function fails
// between them, and the connection comes back to the pool outside any
// transaction. The pool has one connection, so each case reuses it. It
// holds in each statement mode a URL may choose.
func TestPipeWrite(t *testing.T) {
	u, _ := pgtest.URL(t)
	for _, mode := range []string{"cache_statement", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) { testPipeWrite(t, u+"&default_query_exec_mode="+mode) })
	}
}

func testPipeWrite(t *testing.T, u string) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := &DB{pool: pool}
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS pipe_t`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE pipe_t (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	errStop := errors.New("stop")
	batch := func(sql ...string) *pgx.Batch {
		b := &pgx.Batch{}
		for _, q := range sql {
			b.Queue(q)
		}
		return b
	}
	readAll := func(br pgx.BatchResults, n int) error {
		for range n {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		return br.Close()
	}
	tests := []struct {
		name    string
		fn      func(p *pipe) error
		wantErr bool
		want    int // rows in pipe_t afterwards
	}{
		{"two batches commit", func(p *pipe) error {
			if err := readAll(p.SendBatch(ctx, batch(`INSERT INTO pipe_t VALUES (1)`)), 1); err != nil {
				return err
			}
			return readAll(p.SendFinal(ctx, batch(`INSERT INTO pipe_t VALUES (2)`, `INSERT INTO pipe_t VALUES (3)`)), 2)
		}, false, 3},
		{"one final batch commits", func(p *pipe) error {
			return readAll(p.SendFinal(ctx, batch(`INSERT INTO pipe_t VALUES (4)`)), 1)
		}, false, 4},
		{"without a final batch the commit goes alone", func(p *pipe) error {
			return readAll(p.SendBatch(ctx, batch(`INSERT INTO pipe_t VALUES (5)`)), 1)
		}, false, 5},
		{"final batch closed unread commits", func(p *pipe) error {
			return p.SendFinal(ctx, batch(`INSERT INTO pipe_t VALUES (12)`, `SELECT k FROM pipe_t`)).Close()
		}, false, 6},
		{"final batch closed unread reports a failure", func(p *pipe) error {
			return p.SendFinal(ctx, batch(`INSERT INTO pipe_t VALUES (13)`, `INSERT INTO pipe_t VALUES (1)`)).Close()
		}, true, 6},
		{"failure in the last batch rolls back the first", func(p *pipe) error {
			if err := readAll(p.SendBatch(ctx, batch(`INSERT INTO pipe_t VALUES (6)`)), 1); err != nil {
				return err
			}
			return readAll(p.SendFinal(ctx, batch(`INSERT INTO pipe_t VALUES (7)`, `INSERT INTO pipe_t VALUES (1)`)), 2)
		}, true, 6},
		{"failure in the first batch", func(p *pipe) error {
			return readAll(p.SendBatch(ctx, batch(`INSERT INTO pipe_t VALUES (1)`)), 1)
		}, true, 6},
		{"function fails between batches", func(p *pipe) error {
			if err := readAll(p.SendBatch(ctx, batch(`INSERT INTO pipe_t VALUES (8)`)), 1); err != nil {
				return err
			}
			return errStop
		}, true, 6},
		{"results left unread still roll back on failure", func(p *pipe) error {
			br := p.SendFinal(ctx, batch(`INSERT INTO pipe_t VALUES (9)`, `INSERT INTO pipe_t VALUES (1)`))
			br.Exec()
			br.Close()
			return errStop
		}, true, 6},
		{"a batch after the final one is refused", func(p *pipe) error {
			if err := readAll(p.SendFinal(ctx, batch(`INSERT INTO pipe_t VALUES (10)`)), 1); err != nil {
				return err
			}
			return readAll(p.SendBatch(ctx, batch(`INSERT INTO pipe_t VALUES (11)`)), 1)
		}, true, 7},
	}
	for _, tc := range tests {
		err := s.pipeWrite(ctx, "pipe test", tc.fn)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pipe_t`).Scan(&n); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n != tc.want {
			t.Errorf("%s: %d rows, want %d", tc.name, n, tc.want)
		}
	}
}

// roundTrips counts what a pool sends: each statement and each batch is
// one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// openCounted opens a store on a new schema whose round trips rt counts.
func openCounted(t *testing.T) (*DB, *roundTrips) {
	t.Helper()
	u, _ := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	applyPoolDefaults(cfg, u)
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	s, err := OpenConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, rt
}

// TestControlWriteRoundTrips: a control write with its audit record, the
// transaction of every staged, applied or undone control, makes two round
// trips from BEGIN to COMMIT, whatever the update holds.
func TestControlWriteRoundTrips(t *testing.T) {
	ctx := context.Background()
	s, rt := openCounted(t)
	k := control.Key{FormID: "f", ControlID: "c"}
	prov := control.Provenance{Source: control.SourceAgent, PrincipalID: "p_a"}
	now := time.Now().UTC()
	stage := func(rev int64) control.Update {
		return control.Update{Key: k, Stage: &control.SavedProposal{Revision: rev, Provenance: prov, StagedAt: now,
			Value: json.RawMessage(`1`), Base: json.RawMessage(`0`)}}
	}
	// Each update is made twice, the first time unmeasured, so that
	// every statement is prepared.
	due := &store.DecisionDeadline{Kind: store.DeadlineControlProposal, Item: "f/c@4", Due: now.Add(time.Hour), CreatedAt: now}
	tests := []struct {
		name string
		u    func(i int64) control.Update
		dl   *store.DecisionDeadline
	}{
		{"stage", func(int64) control.Update { return stage(1) }, nil},
		{"stage again, expecting the proposal", func(i int64) control.Update {
			u := stage(2 + i)
			u.Expect = control.Expect{Proposal: true, Revision: 1 + i}
			return u
		}, nil},
		{"stage with a deadline", func(i int64) control.Update {
			u := stage(4 + i)
			u.Expect = control.Expect{Proposal: true, Revision: 3 + i}
			return u
		}, due},
		{"apply", func(int64) control.Update {
			return control.Update{Key: k, Unstage: true, Depth: 3, Push: &control.SavedChange{Action: control.Apply,
				Previous: json.RawMessage(`0`), Applied: json.RawMessage(`1`), Provenance: prov, At: now}}
		}, nil},
		{"undo", func(int64) control.Update { return control.Update{Key: k, Pop: true} }, nil},
	}
	for _, tc := range tests {
		for i := range int64(2) {
			rt.n.Store(0)
			if _, err := s.ControlRegistry().SaveControlAudited(ctx, tc.u(i), store.AuditRecord{Time: now, PrincipalID: "p_a",
				Source: "agent", FormID: "f", ControlID: "c", Action: "bench", OK: true}, tc.dl); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if n := rt.n.Load(); n != 2 {
			t.Errorf("%s: %d round trips, want 2", tc.name, n)
		}
	}
}

// TestRunControlRoundTrips: admitting a Control to a Run, moving it
// (claimed, handled, or any transition) and appending to the Run's Trace
// each make two round trips from BEGIN to COMMIT.
func TestRunControlRoundTrips(t *testing.T) {
	ctx := context.Background()
	s, rt := openCounted(t)
	now := time.Now().UTC()
	for i := range 2 { // the first unmeasured, so that every statement is prepared
		r := store.RunRecord{ID: fmt.Sprintf("r%d", i), OwnerID: "o", InstanceID: fmt.Sprintf("r%d-g1", i), Generation: 1, CreatedAt: now, StartedAt: now}
		if err := s.ClaimRun(ctx, r, ""); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"c1", "c2"} {
			rt.n.Store(0)
			if _, err := s.AdmitControl(ctx, r.ID, store.Control{ID: id, InstanceID: r.InstanceID, Action: "tick", QueuedAt: &now}); err != nil {
				t.Fatal(err)
			}
			if n := rt.n.Load(); i == 1 && n != 2 {
				t.Errorf("admission: %d round trips, want 2", n)
			}
		}
		steps := []struct {
			name string
			do   func() error
		}{
			{"delivered", func() error {
				_, err := s.TransitionControl(ctx, r.ID, "c1", store.ControlDelivered, nil, "", now)
				return err
			}},
			{"claimed", func() error {
				_, err := s.ClaimControl(ctx, r.ID, r.InstanceID, "c1", now)
				return err
			}},
			{"handled", func() error {
				_, err := s.TransitionControl(ctx, r.ID, "c1", store.ControlHandled, nil, "", now)
				return err
			}},
			{"claimed, the oldest", func() error {
				_, err := s.ClaimControl(ctx, r.ID, r.InstanceID, "", now)
				return err
			}},
			{"trace append", func() error {
				return s.AppendTrace(ctx, r.ID, store.TraceEvent{ID: fmt.Sprintf("e%d", i), TS: now, Kind: "progress.update",
					Summary: "step", Data: json.RawMessage(`{"completed":1}`)})
			}},
		}
		for _, st := range steps {
			rt.n.Store(0)
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if n := rt.n.Load(); i == 1 && n != 2 {
				t.Errorf("%s: %d round trips, want 2", st.name, n)
			}
		}
	}
}

// TestAdmitControlsBatchAsOneByOne: a batch of admissions over several
// Runs and generations, with refusals among them, decides each item and
// leaves each journal as the same admissions made one by one would.
func TestAdmitControlsBatchAsOneByOne(t *testing.T) {
	u, _ := pgtest.URL(t)
	ctx := context.Background()
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	type item struct {
		run, gen, id string
	}
	var items []item
	// Run 1 past its pending bound, Run 2 interleaved with it, an older
	// generation of Run 1 after its current one, and a Run that does not
	// exist.
	for i := range store.ControlPendingLimit + 2 {
		items = append(items, item{"r1", "g1", fmt.Sprintf("a%d", i)})
		if i%16 == 0 {
			items = append(items, item{"r2", "g1", fmt.Sprintf("b%d", i)})
		}
		if i == 3 {
			items = append(items, item{"r1", "g0", "old"}, item{"r9", "g1", "lost"})
		}
	}
	runs := func(prefix string) {
		for _, r := range []string{"r1", "r2"} {
			rec := store.RunRecord{ID: prefix + r, OwnerID: "o", InstanceID: prefix + r + "-g1", Generation: 1, CreatedAt: now, StartedAt: now}
			if err := s.ClaimRun(ctx, rec, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	admission := func(prefix string, it item) store.ControlAdmission {
		return store.ControlAdmission{RunID: prefix + it.run, Control: store.Control{ID: it.id, InstanceID: prefix + it.run + "-" + it.gen,
			Action: "tick", QueuedAt: &now}}
	}
	runs("a-")
	runs("b-")
	var batch []store.ControlAdmission
	for _, it := range items {
		batch = append(batch, admission("a-", it))
	}
	errs, err := s.AdmitControls(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i, it := range items {
		_, one := s.AdmitControl(ctx, "b-"+it.run, admission("b-", it).Control)
		if (errs[i] == nil) != (one == nil) || (one != nil && errs[i].Error() != strings.ReplaceAll(one.Error(), "b-", "a-")) {
			t.Errorf("item %d %+v: batch %v, one by one %v", i, it, errs[i], one)
		}
		if one != nil {
			refused++
		}
	}
	if refused < 4 {
		t.Errorf("%d items refused; the case means at least 4 (two past the bound, generation, missing Run)", refused)
	}
	for _, r := range []string{"r1", "r2"} {
		a, err := s.Controls(ctx, "a-"+r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Controls(ctx, "b-"+r)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) {
			t.Fatalf("%s: %d Controls from the batch, %d one by one", r, len(a), len(b))
		}
		for i := range a {
			if a[i].ID != b[i].ID || a[i].Status != b[i].Status || strings.TrimPrefix(a[i].InstanceID, "a-") != strings.TrimPrefix(b[i].InstanceID, "b-") {
				t.Errorf("%s, Control %d: batch %+v, one by one %+v", r, i, a[i], b[i])
			}
		}
	}
}

// TestFlowStepRoundTrips: in a Flow step the writes whose results nobody
// reads (the prescription, the journal entries, the receipt) go with the
// next read or with COMMIT. A prescribe is three round trips (its read and
// COMMIT, then one for its write), an apply eight (the prescription's read,
// the two writing transactions of two and three).
func TestFlowStepRoundTrips(t *testing.T) {
	ctx := context.Background()
	s, rt := openCounted(t)
	k := flow.NewKernel(s.Flows(), flow.NewInventory("0.1.0"))
	prog, err := k.AddProgram(ctx, []byte(flowtest.Toggle))
	if err != nil {
		t.Fatal(err)
	}
	pr := flow.Principal{ID: "agent", Kind: flow.AuthorityAgent, Grants: []string{"state.write"}}
	if _, err := k.Start(ctx, flow.Instance{ID: "light", Program: prog.Fingerprint(), Phase: "off", Objective: "never", Owner: "agent"}); err != nil {
		t.Fatal(err)
	}
	// The first steps prepare every statement.
	for i := range 4 {
		rt.n.Store(0)
		d, err := k.Prescribe(ctx, "light", pr, flow.Request{})
		if err != nil || d.Kind != flow.Prescribed {
			t.Fatalf("step %d: prescribe = %s %v", i, d.Kind, err)
		}
		prescribe := rt.n.Load()
		rt.n.Store(0)
		if _, err := k.Apply(ctx, d.Prescription.ID, pr); err != nil {
			t.Fatalf("step %d: apply: %v", i, err)
		}
		apply := rt.n.Load()
		if i >= 2 && (prescribe != 3 || apply != 8) {
			t.Errorf("step %d: prescribe %d round trips, apply %d; want 3 and 8", i, prescribe, apply)
		}
	}
	inst, err := k.Instance(ctx, "light")
	if err != nil || inst.Revision != 4 || inst.Pending != "" || inst.Recovery != nil {
		t.Errorf("after four steps the instance is %+v (%v)", inst, err)
	}
	j, err := k.Journal(ctx, "light")
	if err != nil || len(j) == 0 {
		t.Errorf("the journal holds %d entries (%v)", len(j), err)
	}
}

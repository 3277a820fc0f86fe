package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/sqlite"
)

// Targets of the store rows on PostgreSQL, in operations per second, and
// of the cross-node event row, in milliseconds at the 99th percentile.
const (
	targetAdmissionPerSec = 5000
	targetTracePerSec     = 20000
	targetCrossNodeP99ms  = 50
)

// storeBackend is one store the store rows run on.
type storeBackend struct {
	name string // "sqlite" or "postgres"
	st   store.Runs
	// m is a Run manager on the store, which groups concurrent writers
	// into one transaction.
	m   *run.Manager
	pg  *postgres.DB // the PostgreSQL store, or nil
	url string       // its URL
}

// newStoreBackend returns the backend name on st, with a Run manager whose
// data directory is dir.
func newStoreBackend(ctx context.Context, name string, st store.Store, dir string) (storeBackend, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return storeBackend{}, err
	}
	m, err := run.New(ctx, run.Config{Store: st.Runs(), DataDir: dir, Version: assent.Version,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return storeBackend{}, err
	}
	return storeBackend{name: name, st: st.Runs(), m: m}, nil
}

// benchStores opens the stores of the store rows: SQLite in dir, and
// PostgreSQL on a new schema of the database at rawURL when it is set. The
// returned function closes them and drops the schema.
func benchStores(ctx context.Context, dir, rawURL string) ([]storeBackend, func(), error) {
	lite, err := sqlite.Open(ctx, filepath.Join(dir, "store-bench.db"))
	if err != nil {
		return nil, nil, err
	}
	closers := []func(){func() { lite.Close() }}
	done := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	sb, err := newStoreBackend(ctx, "sqlite", lite, filepath.Join(dir, "store-bench-sqlite"))
	if err != nil {
		done()
		return nil, nil, err
	}
	closers = append(closers, sb.m.Close)
	out := []storeBackend{sb}
	if rawURL == "" {
		return out, done, nil
	}
	u, drop, err := benchSchema(ctx, rawURL)
	if err != nil {
		done()
		return nil, nil, err
	}
	closers = append(closers, drop)
	pg, err := postgres.Open(ctx, u)
	if err != nil {
		done()
		return nil, nil, err
	}
	closers = append(closers, func() { pg.Close() })
	pb, err := newStoreBackend(ctx, "postgres", pg, filepath.Join(dir, "store-bench-postgres"))
	if err != nil {
		done()
		return nil, nil, err
	}
	closers = append(closers, pb.m.Close)
	pb.pg, pb.url = pg, u
	return append(out, pb), done, nil
}

// benchSchema creates an empty schema in the database at rawURL and
// returns a URL whose connections use it, and a function that drops it.
func benchSchema(ctx context.Context, rawURL string) (string, func(), error) {
	if !postgres.IsURL(rawURL) {
		return "", nil, badStoreURL(rawURL)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	schema := pgx.Identifier{"assent_bench_" + hex.EncodeToString(b[:])}.Sanitize()
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, rawURL)
		if err != nil {
			return fmt.Errorf("%s: cannot connect to %s: %v", postgres.CodeUnreachable, postgres.Redact(rawURL), err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		return "", nil, fmt.Errorf("creating a schema for the benchmark: %w", err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		exec(dctx, `DROP SCHEMA `+schema+` CASCADE`)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		drop()
		return "", nil, badStoreURL(rawURL)
	}
	q := u.Query()
	q.Set("search_path", strings.Trim(schema, `"`))
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// storeCase is a store row's work on one backend: setup runs before each
// batch, outside the figures; op is one operation of worker w and reports
// how many items it wrote.
type storeCase struct {
	name  string
	conc  int
	items int // items written per operation
	// scale multiplies --calls: many writers need more operations per
	// batch than one to reach a steady state.
	scale int
	// target is the per-second target of the row on PostgreSQL.
	target float64
	setup  func(ctx context.Context, b storeBackend, round int) (op func(ctx context.Context, w int) error, after func(context.Context) error, err error)
}

// storeRows measures each store case on every backend, the backends
// alternated round by round, one row per case and backend.
func storeRows(ctx context.Context, o benchOpts, log io.Writer, backends []storeBackend) ([]benchRow, error) {
	var rows []benchRow
	for _, c := range storeCases(o) {
		names := make([]string, len(backends))
		for i, b := range backends {
			names[i] = fmt.Sprintf("%s, %s", c.name, b.name)
		}
		if !matchesAny(o.only, names) {
			continue
		}
		fmt.Fprintf(log, "bench: %s…\n", c.name)
		samples := make([][]sample, len(backends))
		for round := range o.rounds + 1 { // round 0 warms up
			for k := range backends {
				i := k
				if round%2 == 1 {
					i = len(backends) - 1 - k
				}
				s, err := storeSample(ctx, o, c, backends[i], round)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", names[i], err)
				}
				if round > 0 {
					samples[i] = append(samples[i], s)
				}
			}
		}
		for i, b := range backends {
			lat, rate := pool(samples[i])
			p50, p99 := percentiles(lat)
			r := benchRow{Name: names[i], N: len(lat) * c.items, P50ms: ms(p50), P99ms: ms(p99), PerSec: round1(rate * float64(c.items))}
			if b.name == "postgres" && c.target > 0 {
				r.TargetPerSec = c.target
			}
			if c.items > 1 {
				r.Note = fmt.Sprintf("latency per transaction of %d", c.items)
			}
			fmt.Fprintf(log, "bench:   %s: p50 %.3f ms, %.0f/s\n", b.name, r.P50ms, r.PerSec)
			rows = append(rows, r)
		}
	}
	if !matchesAny(o.only, []string{"event fan-out across nodes, postgres"}) {
		return rows, nil
	}
	for _, b := range backends {
		if b.pg != nil {
			fmt.Fprintln(log, "bench: event fan-out across nodes…")
			r, err := crossNodeRow(ctx, o, b.pg, b.url)
			if err != nil {
				return nil, fmt.Errorf("event fan-out across nodes: %w", err)
			}
			fmt.Fprintf(log, "bench:   p50 %.3f ms, p99 %.3f ms\n", r.P50ms, r.P99ms)
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// matchesAny reports whether only is empty or some name contains it.
func matchesAny(only string, names []string) bool {
	for _, n := range names {
		if strings.Contains(n, only) {
			return true
		}
	}
	return only == ""
}

func storeSample(ctx context.Context, o benchOpts, c storeCase, b storeBackend, round int) (sample, error) {
	op, after, err := c.setup(ctx, b, round)
	if err != nil {
		return sample{}, fmt.Errorf("setup: %w", err)
	}
	calls := max(o.calls*max(c.scale, 1)/c.items, c.conc)
	return batchWith(ctx, calls, c.conc, o.batchTimeout, op, after)
}

// storeCases are the store rows: Control admission and Trace append, one
// to a transaction from one writer and from 16 writers on 16 Runs, and
// appends grouped 64 to a transaction, as the Run manager groups
// concurrent writers.
func storeCases(o benchOpts) []storeCase {
	// Each case uses Runs of its own, named by round, so that rounds do
	// not see each other's records.
	newRuns := func(ctx context.Context, st store.Runs, prefix string, n int) ([]store.RunRecord, error) {
		runs := make([]store.RunRecord, n)
		now := time.Now().UTC()
		for i := range runs {
			id := fmt.Sprintf("%s-%d", prefix, i)
			runs[i] = store.RunRecord{ID: id, OwnerID: "bench", InstanceID: id + "-g1", Generation: 1, CreatedAt: now, StartedAt: now}
			if err := st.ClaimRun(ctx, runs[i], ""); err != nil {
				return nil, err
			}
		}
		return runs, nil
	}
	admit := func(ctx context.Context, st store.Runs, r store.RunRecord) (string, error) {
		q := time.Now()
		c, err := st.AdmitControl(ctx, r.ID, store.Control{ID: uuid.NewString(), InstanceID: r.InstanceID, Action: "bench.tick", QueuedAt: &q})
		return c.ID, err
	}
	settle := func(ctx context.Context, st store.Runs, r store.RunRecord, ids []string) error {
		for _, id := range ids {
			if _, err := st.ClaimControl(ctx, r.ID, r.InstanceID, id, time.Now()); err != nil {
				return err
			}
			if _, err := st.TransitionControl(ctx, r.ID, id, store.ControlHandled, nil, "", time.Now()); err != nil {
				return err
			}
		}
		return nil
	}
	event := func() store.TraceEvent {
		return store.TraceEvent{ID: uuid.NewString(), TS: time.Now(), Kind: "progress.update", Summary: "step", Data: json.RawMessage(`{"completed":1}`)}
	}
	const writers = 16
	return []storeCase{
		{
			// The runtime's path for a Run's Trace: validated appends
			// through the Run manager, which commits the appends of
			// concurrent producers together.
			name: fmt.Sprintf("run manager trace append, %d appenders", managerAppenders), conc: managerAppenders, items: 1, scale: 8, target: targetTracePerSec,
			setup: func(ctx context.Context, b storeBackend, round int) (func(context.Context, int) error, func(context.Context) error, error) {
				runs, err := newRuns(ctx, b.st, fmt.Sprintf("manager-%d", round), 1)
				if err != nil {
					return nil, nil, err
				}
				in := run.TraceInput{Kind: "progress.update", Summary: "step", Data: []byte(`{"completed":1}`)}
				return func(ctx context.Context, _ int) error {
					_, err := b.m.AppendTrace(ctx, runs[0].OwnerID, runs[0].ID, "", in)
					return err
				}, nil, nil
			},
		},
		{
			// One admitter on a long-lived Run: its journal keeps
			// ControlTerminalLimit terminal records, and the admitted
			// Controls are settled every settleEvery admissions,
			// outside the figures.
			name: "store control admission, 1 admitter", conc: 1, items: 1,
			setup: func(ctx context.Context, b storeBackend, round int) (func(context.Context, int) error, func(context.Context) error, error) {
				st := b.st
				runs, err := newRuns(ctx, st, fmt.Sprintf("admit1-%d", round), 1)
				if err != nil {
					return nil, nil, err
				}
				r := runs[0]
				var pending []string
				for len(pending) < store.ControlTerminalLimit {
					id, err := admit(ctx, st, r)
					if err != nil {
						return nil, nil, err
					}
					if pending = append(pending, id); len(pending)%settleEvery == 0 {
						if err := settle(ctx, st, r, pending[len(pending)-settleEvery:]); err != nil {
							return nil, nil, err
						}
					}
				}
				pending = pending[:0]
				op := func(ctx context.Context, _ int) error {
					id, err := admit(ctx, st, r)
					pending = append(pending, id)
					return err
				}
				after := func(ctx context.Context) error {
					if len(pending) < settleEvery {
						return nil
					}
					err := settle(ctx, st, r, pending)
					pending = pending[:0]
					return err
				}
				return op, after, nil
			},
		},
		{
			// 16 admitters, each on Runs of its own, a fresh Run every
			// ControlPendingLimit admissions (created beforehand).
			name: fmt.Sprintf("store control admission, %d admitters", writers), conc: writers, items: 1,
			setup: func(ctx context.Context, b storeBackend, round int) (func(context.Context, int) error, func(context.Context) error, error) {
				st := b.st
				// A worker may run every call of the batch.
				per := max(o.calls, writers)/store.ControlPendingLimit + 1
				runs, err := newRuns(ctx, st, fmt.Sprintf("admit%d-%d", writers, round), writers*per)
				if err != nil {
					return nil, nil, err
				}
				counts := make([]int, writers)
				op := func(ctx context.Context, w int) error {
					r := runs[w*per+counts[w]/store.ControlPendingLimit]
					counts[w]++
					_, err := admit(ctx, st, r)
					return err
				}
				return op, nil, nil
			},
		},
		{
			// Admissions 64 to a transaction, one Run's full pending
			// window each, as the Run manager groups concurrent
			// admitters.
			name: "store control admission, 64 to a transaction", conc: 1, items: store.ControlPendingLimit, target: targetAdmissionPerSec,
			setup: func(ctx context.Context, b storeBackend, round int) (func(context.Context, int) error, func(context.Context) error, error) {
				st := b.st
				runs, err := newRuns(ctx, st, fmt.Sprintf("admit64-%d", round), max(o.calls/store.ControlPendingLimit, 1))
				if err != nil {
					return nil, nil, err
				}
				next := 0
				items := make([]store.ControlAdmission, store.ControlPendingLimit)
				op := func(ctx context.Context, _ int) error {
					r := runs[next]
					next++
					q := time.Now()
					for k := range items {
						items[k] = store.ControlAdmission{RunID: r.ID, Control: store.Control{ID: uuid.NewString(), InstanceID: r.InstanceID, Action: "bench.tick", QueuedAt: &q}}
					}
					errs, err := st.AdmitControls(ctx, items)
					if err != nil {
						return err
					}
					return errors.Join(errs...)
				}
				return op, nil, nil
			},
		},
		{
			name: "store trace append, 1 appender", conc: 1, items: 1,
			setup: func(ctx context.Context, b storeBackend, round int) (func(context.Context, int) error, func(context.Context) error, error) {
				st := b.st
				runs, err := newRuns(ctx, st, fmt.Sprintf("trace1-%d", round), 1)
				if err != nil {
					return nil, nil, err
				}
				return func(ctx context.Context, _ int) error { return st.AppendTrace(ctx, runs[0].ID, event()) }, nil, nil
			},
		},
		{
			name: fmt.Sprintf("store trace append, %d appenders", writers), conc: writers, items: 1,
			setup: func(ctx context.Context, b storeBackend, round int) (func(context.Context, int) error, func(context.Context) error, error) {
				st := b.st
				runs, err := newRuns(ctx, st, fmt.Sprintf("trace%d-%d", writers, round), writers)
				if err != nil {
					return nil, nil, err
				}
				return func(ctx context.Context, w int) error { return st.AppendTrace(ctx, runs[w].ID, event()) }, nil, nil
			},
		},
		{
			name: "store trace append, 64 to a transaction", conc: 1, items: 64,
			setup: func(ctx context.Context, b storeBackend, round int) (func(context.Context, int) error, func(context.Context) error, error) {
				st := b.st
				runs, err := newRuns(ctx, st, fmt.Sprintf("trace64-%d", round), 1)
				if err != nil {
					return nil, nil, err
				}
				items := make([]store.TraceAppend, 64)
				return func(ctx context.Context, _ int) error {
					for k := range items {
						items[k] = store.TraceAppend{RunID: runs[0].ID, Event: event()}
					}
					errs, err := st.AppendTraces(ctx, items)
					if err != nil {
						return err
					}
					return errors.Join(errs...)
				}, nil, nil
			},
		},
	}
}

// managerAppenders is how many producers append to one Run's Trace at once
// in the Run manager row.
const managerAppenders = 64

// crossNodeEvent is the type of the events the cross-node row publishes.
const crossNodeEvent = "bench.cross_node"

// crossNodeSubscribers is how many subscribers the cross-node row has.
const crossNodeSubscribers = 100

// crossNodeRow measures events published on one node's bus until each of
// crossNodeSubscribers subscribers on a second node's bus has it: two
// pools on one database, as two nodes, at o.rate events per second for
// o.duration per round.
func crossNodeRow(ctx context.Context, o benchOpts, pg *postgres.DB, rawURL string) (benchRow, error) {
	second, err := postgres.Open(ctx, rawURL)
	if err != nil {
		return benchRow{}, err
	}
	defer second.Close()
	quiet := event.Options{Logger: slog.New(slog.DiscardHandler)}
	pub, err := event.Open(ctx, pg.Cluster().EventLog(), quiet)
	if err != nil {
		return benchRow{}, err
	}
	defer pub.Close()
	recv, err := event.Open(ctx, second.Cluster().EventLog(), quiet)
	if err != nil {
		return benchRow{}, err
	}
	defer recv.Close()

	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	sctx, stop := context.WithCancel(ctx)
	for range crossNodeSubscribers {
		s := recv.Subscribe(recv.Seq(), 1024, func(e event.Event) bool { return e.Type == crossNodeEvent })
		wg.Go(func() {
			defer s.Close()
			var buf []event.Event
			for {
				var err error
				if buf, err = s.NextBatch(sctx, buf[:0]); err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				for _, e := range buf {
					lat = append(lat, now.Sub(e.Time))
				}
				mu.Unlock()
			}
		})
	}
	published := 0
	tick := time.NewTicker(time.Second / time.Duration(o.rate))
	for round := range o.rounds + 1 {
		end := time.Now().Add(o.duration)
		for time.Now().Before(end) {
			select {
			case <-ctx.Done():
				tick.Stop()
				stop()
				wg.Wait()
				return benchRow{}, ctx.Err()
			case <-tick.C:
			}
			pub.Publish(event.Event{Type: crossNodeEvent})
			if round > 0 {
				published++
			}
		}
		if round == 0 {
			// Round 0 warms up: let its events arrive, then forget them.
			time.Sleep(time.Second)
			mu.Lock()
			lat = lat[:0]
			mu.Unlock()
		}
	}
	tick.Stop()
	// Let the last events arrive.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n >= published*crossNodeSubscribers {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	p50, p99 := percentiles(lat)
	r := benchRow{Name: fmt.Sprintf("event fan-out across nodes, %d subscribers at %d events/s, postgres", crossNodeSubscribers, o.rate),
		N: len(lat), P50ms: ms(p50), P99ms: ms(p99), PerSec: round1(float64(len(lat)) / (float64(o.rounds) * o.duration.Seconds())),
		TargetP99ms: targetCrossNodeP99ms}
	if missing := int64(published*crossNodeSubscribers - len(lat)); missing > 0 {
		r.Dropped = missing
	}
	return r, nil
}

// backendRows are the rows that compare the backends, when rawURL names a
// PostgreSQL database (none otherwise): the store rows on SQLite and on
// PostgreSQL, the cross-node event row, and the MCP controls_execute and
// HTTP admission rows of an assent server on PostgreSQL (the server rows
// on SQLite are the unsuffixed ones). dir is the run's temporary
// directory.
func backendRows(ctx context.Context, o benchOpts, log io.Writer, dir, rawURL string) ([]benchRow, error) {
	if rawURL == "" {
		return nil, nil
	}
	backends, closeStores, err := benchStores(ctx, dir, rawURL)
	if err != nil {
		return nil, err
	}
	defer closeStores()
	rows, err := storeRows(ctx, o, log, backends)
	if err != nil {
		return nil, err
	}
	more, err := postgresServerRows(ctx, o, log, dir, rawURL)
	return append(rows, more...), err
}

// postgresServerRows runs the durable rows on an assent server whose store
// is a new schema of the database at rawURL, against the floor on the
// same schema.
func postgresServerRows(ctx context.Context, o benchOpts, log io.Writer, dir, rawURL string) ([]benchRow, error) {
	var pg *postgres.DB
	data := filepath.Join(dir, "postgres")
	cases := append(durableCases(", postgres"),
		serverCase{mixedName + ", postgres", func(ctx context.Context, e *benchEnv, name string) (benchRow, error) {
			return e.mixedRow(ctx, name)
		}},
		serverCase{mixedName + ", postgres" + twoNodesSuffix, func(ctx context.Context, e *benchEnv, name string) (benchRow, error) {
			second, stop, err := startSecondNode(ctx, e, pg, data+"-2")
			if err != nil {
				return benchRow{}, err
			}
			defer stop()
			return e.twoNodeMixedRow(ctx, name, second)
		}})
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
	}
	if !matchesAny(o.only, names) {
		return nil, nil
	}
	u, drop, err := benchSchema(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	defer drop()
	pg, err = postgres.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	e, stop, err := startBenchServer(ctx, o, log, pg, data)
	if err != nil {
		return nil, err
	}
	defer stop()
	kill, err := e.setUpDurable(ctx, pg)
	if err != nil {
		return nil, fmt.Errorf("on PostgreSQL: %w", err)
	}
	defer kill()
	var rows []benchRow
	for _, c := range cases {
		if !strings.Contains(c.name, o.only) {
			continue
		}
		fmt.Fprintf(log, "bench: %s…\n", c.name)
		r, err := c.run(ctx, e, c.name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			// A row that fails is reported as failed, and the rows
			// after it still run.
			fmt.Fprintf(log, "bench:   failed: %v\n", err)
			rows = append(rows, benchRow{Name: c.name, Note: failedNote(err)})
			continue
		}
		fmt.Fprintf(log, "bench:   p50 %.3f ms (floor %.3f), %.0f/s (floor %.0f), ratio %.2f\n", r.P50ms, r.FloorP50ms, r.PerSec, r.FloorPerSec, r.Ratio)
		rows = append(rows, r)
	}
	return rows, nil
}

// startNode starts an assent server on st with its data in dir, listening
// on loopback; it returns the server, its base URL and a function that
// stops it.
func startNode(ctx context.Context, st store.Store, dir string) (*server.Server, string, func(), error) {
	cfg := server.Config{DataDir: dir, Store: st, RateLimit: -1}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return nil, "", nil, err
	}
	if _, err := demo.Install(ctx, srv, cfg); err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	stop := func() {
		cancel()
		<-served
		srv.Close()
	}
	return srv, "http://" + ln.Addr().String(), stop, nil
}

// startBenchServer starts an assent server on st with its data in dir,
// and a floor beside it, both on loopback; the returned function stops
// them.
func startBenchServer(ctx context.Context, o benchOpts, log io.Writer, st store.Store, dir string) (*benchEnv, func(), error) {
	boot, err := auth.EnsureBootstrap(ctx, st, time.Now())
	if err != nil {
		return nil, nil, err
	}
	srv, base, stopNode, err := startNode(ctx, st, dir)
	if err != nil {
		return nil, nil, err
	}
	floor, err := startFloor(st)
	if err != nil {
		stopNode()
		return nil, nil, err
	}
	stop := func() {
		floor.close()
		stopNode()
	}
	e := &benchEnv{o: o, log: log, base: base, token: boot.AgentToken, agentID: boot.Agent.ID, srv: srv, floor: floor}
	return e, stop, nil
}

// startSecondNode starts another assent server on e's store, with its data
// in dir (and so a node name of its own), for the two-node row; its
// clients use e's token. The returned function stops it.
func startSecondNode(ctx context.Context, e *benchEnv, st store.Store, dir string) (*benchEnv, func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	srv, base, stop, err := startNode(ctx, st, dir)
	if err != nil {
		return nil, nil, err
	}
	return &benchEnv{o: e.o, log: e.log, base: base, token: e.token, agentID: e.agentID, srv: srv}, stop, nil
}

// failedNote is the note of a row that failed with err, at most 300
// bytes of its message.
func failedNote(err error) string {
	msg := err.Error()
	if len(msg) > 300 {
		msg = strings.ToValidUTF8(msg[:300], "") + "…"
	}
	return "failed: " + msg
}

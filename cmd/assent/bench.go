package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/unsaved"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

// benchRow is one measured figure beside its floor.
type benchRow struct {
	Name string `json:"name"`
	// N is how many operations (or delivered events) the assent figures
	// rest on.
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	// PerSec is operations per second (events per second delivered, for
	// fan-out rows).
	PerSec      float64 `json:"per_s"`
	FloorP50ms  float64 `json:"floor_p50_ms"`
	FloorP99ms  float64 `json:"floor_p99_ms"`
	FloorPerSec float64 `json:"floor_per_s"`
	// Ratio is assent's per_s over the floor's, or for latency rows the
	// floor's p50 over assent's: 1 is the floor, higher is better.
	Ratio float64 `json:"ratio"`
	// Target is the ratio the row should reach, when it has one.
	Target float64 `json:"target,omitempty"`
	// TargetPerSec and TargetP99ms are the absolute targets of rows
	// without a floor (the store rows), when they have one.
	TargetPerSec float64 `json:"target_per_s,omitempty"`
	TargetP99ms  float64 `json:"target_p99_ms,omitempty"`
	Dropped      int64   `json:"dropped,omitempty"`
	// Against compares the row's calls per second with another row of
	// the same run: a PostgreSQL row with its SQLite row, two PostgreSQL
	// nodes with one.
	Against *benchAgainst `json:"against,omitempty"`
	Note    string        `json:"note,omitempty"`
}

// benchAgainst is a row's calls per second over another row's.
type benchAgainst struct {
	// Row is the name of the other row.
	Row    string  `json:"row"`
	Ratio  float64 `json:"ratio"`
	Target float64 `json:"target"`
}

// Targets of a row against another of the same run.
const (
	// targetPostgresVsSQLite is a PostgreSQL row's calls per second over
	// the same row's on SQLite, on one node.
	targetPostgresVsSQLite = 0.7
	// targetTwoNodes is the calls per second of two PostgreSQL nodes
	// over one's, when the database has cores of its own.
	targetTwoNodes = 1.4
)

// twoNodesSuffix ends the name of a row made on two PostgreSQL nodes.
const twoNodesSuffix = ", 2 nodes"

// compareRows sets Against on the rows that have a counterpart in rows:
// each PostgreSQL row ("…, postgres") against its SQLite row (the same
// name unsuffixed, or ending in ", sqlite" for the store rows), and a
// two-node row against the one-node row. Rows without calls per second
// (failed rows, latency rows) are left alone.
func compareRows(rows []benchRow) {
	perSec := map[string]float64{}
	for _, r := range rows {
		if r.PerSec > 0 && r.TargetP99ms == 0 {
			perSec[r.Name] = r.PerSec
		}
	}
	for i := range rows {
		r := &rows[i]
		if perSec[r.Name] == 0 {
			continue
		}
		var others []string
		target := targetPostgresVsSQLite
		switch {
		case strings.HasSuffix(r.Name, ", postgres"+twoNodesSuffix):
			others = []string{strings.TrimSuffix(r.Name, twoNodesSuffix)}
			target = targetTwoNodes
		case strings.HasSuffix(r.Name, ", postgres"):
			base := strings.TrimSuffix(r.Name, ", postgres")
			others = []string{base + ", sqlite", base}
		}
		for _, o := range others {
			if v := perSec[o]; v > 0 {
				r.Against = &benchAgainst{Row: o, Ratio: round2(r.PerSec / v), Target: target}
				break
			}
		}
	}
}

// againstText is a row's comparison in the table: "0.81 of sqlite
// (target 0.70)".
func againstText(a *benchAgainst) string {
	if a == nil {
		return "-"
	}
	of := "sqlite"
	if strings.HasSuffix(a.Row, ", postgres") {
		of = "1 node"
	}
	return fmt.Sprintf("%.2f of %s (target %.2f)", a.Ratio, of, a.Target)
}

type benchOpts struct {
	calls        int
	rounds       int
	subscribers  []int
	rate         int
	duration     time.Duration
	batchTimeout time.Duration
	only         string
	asJSON       bool
	cpuProfile   string
	store        storeFlags
	// storeURL is what store resolves to.
	storeURL string
	// dropControlWrites runs assent with its control registry's writes
	// dropped: a measurement of what the durable write costs.
	dropControlWrites bool
}

// Ratio targets of the rows that have one.
const (
	targetStatus = 0.8
	// targetDurable is the target of the durable rows, measured against
	// a floor that commits one transaction per call on the same store.
	targetDurable = 0.85
	targetFanOut  = 1 / 1.1
)

func newBenchCmd(c *cli) *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure whole-system figures against their floor on loopback",
		Long: `Start assent on a temporary data directory and, beside it, a floor: the
least a server on the same libraries does for the same request. Both listen
on loopback. Each row is measured on assent (A) and on the floor (B) with
the same client code, alternately (A B, then B A, ROUNDS times), and
reported as medians:

  runtime_status, 1/16/64 clients   MCP tools/call over streamable HTTP.
                                    Floor: an MCP server on the same SDK
                                    version with one trivial tool, served
                                    the same way (statelessly for the
                                    client's protocol revision).
  screen press /api/mutate          A screen tool run through /api/mutate
                                    with a bearer token. Floor: a net/http
                                    handler decoding the same JSON body.

Durable rows, 1/16/64 clients: calls that commit before they answer,
against a floor that commits one transaction per call (one audit record)
on the same store as assent, so with the same journal mode and sync
setting:

  controls_execute                  Staging a Control value over MCP.
                                    Floor: the committing tool.
  flows_prescribe+flows_apply       One Flow step (two MCP calls), each
                                    client on an instance of its own.
                                    Floor: two calls of the committing
                                    tool.
  control admission                 A Control applied to a running Run
                                    through POST /v1/runs/{id}/controls
                                    (admitted to the journal, written to
                                    the Run's FIFO), 32 to each Run in
                                    turn. Floor: the JSON handler after
                                    one commit. The Controls are settled
                                    after each batch, outside the figures.
  event fan-out, N subscribers      Delivery latency of events published
                                    at RATE per second to N clients of
                                    GET /v1/events. Floor: a net/http SSE
                                    broadcaster with the same wire format
                                    and per-subscriber buffer (256).

With --store postgres://…, SQLite and PostgreSQL side by side:

  store …, sqlite / postgres        Control admission and Trace append
                                    made straight on each store, from one
                                    writer, 16 writers on 16 Runs, and 64
                                    to a transaction, the two stores
                                    alternated. No floor: the PostgreSQL
                                    rows carry their target per second.
  event fan-out across nodes        Events published on one node until
                                    100 subscribers on another have them
                                    (two pools on one database). Target:
                                    p99 latency.
  …, postgres                       The durable rows on an assent server
                                    on PostgreSQL, the floor committing on
                                    the same database (each store row and
                                    server on a new schema, dropped at the
                                    end).

ratio is assent's calls per second divided by the floor's, or, for
fan-out rows (latency only), the floor's p50 latency divided by assent's.
1.0 means assent is at the floor; target, when shown, is the ratio the
row should reach. With --store, against compares calls per second within
the run: each PostgreSQL row over the same row on SQLite (target 0.7),
and the two-node row over one node (target 1.4). Progress goes to
standard error.

Every batch is bounded by --calls and --batch-timeout, every fan-out
round by --duration. Figures depend on the machine: compare the ratios.

--drop-control-writes runs assent with its control registry's writes
dropped, so that the controls_execute row shows what the stage's durable
write (one SQLite transaction) costs a call. Its figures are a
measurement, not assent's.`,
		Example: `  assent bench
  assent bench --calls 2000 --rounds 6 --subscribers 100,1000 --json
  assent bench --only runtime_status
  assent bench --only controls_execute --drop-control-writes
  ASSENT_STORE=postgres://USER:PASSWORD@HOST:5432/DATABASE assent bench`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.calls < 1 || o.rounds < 1 || o.rate < 1 || o.duration <= 0 || o.batchTimeout <= 0 {
				return usageErr("bench: --calls, --rounds, --rate, --duration and --batch-timeout must be positive")
			}
			for _, n := range o.subscribers {
				if n < 1 || n > 10000 {
					return usageErr("bench: each --subscribers value must be between 1 and 10000")
				}
			}
			var err error
			if o.storeURL, err = o.store.resolve(); err != nil {
				return err
			}
			if o.cpuProfile != "" {
				f, err := os.Create(o.cpuProfile)
				if err != nil {
					return refused("bench: %v", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return refused("bench: %v", err)
				}
				defer pprof.StopCPUProfile()
			}
			rows, err := runBench(cmd.Context(), o, c.err)
			if err != nil {
				return refused("bench: %v", err)
			}
			if o.asJSON {
				return printJSON(c.out, map[string]any{"results": rows})
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BENCHMARK\tN\tP50 ms\tP99 ms\tPER S\tFLOOR P50 ms\tFLOOR PER S\tRATIO\tTARGET\tAGAINST\tNOTE")
			for _, r := range rows {
				target := "-"
				switch {
				case r.Target > 0:
					target = fmt.Sprintf("%.2f", r.Target)
				case r.TargetPerSec > 0:
					target = fmt.Sprintf("%.0f/s", r.TargetPerSec)
				case r.TargetP99ms > 0:
					target = fmt.Sprintf("p99 %gms", r.TargetP99ms)
				}
				fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.0f\t%.3f\t%.0f\t%.2f\t%s\t%s\t%s\n",
					r.Name, r.N, r.P50ms, r.P99ms, r.PerSec, r.FloorP50ms, r.FloorPerSec, r.Ratio, target, againstText(r.Against), r.Note)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.calls, "calls", 1000, "operations per batch (one batch per side per round)")
	f.IntVar(&o.rounds, "rounds", 4, "alternating rounds per row")
	f.IntSliceVar(&o.subscribers, "subscribers", []int{100, 1000}, "event-stream subscriber counts, one fan-out row each")
	f.IntVar(&o.rate, "rate", 50, "events published per second in fan-out rows")
	f.DurationVar(&o.duration, "duration", 2*time.Second, "how long events are published per fan-out round")
	f.DurationVar(&o.batchTimeout, "batch-timeout", 20*time.Second, "the longest one batch of calls may run")
	f.StringVar(&o.only, "only", "", "run only the rows whose name contains this text")
	f.BoolVar(&o.asJSON, "json", false, "print JSON")
	o.store.add(f, "also run the store rows, and the MCP and admission rows, on the PostgreSQL database at this URL (without a password), beside SQLite (default $ASSENT_STORE)")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (assent, the floor and the clients) to this file")
	f.BoolVar(&o.dropControlWrites, "drop-control-writes", false, "measurement only: run assent with its control registry's writes dropped (nothing staged is saved), to show what a stage's durable write costs; every row's note says so")
	return cmd
}

// benchEnv is assent and its floor, started for benchmarking.
type benchEnv struct {
	o     benchOpts
	log   io.Writer
	base  string
	token string
	srv   *server.Server
	floor *floorServer
	// agentID is the principal of token.
	agentID string
	// flowInstances are the Flow instances the flows rows step, one
	// for each client.
	flowInstances []string
	// controlRuns are the Runs the admission rows send Controls to.
	controlRuns []benchRun
}

// benchScreenTool is the screen tool the /api/mutate row presses.
const benchScreenTool = "bench.noop"

// toggleProgram moves between two phases forever, so that every step
// prescribes and applies one transition. Its instance starts unplugged,
// the entry phase an agent starts in; the first step plugs it in.
const toggleProgram = `{
  "schema_version": 1, "program_id": "bench-toggle", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "never", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["nowhere"]}]}],
  "transitions": [
    {"id": "plug-in", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["unplugged"], "target_phases": ["off"], "authority": ["agent"],
     "assignments": [{"facet": "light", "value": "off"}], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "plug_in", "expected_postcondition": "off"}},
    {"id": "on", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["off"], "target_phases": ["on"], "authority": ["agent"],
     "assignments": [{"facet": "light", "value": "on"}], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "switch_on", "expected_postcondition": "on"}},
    {"id": "off", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["on"], "target_phases": ["off"], "authority": ["agent"],
     "assignments": [{"facet": "light", "value": "off"}], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "switch_off", "expected_postcondition": "off"}}
  ]
}`

func runBench(ctx context.Context, o benchOpts, progress io.Writer) ([]benchRow, error) {
	dir, err := os.MkdirTemp("", "assent-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		return nil, err
	}
	var st store.Store = db
	if o.dropControlWrites {
		st = unsaved.Controls(db)
	}
	cfg := server.Config{DataDir: dir, Store: st, RateLimit: -1}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	if _, err := demo.Install(ctx, srv, cfg); err != nil {
		return nil, err
	}
	noop := func(context.Context, confirm.Request) (confirm.Result, error) {
		return confirm.Result{Value: map[string]any{}}, nil
	}
	if err := srv.Screens().RegisterTool(screens.Tool{Access: screens.AccessPublic, Tool: confirm.Tool{Name: benchScreenTool, Description: "Do nothing.", Handler: noop}}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() { stop(); <-served }()
	floor, err := startFloor(st)
	if err != nil {
		return nil, err
	}
	defer floor.close()
	e := &benchEnv{o: o, log: progress, base: "http://" + ln.Addr().String(), token: boot.AgentToken, agentID: boot.Agent.ID, srv: srv, floor: floor}
	kill, err := e.setUpDurable(ctx, db)
	if err != nil {
		return nil, err
	}
	defer kill()

	type benchCase struct {
		name string
		run  func(context.Context, string) (benchRow, error)
	}
	var cases []benchCase
	for _, conc := range []int{1, 16, 64} {
		cases = append(cases, benchCase{fmt.Sprintf("mcp runtime_status, %d client(s)", conc), func(ctx context.Context, name string) (benchRow, error) {
			return e.mcpRow(ctx, name, conc, targetStatus, floorTool, mcpCall("runtime_status", map[string]any{}))
		}})
	}
	cases = append(cases, benchCase{"screen press POST /api/mutate, 1 client", func(ctx context.Context, name string) (benchRow, error) {
		return e.mutateRow(ctx, name)
	}})
	for _, c := range durableCases("") {
		cases = append(cases, benchCase{c.name, func(ctx context.Context, name string) (benchRow, error) { return c.run(ctx, e, name) }})
	}
	cases = append(cases, benchCase{mixedName, func(ctx context.Context, name string) (benchRow, error) {
		return e.mixedRow(ctx, name)
	}})
	for _, n := range o.subscribers {
		cases = append(cases, benchCase{fmt.Sprintf("event fan-out, %d subscribers at %d events/s", n, o.rate), func(ctx context.Context, name string) (benchRow, error) {
			return e.fanOutRow(ctx, name, n)
		}})
	}
	var rows []benchRow
	for _, c := range cases {
		if o.only != "" && !strings.Contains(c.name, o.only) {
			continue
		}
		fmt.Fprintf(progress, "bench: %s…\n", c.name)
		r, err := c.run(ctx, c.name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		if o.dropControlWrites {
			r.Note = strings.TrimPrefix(r.Note+"; control writes dropped (a measurement, not assent's figure)", "; ")
		}
		fmt.Fprintf(progress, "bench:   p50 %.3f ms (floor %.3f), %.0f/s (floor %.0f), ratio %.2f\n", r.P50ms, r.FloorP50ms, r.PerSec, r.FloorPerSec, r.Ratio)
		rows = append(rows, r)
	}
	more, err := backendRows(ctx, o, progress, dir, o.storeURL)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)
	if len(rows) == 0 {
		return nil, errors.New("no row's name contains --only's text")
	}
	compareRows(rows)
	return rows, nil
}

// setUpFlow loads the toggle program as a person and starts n instances
// of it owned by the agent, one for each client of the Flow rows.
func (e *benchEnv) setUpFlow(ctx context.Context, st store.Store, n int) error {
	personTok, _, err := auth.IssueToken(ctx, st, store.KindHuman, "bench-person", []string{"state.write"}, time.Now())
	if err != nil {
		return err
	}
	var loaded struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := e.postJSON(ctx, personTok, "/v1/flows/programs", []byte(toggleProgram), &loaded); err != nil {
		return err
	}
	e.flowInstances = make([]string, n)
	for i := range e.flowInstances {
		e.flowInstances[i] = fmt.Sprintf("bench-toggle-%d", i+1)
		start, _ := json.Marshal(map[string]string{"program": loaded.Fingerprint, "id": e.flowInstances[i], "phase": "unplugged"})
		if err := e.postJSON(ctx, e.token, "/v1/flows/instances", start, nil); err != nil {
			return err
		}
	}
	return nil
}

func (e *benchEnv) postJSON(ctx context.Context, token, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// sample is one batch of operations on one side.
type sample struct {
	lat     []time.Duration
	elapsed time.Duration
}

func (s sample) perSec() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.lat)) / s.elapsed.Seconds()
}

// batch runs op up to calls times from conc workers (op is told its
// worker's index), stopping early after limit, and records each
// operation's latency.
func batch(ctx context.Context, calls, conc int, limit time.Duration, op func(context.Context, int) error) (sample, error) {
	return batchWith(ctx, calls, conc, limit, op, nil)
}

// batchWith is batch with housekeeping: after, when not nil, runs after
// each operation, outside its latency, and the time it takes is left out
// of the batch's elapsed time. It is meant for one worker, where nothing
// else runs meanwhile.
func batchWith(ctx context.Context, calls, conc int, limit time.Duration, op func(context.Context, int) error, after func(context.Context) error) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	lat := make([]time.Duration, calls)
	var (
		next     atomic.Int64
		done     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		paused   atomic.Int64
	)
	fail := func(err error) {
		if ctx.Err() == nil {
			errOnce.Do(func() { firstErr = err; cancel() })
		}
	}
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(calls) {
					return
				}
				t0 := time.Now()
				if err := op(ctx, w); err != nil {
					fail(err)
					return
				}
				lat[i] = time.Since(t0)
				done.Add(1)
				if after != nil {
					t1 := time.Now()
					if err := after(ctx); err != nil {
						fail(err)
						return
					}
					paused.Add(int64(time.Since(t1)))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start) - time.Duration(paused.Load())
	if firstErr != nil {
		return sample{}, firstErr
	}
	if ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded && done.Load() == 0 {
		return sample{}, ctx.Err()
	}
	kept := lat[:0]
	for _, d := range lat {
		if d > 0 {
			kept = append(kept, d)
		}
	}
	if len(kept) == 0 {
		return sample{}, errors.New("no operation finished within --batch-timeout")
	}
	return sample{lat: kept, elapsed: elapsed}, nil
}

// alternate measures a (assent) and b (the floor) for rounds rounds, in the
// order A B, B A, A B, … so that neither side always runs on a warmer or
// cooler machine.
// compareRow warms up both sides once (connections, caches, the first
// allocations), then alternates them rounds times and reports the medians.
func compareRow(name string, target float64, rounds int, a, b func() (sample, error)) (benchRow, error) {
	for _, f := range []func() (sample, error){a, b} {
		if _, err := f(); err != nil {
			return benchRow{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	as, bs, err := alternate(rounds, a, b)
	if err != nil {
		return benchRow{}, err
	}
	return throughputRow(name, target, as, bs), nil
}

func alternate(rounds int, a, b func() (sample, error)) (as, bs []sample, err error) {
	for i := range rounds {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isA := range order {
			f := b
			if isA {
				f = a
			}
			s, err := f()
			if err != nil {
				side := "floor"
				if isA {
					side = "assent"
				}
				return nil, nil, fmt.Errorf("%s: %w", side, err)
			}
			if isA {
				as = append(as, s)
			} else {
				bs = append(bs, s)
			}
		}
	}
	return as, bs, nil
}

// throughputRow makes a row from alternated samples: latency percentiles
// over every operation, calls per second as the median of the rounds.
func throughputRow(name string, target float64, as, bs []sample) benchRow {
	aLat, aRate := pool(as)
	bLat, bRate := pool(bs)
	ap50, ap99 := percentiles(aLat)
	bp50, bp99 := percentiles(bLat)
	r := benchRow{Name: name, N: len(aLat), P50ms: ms(ap50), P99ms: ms(ap99), PerSec: round1(aRate),
		FloorP50ms: ms(bp50), FloorP99ms: ms(bp99), FloorPerSec: round1(bRate), Target: target}
	if bRate > 0 {
		r.Ratio = round2(aRate / bRate)
	}
	return r
}

func pool(ss []sample) ([]time.Duration, float64) {
	var lat []time.Duration
	rates := make([]float64, 0, len(ss))
	for _, s := range ss {
		lat = append(lat, s.lat...)
		rates = append(rates, s.perSec())
	}
	return lat, median(rates)
}

// mcpOp is one operation of client w made of MCP calls on session cs;
// floor is empty on assent and, on the floor, names the floor's tool to
// call in place of each of assent's.
type mcpOp func(ctx context.Context, w int, cs *mcp.ClientSession, floor string) error

// mcpCall is the operation of calling tool with args once.
func mcpCall(tool string, args map[string]any) mcpOp {
	return func(ctx context.Context, _ int, cs *mcp.ClientSession, floor string) error {
		name := tool
		if floor != "" {
			name = floor
		}
		_, err := callTool(ctx, cs, name, args)
		return err
	}
}

func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err == nil && res.IsError {
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		err = fmt.Errorf("%s returned an error: %s", name, text)
	}
	return res, err
}

// flowStep prescribes the next step of client w's instance and applies
// it: two calls, each committing one transaction.
func (e *benchEnv) flowStep(ctx context.Context, w int, cs *mcp.ClientSession, floor string) error {
	if floor != "" {
		for range 2 {
			if _, err := callTool(ctx, cs, floor, map[string]any{"instance": e.flowInstances[w]}); err != nil {
				return err
			}
		}
		return nil
	}
	res, err := callTool(ctx, cs, "flows_prescribe", map[string]any{"instance": e.flowInstances[w]})
	if err != nil {
		return err
	}
	var out struct {
		Decision struct {
			Kind         string `json:"kind"`
			Prescription *struct {
				ID string `json:"id"`
			} `json:"prescription"`
		} `json:"decision"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.Decision.Prescription == nil {
		return fmt.Errorf("flows_prescribe gave no prescription (decision %q)", out.Decision.Kind)
	}
	_, err = callTool(ctx, cs, "flows_apply", map[string]any{"prescription": out.Decision.Prescription.ID})
	return err
}

// sessions connects conc MCP client sessions to endpoint, sending token
// when there is one.
func sessions(ctx context.Context, endpoint, token string, conc int) ([]*mcp.ClientSession, func(), error) {
	var out []*mcp.ClientSession
	closeAll := func() {
		for _, cs := range out {
			cs.Close()
		}
	}
	hc := loopbackClient(token, conc)
	for range conc {
		client := mcp.NewClient(&mcp.Implementation{Name: "assent-bench", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("connect: %w", err)
		}
		out = append(out, cs)
	}
	return out, closeAll, nil
}

// loopbackClient is an HTTP client keeping up to conns idle connections,
// adding a bearer token when there is one.
func loopbackClient(token string, conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	tr.MaxIdleConns = 2 * conns
	tr.MaxConnsPerHost = 0
	if token == "" {
		return &http.Client{Transport: tr}
	}
	return &http.Client{Transport: bearerTransport{token: token, base: tr}}
}

// mcpRow measures op from conc sessions on assent and on the floor, where
// it calls floorName.
func (e *benchEnv) mcpRow(ctx context.Context, name string, conc int, target float64, floorName string, op mcpOp) (benchRow, error) {
	a, closeA, err := sessions(ctx, e.base+"/mcp", e.token, conc)
	if err != nil {
		return benchRow{}, err
	}
	defer closeA()
	b, closeB, err := sessions(ctx, e.floor.base+"/mcp", "", conc)
	if err != nil {
		return benchRow{}, err
	}
	defer closeB()
	side := func(ss []*mcp.ClientSession, floor string) func() (sample, error) {
		return func() (sample, error) {
			return batch(ctx, e.o.calls, conc, e.o.batchTimeout, func(ctx context.Context, w int) error {
				return op(ctx, w, ss[w], floor)
			})
		}
	}
	return compareRow(name, target, e.o.rounds, side(a, ""), side(b, floorName))
}

// mutateRow measures a screen press through /api/mutate against the
// floor's JSON endpoint, with the same body.
func (e *benchEnv) mutateRow(ctx context.Context, name string) (benchRow, error) {
	body := []byte(`{"tool":"` + benchScreenTool + `","params":{}}`)
	side := func(hc *http.Client, url string) func() (sample, error) {
		return func() (sample, error) {
			return batch(ctx, e.o.calls, 1, e.o.batchTimeout, func(ctx context.Context, _ int) error {
				return postOnce(ctx, hc, url, body)
			})
		}
	}
	a := side(loopbackClient(e.token, 1), e.base+"/api/mutate")
	b := side(loopbackClient("", 1), e.floor.base+"/http")
	return compareRow(name, 0, e.o.rounds, a, b)
}

func postOnce(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// fanOutSample is one fan-out round on one side.
type fanOutSample struct {
	lat      []time.Duration
	expected int64
	lagged   int64
}

// fanOutRow measures event delivery to subs subscribers on assent and on
// the floor's broadcaster, alternately.
func (e *benchEnv) fanOutRow(ctx context.Context, name string, subs int) (benchRow, error) {
	var as, bs []fanOutSample
	for i := range e.o.rounds {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isA := range order {
			var s fanOutSample
			var err error
			if isA {
				s, err = e.fanOut(ctx, subs, e.base+"/v1/events", e.token, func(data []byte) {
					e.srv.Events().Publish(event.Event{Type: "bench.tick", Data: data})
				})
				as = append(as, s)
			} else {
				s, err = e.fanOut(ctx, subs, e.floor.base+"/events", "", func(data []byte) {
					e.floor.bcast.publish("bench.tick", data)
				})
				bs = append(bs, s)
			}
			if err != nil {
				return benchRow{}, err
			}
		}
	}
	aLat, aDropped, aLagged := poolFanOut(as)
	bLat, bDropped, _ := poolFanOut(bs)
	ap50, ap99 := percentiles(aLat)
	bp50, bp99 := percentiles(bLat)
	secs := float64(e.o.rounds) * e.o.duration.Seconds()
	r := benchRow{Name: name, N: len(aLat), P50ms: ms(ap50), P99ms: ms(ap99), PerSec: float64(len(aLat)) / secs,
		FloorP50ms: ms(bp50), FloorP99ms: ms(bp99), FloorPerSec: float64(len(bLat)) / secs,
		Target: round2(targetFanOut), Dropped: aDropped,
		Note: fmt.Sprintf("latency row; %d lagged; floor dropped %d; p99 ratio %.2f", aLagged, bDropped, ratioOf(bp99, ap99))}
	r.Ratio = ratioOf(bp50, ap50)
	return r, nil
}

func ratioOf(floor, a time.Duration) float64 {
	if a <= 0 {
		return 0
	}
	return round2(float64(floor) / float64(a))
}

func poolFanOut(ss []fanOutSample) (lat []time.Duration, dropped, lagged int64) {
	for _, s := range ss {
		lat = append(lat, s.lat...)
		dropped += s.expected - int64(len(s.lat))
		lagged += s.lagged
	}
	return lat, dropped, lagged
}

// fanOut opens subs event streams at url, publishes rate events per second
// for the configured duration through publish, and records each event's
// delivery latency at each subscriber.
func (e *benchEnv) fanOut(ctx context.Context, subs int, url, token string, publish func([]byte)) (fanOutSample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hc := loopbackClient(token, subs)
	var (
		mu       sync.Mutex
		lat      []time.Duration
		received atomic.Int64
		lagged   atomic.Int64
		ready    sync.WaitGroup
		done     sync.WaitGroup
		failed   atomic.Int64
	)
	for range subs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fanOutSample{}, err
		}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			once := false
			defer func() {
				if !once {
					ready.Done()
				}
			}()
			resp, err := hc.Do(req)
			if err != nil {
				failed.Add(1)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
				return
			}
			rd := bufio.NewReaderSize(resp.Body, 4096)
			var local []time.Duration
			var typ string
			for {
				line, err := rd.ReadSlice('\n')
				if err != nil {
					break
				}
				if !once {
					once = true
					ready.Done()
				}
				switch {
				case bytes.HasPrefix(line, []byte("event: ")):
					typ = string(bytes.TrimSpace(line[7:]))
				case bytes.HasPrefix(line, []byte("data: ")):
					if typ == event.Lagged {
						var ld event.LaggedData
						if json.Unmarshal(line[6:], &ld) == nil {
							lagged.Add(ld.Missed)
						}
						continue
					}
					var body struct {
						T int64 `json:"t"`
					}
					if json.Unmarshal(line[6:], &body) == nil && body.T > 0 {
						local = append(local, time.Since(time.Unix(0, body.T)))
						received.Add(1)
					}
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	ready.Wait()
	if n := failed.Load(); n > 0 {
		cancel()
		done.Wait()
		return fanOutSample{}, fmt.Errorf("%d of %d subscribers could not connect to %s", n, subs, url)
	}
	total := int(e.o.duration.Seconds() * float64(e.o.rate))
	tick := time.NewTicker(time.Second / time.Duration(e.o.rate))
	for range total {
		<-tick.C
		publish(fmt.Appendf(nil, `{"t":%d}`, time.Now().UnixNano()))
	}
	tick.Stop()
	// Let the last events arrive (at most 5 s), then hang up.
	want := int64(total * subs)
	deadline := time.Now().Add(5 * time.Second)
	for received.Load() < want-lagged.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	done.Wait()
	return fanOutSample{lat: lat, expected: want, lagged: lagged.Load()}, nil
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

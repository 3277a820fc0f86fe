package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
)

// benchRow is one measured figure.
type benchRow struct {
	Name    string  `json:"name"`
	N       int     `json:"n"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	PerSec  float64 `json:"per_second,omitempty"`
	Dropped int64   `json:"dropped"`
	Note    string  `json:"note,omitempty"`
}

type benchOpts struct {
	calls       int
	subscribers int
	rate        int
	duration    time.Duration
	asJSON      bool
}

func newBenchCmd(c *cli) *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure whole-system figures on loopback",
		Long: `Start a server on a temporary data directory and a loopback port, and measure:

  - MCP tools/call runtime_status latency (p50/p99) with 1 and 16 concurrent
    clients over streamable HTTP;
  - event fan-out: SUBSCRIBERS clients on GET /v1/events while events are
    published at RATE per second, with delivery latency (p50/p99) and the
    number of events dropped.

Figures depend on the machine; compare them as ratios within one run.`,
		Example: `  assent bench
  assent bench --calls 5000 --subscribers 1000 --rate 50 --duration 10s --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			rows, err := runBench(cmd.Context(), o, c.err)
			if err != nil {
				return refused("bench: %v", err)
			}
			if o.asJSON {
				return printJSON(c.out, map[string]any{"results": rows})
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BENCHMARK\tN\tP50 ms\tP99 ms\tPER SECOND\tDROPPED\tNOTE")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.0f\t%d\t%s\n", r.Name, r.N, r.P50ms, r.P99ms, r.PerSec, r.Dropped, r.Note)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.calls, "calls", 2000, "MCP calls per concurrency level")
	f.IntVar(&o.subscribers, "subscribers", 1000, "event-stream subscribers")
	f.IntVar(&o.rate, "rate", 50, "events published per second")
	f.DurationVar(&o.duration, "duration", 5*time.Second, "how long events are published")
	f.BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

// benchEnv is a server started for benchmarking.
type benchEnv struct {
	base  string
	token string
	srv   *server.Server
}

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
	boot, err := server.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		return nil, err
	}
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db, RateLimit: -1, Demo: true})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() { stop(); <-served }()
	env := &benchEnv{base: "http://" + ln.Addr().String(), token: boot.AgentToken, srv: srv}

	var rows []benchRow
	for _, conc := range []int{1, 16} {
		fmt.Fprintf(progress, "bench: %d MCP calls with %d client(s)…\n", o.calls, conc)
		r, err := benchMCP(ctx, env, "runtime_status", map[string]any{}, o.calls, conc)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(progress, "bench: %d controls_execute stage calls…\n", o.calls)
	stage := map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "pro"}
	r, err := benchMCP(ctx, env, "controls_execute", stage, o.calls, 1)
	if err != nil {
		return nil, err
	}
	rows = append(rows, r)
	fmt.Fprintf(progress, "bench: %d subscribers at %d events/s for %s…\n", o.subscribers, o.rate, o.duration)
	r, err = benchFanOut(ctx, env, o.subscribers, o.rate, o.duration)
	if err != nil {
		return nil, err
	}
	return append(rows, r), nil
}

func (e *benchEnv) httpClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = 0
	return &http.Client{Transport: bearerTransport{token: e.token, base: tr}}
}

// benchMCP calls tool calls times in total from conc concurrent sessions.
func benchMCP(ctx context.Context, e *benchEnv, tool string, args map[string]any, calls, conc int) (benchRow, error) {
	sessions := make([]*mcp.ClientSession, conc)
	for i := range sessions {
		client := mcp.NewClient(&mcp.Implementation{Name: "assent-bench", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.base + "/mcp", HTTPClient: e.httpClient(4)}, nil)
		if err != nil {
			return benchRow{}, fmt.Errorf("connect: %w", err)
		}
		defer cs.Close()
		sessions[i] = cs
	}
	// Warm up every session.
	for _, cs := range sessions {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
			return benchRow{}, err
		}
	}
	lat := make([]time.Duration, calls)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(calls) {
					return
				}
				t0 := time.Now()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				lat[i] = time.Since(t0)
				if err == nil && res.IsError {
					err = fmt.Errorf("%s returned an error", tool)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return benchRow{}, firstErr
	}
	p50, p99 := percentiles(lat)
	return benchRow{
		Name: fmt.Sprintf("mcp tools/call %s, %d client(s)", tool, conc), N: calls,
		P50ms: ms(p50), P99ms: ms(p99), PerSec: float64(calls) / elapsed.Seconds(),
	}, nil
}

// benchFanOut measures delivery latency of published events to subscribers
// reading GET /v1/events over loopback.
func benchFanOut(ctx context.Context, e *benchEnv, subs, rate int, d time.Duration) (benchRow, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hc := e.httpClient(subs)
	hc.Timeout = 0
	var (
		mu       sync.Mutex
		lat      []time.Duration
		received atomic.Int64
		lagged   atomic.Int64
		ready    sync.WaitGroup
		done     sync.WaitGroup
	)
	startSeq := e.srv.Bus().Seq()
	for i := 0; i < subs; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/v1/events", nil)
		req.Header.Set("Last-Event-ID", fmt.Sprint(startSeq))
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			resp, err := hc.Do(req)
			if err != nil {
				ready.Done()
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReaderSize(resp.Body, 4096)
			once := false
			var local []time.Duration
			var typ string
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					break
				}
				if !once {
					once = true
					ready.Done()
				}
				switch {
				case strings.HasPrefix(line, "event: "):
					typ = strings.TrimSpace(line[7:])
				case strings.HasPrefix(line, "data: "):
					if typ == event.Lagged {
						var ld event.LaggedData
						json.Unmarshal([]byte(line[6:]), &ld)
						lagged.Add(ld.Missed)
						continue
					}
					var body struct {
						T int64 `json:"t"`
					}
					if json.Unmarshal([]byte(line[6:]), &body) == nil && body.T > 0 {
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
	total := int(d.Seconds() * float64(rate))
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := 0; i < total; i++ {
		<-tick.C
		e.srv.Bus().Publish(event.Event{Type: "bench.tick", Data: json.RawMessage(fmt.Sprintf(`{"t":%d}`, time.Now().UnixNano()))})
	}
	tick.Stop()
	// Let the last events arrive, then hang up.
	deadline := time.Now().Add(5 * time.Second)
	for received.Load() < int64(total*subs)-lagged.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	done.Wait()
	p50, p99 := percentiles(lat)
	dropped := int64(total*subs) - received.Load()
	return benchRow{
		Name: fmt.Sprintf("event fan-out, %d subscribers at %d events/s", subs, rate), N: len(lat),
		P50ms: ms(p50), P99ms: ms(p99), PerSec: float64(rate * subs), Dropped: dropped,
		Note: fmt.Sprintf("%d lagged", lagged.Load()),
	}, nil
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

func TestAlternate(t *testing.T) {
	tests := []struct {
		rounds int
		want   string
	}{
		{1, "AB"},
		{2, "ABBA"},
		{3, "ABBAAB"},
	}
	for _, tc := range tests {
		var order strings.Builder
		side := func(name string) func() (sample, error) {
			return func() (sample, error) {
				order.WriteString(name)
				return sample{lat: []time.Duration{time.Millisecond}, elapsed: time.Millisecond}, nil
			}
		}
		as, bs, err := alternate(tc.rounds, side("A"), side("B"))
		if err != nil {
			t.Fatal(err)
		}
		if order.String() != tc.want || len(as) != tc.rounds || len(bs) != tc.rounds {
			t.Errorf("rounds %d: order %q with %d and %d samples, want %q", tc.rounds, order.String(), len(as), len(bs), tc.want)
		}
	}
}

func TestThroughputRowRatio(t *testing.T) {
	ms := time.Millisecond
	// assent: rounds at 100/s, 200/s, 300/s (median 200); floor: 400/s.
	as := []sample{
		{lat: []time.Duration{ms}, elapsed: 10 * ms},
		{lat: []time.Duration{ms, ms}, elapsed: 10 * ms},
		{lat: []time.Duration{ms, ms, ms}, elapsed: 10 * ms},
	}
	bs := []sample{{lat: []time.Duration{ms, ms, ms, ms}, elapsed: 10 * ms}}
	r := throughputRow("x", 0.8, as, bs)
	if r.PerSec != 200 || r.FloorPerSec != 400 || r.Ratio != 0.5 || r.N != 6 || r.Target != 0.8 {
		t.Fatalf("row %+v, want per_s 200, floor_per_s 400, ratio 0.5, n 6", r)
	}
}

func TestMedianAndPercentiles(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range tests {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	orig := slices.Clone(d)
	p50, p99 := percentiles(d)
	if p50 != 51*time.Millisecond || p99 != 100*time.Millisecond {
		t.Errorf("percentiles of 1..100 ms = %v, %v; want 51ms, 100ms", p50, p99)
	}
	if !slices.Equal(d, orig) {
		t.Error("percentiles reordered its input")
	}
}

func TestFloorServer(t *testing.T) {
	f, err := startFloor(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	ctx := context.Background()

	// The MCP floor answers its tool for the stateless and the session
	// revisions alike.
	for _, version := range []string{"", "2025-11-25"} {
		var opts *mcp.ClientSessionOptions
		if version != "" {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.base + "/mcp"}, opts)
		if err != nil {
			t.Fatalf("version %q: %v", version, err)
		}
		if _, err := callTool(ctx, cs, floorTool, map[string]any{"any": "thing"}); err != nil {
			t.Errorf("version %q: %v", version, err)
		}
		cs.Close()
	}

	// The broadcaster speaks the event stream's wire format.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); line != ": ok\n" {
		t.Fatalf("first line %q", line)
	}
	rd.ReadString('\n')
	f.bcast.publish("bench.tick", []byte(`{"t":1}`))
	var got strings.Builder
	for range 4 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(line)
	}
	if want := "id: 1\nevent: bench.tick\ndata: {\"t\":1}\n\n"; got.String() != want {
		t.Fatalf("event %q, want %q", got.String(), want)
	}
}

// TestDurableFloor checks that the floor's durable tool and endpoint
// commit one transaction on the floor's store before they answer, and
// that a floor without a store has neither.
func TestDurableFloor(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "floor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := startFloor(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	records := func() int {
		t.Helper()
		recs, err := db.ListAudit(ctx, store.AuditFilter{PrincipalID: "bench-floor"})
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := callTool(ctx, cs, floorTool, nil); err != nil || records() != 0 {
		t.Fatalf("the trivial tool: err %v, %d records; want none", err, records())
	}
	if _, err := callTool(ctx, cs, floorCommitTool, nil); err != nil || records() != 1 {
		t.Fatalf("the durable tool: err %v, %d records; want 1", err, records())
	}
	hc := loopbackClient("", 1)
	if err := postOnce(ctx, hc, f.base+"/http/commit", []byte(`{}`)); err != nil || records() != 2 {
		t.Fatalf("the durable endpoint: err %v, %d records; want 2", err, records())
	}
	if err := postOnce(ctx, hc, f.base+"/http", []byte(`{}`)); err != nil || records() != 2 {
		t.Fatalf("the plain endpoint: err %v, %d records; want 2", err, records())
	}

	// A store that refuses makes the durable endpoint answer 503.
	db.Close()
	if err := postOnce(ctx, hc, f.base+"/http/commit", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("with the store closed: err %v, want a 503", err)
	}

	bare, err := startFloor(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.close()
	if err := postOnce(ctx, hc, bare.base+"/http/commit", []byte(`{}`)); err == nil {
		t.Fatal("a floor without a store answered /http/commit")
	}
}

func TestBatchWithAfter(t *testing.T) {
	ctx := context.Background()
	var ops, afters int
	s, err := batchWith(ctx, 5, 1, time.Minute, func(context.Context, int) error {
		ops++
		return nil
	}, func(context.Context) error {
		if afters >= ops {
			t.Errorf("after ran %d times before operation %d", afters+1, ops)
		}
		afters++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ops != 5 || afters != 5 || len(s.lat) != 5 {
		t.Fatalf("%d operations, %d afters, %d latencies; want 5 each", ops, afters, len(s.lat))
	}

	// An error from after ends the batch with it.
	boom := errors.New("settling failed")
	n := 0
	_, err = batchWith(ctx, 5, 1, time.Minute, func(context.Context, int) error { n++; return nil },
		func(context.Context) error { return boom })
	if !errors.Is(err, boom) || n != 1 {
		t.Fatalf("err %v after %d operations, want %v after 1", err, n, boom)
	}
}

func TestAdmitOnce(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		wantID string
		errHas string
	}{
		{"delivered", http.StatusOK, `{"action":"tick","control_id":"c-1","delivery":"delivered"}`, "c-1", ""},
		{"refused", http.StatusTooManyRequests, `{"error":{"code":"control_backpressure"}}`, "", "control_backpressure"},
		{"no id", http.StatusOK, `{"action":"tick"}`, "", "no control_id"},
		{"not JSON", http.StatusOK, `ok`, "", "no control_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			id, err := admitOnce(context.Background(), srv.Client(), srv.URL, []byte(`{"action":"tick"}`))
			if string(got) != `{"action":"tick"}` {
				t.Errorf("server got body %q", got)
			}
			if tc.errHas == "" {
				if err != nil || id != tc.wantID {
					t.Fatalf("id %q, err %v; want %q", id, err, tc.wantID)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err %v, want one containing %q", err, tc.errHas)
			}
		})
	}
}

// TestRunBenchRows runs every row once, briefly: each is measured on both
// sides and yields a ratio, and the rows with a target carry it.
func TestRunBenchRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, a Run and event streams")
	}
	o := benchOpts{calls: 5, rounds: 1, subscribers: []int{2}, rate: 20, duration: 200 * time.Millisecond, batchTimeout: time.Minute}
	rows, err := runBench(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		prefix string
		target float64
	}{
		{"mcp runtime_status, 1 client(s)", targetStatus},
		{"mcp runtime_status, 16 client(s)", targetStatus},
		{"mcp runtime_status, 64 client(s)", targetStatus},
		{"screen press POST /api/mutate", 0},
		{"mcp controls_execute stage, 1 client(s)", targetDurable},
		{"mcp controls_execute stage, 16 client(s)", targetDurable},
		{"mcp controls_execute stage, 64 client(s)", targetDurable},
		{"mcp flows_prescribe+flows_apply, 1 client(s)", targetDurable},
		{"mcp flows_prescribe+flows_apply, 16 client(s)", targetDurable},
		{"mcp flows_prescribe+flows_apply, 64 client(s)", targetDurable},
		{"control admission POST /v1/runs/{id}/controls, 1 client(s)", targetDurable},
		{"control admission POST /v1/runs/{id}/controls, 16 client(s)", targetDurable},
		{"control admission POST /v1/runs/{id}/controls, 64 client(s)", targetDurable},
		{"mcp mixed stage+runtime_status+controls_inspect, 100 clients", 0},
		{"event fan-out, 2 subscribers", round2(targetFanOut)},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if !strings.HasPrefix(r.Name, w.prefix) {
			t.Errorf("row %d is %q, want %q…", i, r.Name, w.prefix)
		}
		if r.Ratio <= 0 || r.PerSec <= 0 || r.FloorPerSec <= 0 || r.N == 0 {
			t.Errorf("%s: ratio %v, per_s %v, floor_per_s %v, n %d; want all positive", r.Name, r.Ratio, r.PerSec, r.FloorPerSec, r.N)
		}
		if r.Target != w.target {
			t.Errorf("%s: target %v, want %v", r.Name, r.Target, w.target)
		}
	}
}

// TestDropControlWrites checks that the rows measured with
// --drop-control-writes say so (internal/unsaved checks that nothing is
// saved).
func TestDropControlWrites(t *testing.T) {
	ctx := context.Background()
	if testing.Short() {
		t.Skip("starts a server")
	}
	o := benchOpts{calls: 5, rounds: 1, batchTimeout: time.Minute, only: "controls_execute", dropControlWrites: true}
	rows, err := runBench(ctx, o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("rows %+v; want the three controls_execute rows", rows)
	}
	for _, r := range rows {
		if !strings.Contains(r.Note, "control writes dropped") {
			t.Errorf("row %+v; want it noted as measured with control writes dropped", r)
		}
	}
}

// TestCompareRows: each PostgreSQL row is compared with its SQLite row of
// the same run, the two-node row with the one-node row, each with its
// target; rows without a counterpart or without calls per second are not.
func TestCompareRows(t *testing.T) {
	mixed := mixedName
	rows := []benchRow{
		{Name: "mcp controls_execute stage, 1 client(s)", PerSec: 200},
		{Name: "store trace append, 1 appender, sqlite", PerSec: 1000},
		{Name: "store trace append, 1 appender, postgres", PerSec: 700},
		{Name: mixed, PerSec: 400},
		{Name: "mcp controls_execute stage, 1 client(s), postgres", PerSec: 100},
		{Name: "mcp flows_prescribe+flows_apply, 1 client(s), postgres", PerSec: 50},
		{Name: "control admission POST /v1/runs/{id}/controls, 1 client(s)", PerSec: 300},
		{Name: "control admission POST /v1/runs/{id}/controls, 1 client(s), postgres", Note: "failed: boom"},
		{Name: "event fan-out across nodes, 100 subscribers at 50 events/s, postgres", PerSec: 5000, TargetP99ms: 50},
		{Name: mixed + ", postgres", PerSec: 300},
		{Name: mixed + ", postgres" + twoNodesSuffix, PerSec: 450},
	}
	compareRows(rows)
	want := map[string]*benchAgainst{
		"store trace append, 1 appender, postgres":          {Row: "store trace append, 1 appender, sqlite", Ratio: 0.7, Target: 0.7},
		"mcp controls_execute stage, 1 client(s), postgres": {Row: "mcp controls_execute stage, 1 client(s)", Ratio: 0.5, Target: 0.7},
		mixed + ", postgres":                                {Row: mixed, Ratio: 0.75, Target: 0.7},
		mixed + ", postgres" + twoNodesSuffix:               {Row: mixed + ", postgres", Ratio: 1.5, Target: 1.4},
	}
	for _, r := range rows {
		w := want[r.Name]
		switch {
		case w == nil && r.Against != nil:
			t.Errorf("%s: against %+v, want none", r.Name, *r.Against)
		case w != nil && (r.Against == nil || *r.Against != *w):
			t.Errorf("%s: against %+v, want %+v", r.Name, r.Against, *w)
		}
	}
	if got := againstText(rows[len(rows)-1].Against); got != "1.50 of 1 node (target 1.40)" {
		t.Errorf("againstText = %q", got)
	}
	if got := againstText(rows[2].Against); got != "0.70 of sqlite (target 0.70)" {
		t.Errorf("againstText = %q", got)
	}
}

package main

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	f, err := startFloor()
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

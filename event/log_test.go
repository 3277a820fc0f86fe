package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// quiet discards what a bus logs.
var quiet = slog.New(slog.DiscardHandler)

// openOn opens a bus on l, closed when t ends.
func openOn(t *testing.T, l Log, opts Options) *Bus {
	t.Helper()
	b, err := Open(t.Context(), l, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// take reads n events from s, failing t when they do not come (the
// deadline only bounds a broken test).
func take(t *testing.T, s *Subscription, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []Event
	for len(out) < n {
		var err error
		if out, err = s.NextBatch(ctx, out); err != nil {
			t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
	}
	return out
}

func TestOpenTwoBusesOneOrder(t *testing.T) {
	l := NewMemoryLog(0)
	a, b := openOn(t, l, Options{}), openOn(t, l, Options{})
	sa, sb := a.Subscribe(0, 1024, nil), b.Subscribe(0, 1024, nil)
	const each = 200
	var wg sync.WaitGroup
	for name, bus := range map[string]*Bus{"a": a, "b": b} {
		wg.Go(func() {
			for i := range each {
				bus.Publish(Event{Type: name, Data: json.RawMessage(fmt.Sprint(i))})
			}
		})
	}
	wg.Wait()
	ga, gb := take(t, sa, 2*each), take(t, sb, 2*each)
	for i := range ga {
		if ga[i].Seq != int64(i+1) {
			t.Fatalf("event %d on a has seq %d, want %d", i, ga[i].Seq, i+1)
		}
		if ga[i].Seq != gb[i].Seq || ga[i].Type != gb[i].Type || string(ga[i].Data) != string(gb[i].Data) {
			t.Fatalf("event %d differs: a has %+v, b has %+v", i, ga[i], gb[i])
		}
	}
	// Each node's events keep the order it published them in.
	next := map[string]int{}
	for _, e := range ga {
		if want := fmt.Sprint(next[e.Type]); string(e.Data) != want {
			t.Fatalf("event of %s is %s, want %s", e.Type, e.Data, want)
		}
		next[e.Type]++
	}
}

func TestOpenResumeOnAnotherBus(t *testing.T) {
	l := NewMemoryLog(0)
	a, b := openOn(t, l, Options{}), openOn(t, l, Options{})
	watch := b.Subscribe(0, 64, nil)
	for range 10 {
		a.Publish(Event{Type: "x"})
	}
	take(t, watch, 10)
	got := take(t, b.Subscribe(4, 64, nil), 6)
	if want := []int64{5, 6, 7, 8, 9, 10}; !slices.Equal(seqs(got), want) {
		t.Errorf("resumed after 4 on b: seqs %v, want %v", seqs(got), want)
	}
}

func TestOpenFillsReplayFromLog(t *testing.T) {
	l := NewMemoryLog(0)
	if _, err := l.Append(t.Context(), make([]Event, 20)); err != nil {
		t.Fatal(err)
	}
	b := openOn(t, l, Options{Replay: 8})
	if got := b.Seq(); got != 20 {
		t.Fatalf("Seq = %d, want 20", got)
	}
	tests := []struct {
		after int64
		want  []int64
		lag   *LaggedData
	}{
		{after: 15, want: []int64{16, 17, 18, 19, 20}},
		{after: 12, want: []int64{13, 14, 15, 16, 17, 18, 19, 20}},
		{after: 5, want: []int64{12, 13, 14, 15, 16, 17, 18, 19, 20}, lag: &LaggedData{Missed: 7, ResumeAfter: 5}},
	}
	for _, tt := range tests {
		got := take(t, b.Subscribe(tt.after, 64, nil), len(tt.want))
		if !slices.Equal(seqs(got), tt.want) {
			t.Errorf("after %d: seqs %v, want %v", tt.after, seqs(got), tt.want)
		}
		if tt.lag != nil {
			var d LaggedData
			if got[0].Type != Lagged || json.Unmarshal(got[0].Data, &d) != nil || d != *tt.lag {
				t.Errorf("after %d: first event %s %s, want lagged %+v", tt.after, got[0].Type, got[0].Data, *tt.lag)
			}
		}
	}
}

func TestDeliverGapCountsAsMissed(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	s := b.Subscribe(0, 64, nil)
	b.deliver([]Event{{Seq: 1}, {Seq: 2}})
	b.deliver([]Event{{Seq: 2}, {Seq: 6}, {Seq: 7}})
	got := take(t, s, 5)
	if want := []int64{1, 2, 5, 6, 7}; !slices.Equal(seqs(got), want) {
		t.Fatalf("seqs %v, want %v", seqs(got), want)
	}
	var d LaggedData
	if got[2].Type != Lagged || json.Unmarshal(got[2].Data, &d) != nil || d != (LaggedData{Missed: 3, ResumeAfter: 2}) {
		t.Errorf("third event %s %s, want lagged missed 3 after 2", got[2].Type, got[2].Data)
	}
	// The replay buffer holds only what follows the gap.
	again := take(t, b.Subscribe(1, 64, nil), 3)
	if want := []int64{5, 6, 7}; !slices.Equal(seqs(again), want) || again[0].Type != Lagged {
		t.Errorf("resumed after 1: %v (first %s), want %v starting lagged", seqs(again), again[0].Type, want)
	}
}

// flakyLog fails its first appends.
type flakyLog struct {
	*MemoryLog
	mu    sync.Mutex
	fails int
}

func (f *flakyLog) Append(ctx context.Context, events []Event) (int64, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return 0, errors.New("connection refused")
	}
	return f.MemoryLog.Append(ctx, events)
}

func TestOpenRetriesFailedAppends(t *testing.T) {
	l := &flakyLog{MemoryLog: NewMemoryLog(0), fails: 2}
	b := openOn(t, l, Options{Logger: quiet})
	s := b.Subscribe(0, 64, nil)
	b.Publish(Event{Type: "a", Owner: "p1", Audience: []string{"h1"}})
	got := take(t, s, 1)
	if got[0].Seq != 1 || got[0].Type != "a" || got[0].Owner != "p1" || !slices.Equal(got[0].Audience, []string{"h1"}) {
		t.Errorf("got %+v, want seq 1 of type a with its audience", got[0])
	}
}

func TestCloseFlushesToLog(t *testing.T) {
	l := NewMemoryLog(0)
	b, err := Open(t.Context(), l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		b.Publish(Event{Type: "x"})
	}
	b.Close()
	tail, err := l.Tail(t.Context(), 1000)
	if err != nil || len(tail) != 100 {
		t.Fatalf("log holds %d events (%v) after Close, want 100", len(tail), err)
	}
	if e := b.Publish(Event{Type: "late"}); e.Seq != 0 {
		t.Errorf("Publish after Close returned seq %d", e.Seq)
	}
}

func TestPublishBeyondBacklogDrops(t *testing.T) {
	block := make(chan struct{})
	l := &gateLog{MemoryLog: NewMemoryLog(0), gate: block, entered: make(chan struct{})}
	b, err := Open(t.Context(), l, Options{Backlog: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b.Publish(Event{Type: "first"})
	<-l.entered // the first batch is being appended; the queue is empty
	for range 10 {
		b.Publish(Event{Type: "x"})
	}
	close(block)
	b.Close()
	tail, _ := l.Tail(t.Context(), 100)
	if len(tail) != 5 {
		t.Errorf("log holds %d events, want 5 (the first and a backlog of 4)", len(tail))
	}
}

// gateLog holds its first append until gate is closed.
type gateLog struct {
	*MemoryLog
	gate    chan struct{}
	once    sync.Once
	entered chan struct{}
}

func (g *gateLog) Append(ctx context.Context, events []Event) (int64, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.MemoryLog.Append(ctx, events)
}

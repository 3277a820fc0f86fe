package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func seqs(es []Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func TestTryBatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		queue     int
		publish   int
		wantSeqs  []int64
		wantLag   *LaggedData // the last event, when set
		wantClose bool
	}{
		{name: "nothing ready", queue: 4, publish: 0, wantSeqs: []int64{}},
		{name: "all ready", queue: 4, publish: 3, wantSeqs: []int64{1, 2, 3}},
		{name: "full queue", queue: 4, publish: 4, wantSeqs: []int64{1, 2, 3, 4}},
		{name: "gap", queue: 2, publish: 5, wantSeqs: []int64{1, 2, 5}, wantLag: &LaggedData{Missed: 3, ResumeAfter: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(Options{})
			s := b.Subscribe(0, tc.queue, nil)
			defer s.Close()
			publishN(b, tc.publish, "")
			got, err := s.TryBatch(nil)
			if err != nil {
				t.Fatalf("TryBatch: %v", err)
			}
			if fmt.Sprint(seqs(got)) != fmt.Sprint(tc.wantSeqs) {
				t.Fatalf("seqs = %v, want %v", seqs(got), tc.wantSeqs)
			}
			if tc.wantLag != nil {
				last := got[len(got)-1]
				var d LaggedData
				if last.Type != Lagged || json.Unmarshal(last.Data, &d) != nil || d != *tc.wantLag {
					t.Fatalf("last event = %s %s, want lagged %+v", last.Type, last.Data, *tc.wantLag)
				}
			}
			// Everything was taken.
			if again, err := s.TryBatch(nil); len(again) != 0 || err != nil {
				t.Fatalf("second TryBatch = %v, %v; want nothing", seqs(again), err)
			}
		})
	}
}

func TestTryBatchAppends(t *testing.T) {
	b := New(Options{})
	s := b.Subscribe(0, 0, nil)
	defer s.Close()
	publishN(b, 2, "")
	dst := []Event{{Seq: 99}}
	got, err := s.TryBatch(dst)
	if err != nil || fmt.Sprint(seqs(got)) != "[99 1 2]" {
		t.Fatalf("TryBatch = %v, %v", seqs(got), err)
	}
}

func TestTryBatchAfterClose(t *testing.T) {
	b := New(Options{})
	s := b.Subscribe(0, 0, nil)
	publishN(b, 2, "")
	s.Close()
	got, err := s.TryBatch(nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("first TryBatch after Close = %v, %v; want the 2 queued events", seqs(got), err)
	}
	if got, err := s.TryBatch(nil); !errors.Is(err, ErrClosed) || len(got) != 0 {
		t.Fatalf("second TryBatch after Close = %v, %v; want ErrClosed", seqs(got), err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
}

func TestNextBatchWaits(t *testing.T) {
	b := New(Options{})
	s := b.Subscribe(0, 0, nil)
	defer s.Close()
	type result struct {
		es  []Event
		err error
	}
	done := make(chan result)
	go func() {
		es, err := s.NextBatch(context.Background(), nil)
		done <- result{es, err}
	}()
	b.Publish(Event{Type: "x"})
	r := <-done
	if r.err != nil || len(r.es) == 0 || r.es[0].Seq != 1 {
		t.Fatalf("NextBatch = %v, %v", seqs(r.es), r.err)
	}
}

func TestNextBatchContext(t *testing.T) {
	b := New(Options{})
	s := b.Subscribe(0, 0, nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := s.NextBatch(ctx, nil); !errors.Is(err, context.Canceled) || len(got) != 0 {
		t.Fatalf("NextBatch on a cancelled context = %v, %v", seqs(got), err)
	}
	// Ready events are returned even when the context is done.
	b.Publish(Event{Type: "x"})
	if got, err := s.NextBatch(ctx, nil); err != nil || len(got) != 1 {
		t.Fatalf("NextBatch with a ready event = %v, %v", seqs(got), err)
	}
}

// TestReadyLoop reads the way an event stream does: drain with TryBatch,
// then wait on Ready, with no other help to wake up.
func TestReadyLoop(t *testing.T) {
	const n = 2000
	b := New(Options{Replay: 16})
	s := b.Subscribe(0, n, nil)
	got := make(chan []Event)
	go func() {
		var all, batch []Event
		for {
			var err error
			batch, err = s.TryBatch(batch[:0])
			all = append(all, batch...)
			if err != nil || len(all) >= n {
				got <- all
				return
			}
			if len(batch) == 0 {
				<-s.Ready()
			}
		}
	}()
	for i := 0; i < n; i++ {
		b.Publish(Event{Type: "t"})
	}
	all := <-got
	s.Close()
	if len(all) != n {
		t.Fatalf("read %d events, want %d", len(all), n)
	}
	for i, e := range all {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

// TestQueueWraps checks order across the queue's wrap-around and growth.
func TestQueueWraps(t *testing.T) {
	b := New(Options{})
	s := b.Subscribe(0, 64, nil)
	defer s.Close()
	var next int64 = 1
	for round, n := range []int{5, 7, 3, 20, 64, 1, 40} {
		publishN(b, n, "")
		// Take all but one, so that the head moves around the ring.
		for i := 0; i < n-1; i++ {
			e, err := s.Next(context.Background())
			if err != nil || e.Seq != next {
				t.Fatalf("round %d: got seq %d (%v), want %d", round, e.Seq, err, next)
			}
			next++
		}
		got, err := s.TryBatch(nil)
		if err != nil || len(got) != 1 || got[0].Seq != next {
			t.Fatalf("round %d: TryBatch = %v, %v; want [%d]", round, seqs(got), err, next)
		}
		next++
	}
}

func TestConcurrentReaders(t *testing.T) {
	const n = 3000
	b := New(Options{})
	s := b.Subscribe(0, n, nil)
	var mu sync.Mutex
	seen := make(map[int64]bool, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, err := s.Next(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				seen[e.Seq] = true
				done := len(seen) == n
				mu.Unlock()
				if done {
					cancel()
				}
			}
		}()
	}
	publishN(b, n, "")
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("readers saw %d events, want %d", len(seen), n)
	}
}

func TestCloseRemovesOnlyItself(t *testing.T) {
	b := New(Options{})
	subs := make([]*Subscription, 5)
	for i := range subs {
		subs[i] = b.Subscribe(0, 0, nil)
	}
	subs[1].Close()
	subs[4].Close()
	subs[1].Close() // twice is harmless
	b.Publish(Event{Type: "x"})
	for i, s := range subs {
		got, err := s.TryBatch(nil)
		closed := i == 1 || i == 4
		switch {
		case closed && !errors.Is(err, ErrClosed):
			t.Errorf("closed subscription %d: %v, %v", i, seqs(got), err)
		case !closed && (err != nil || len(got) != 1):
			t.Errorf("open subscription %d: %v, %v; want the event", i, seqs(got), err)
		}
	}
	b.Close()
	for i, s := range subs {
		if _, err := s.TryBatch(nil); !errors.Is(err, ErrClosed) {
			t.Errorf("subscription %d after the bus closed: %v", i, err)
		}
	}
}

func TestSubscribeToClosedBus(t *testing.T) {
	b := New(Options{})
	b.Close()
	s := b.Subscribe(0, 0, nil)
	if _, err := s.TryBatch(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryBatch = %v, want ErrClosed", err)
	}
	s.Close()
	if e := b.Publish(Event{Type: "x"}); e.Seq != 0 {
		t.Fatalf("Publish on a closed bus gave seq %d", e.Seq)
	}
}

func TestPublishAllocations(t *testing.T) {
	b := New(Options{Replay: 64})
	subs := make([]*Subscription, 100)
	for i := range subs {
		subs[i] = b.Subscribe(0, 1024, func(e Event) bool { return e.VisibleTo("a", false) })
	}
	e := Event{Type: "t", Data: json.RawMessage(`{}`)}
	// Warm the queues up to their working size, then drain them.
	for range 16 {
		b.Publish(e)
	}
	var buf []Event
	drainAll := func() {
		for _, s := range subs {
			buf, _ = s.TryBatch(buf[:0])
		}
	}
	drainAll()
	allocs := testing.AllocsPerRun(100, func() {
		b.Publish(e)
		drainAll()
	})
	// One allocation stores the event; fanning it out to 100 subscribers
	// and taking it from them allocates nothing more.
	if allocs > 1 {
		t.Fatalf("%v allocations per event for 100 subscribers, want at most 1", allocs)
	}
}

// BenchmarkFanOut publishes to subscribers that read in batches, as the
// event stream does, and reports the cost per event and per delivery.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			bus := New(Options{})
			var wg sync.WaitGroup
			for range n {
				s := bus.Subscribe(0, 1024, func(e Event) bool { return e.VisibleTo("a", false) })
				wg.Add(1)
				go func() {
					defer wg.Done()
					var batch []Event
					for {
						var err error
						if batch, err = s.TryBatch(batch[:0]); err != nil {
							return
						}
						if len(batch) == 0 {
							<-s.Ready()
						}
					}
				}()
			}
			e := Event{Type: "t", Data: json.RawMessage(`{"x":1}`)}
			b.ReportAllocs()
			for b.Loop() {
				bus.Publish(e)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
			bus.Close()
			wg.Wait()
		})
	}
}

package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// openBus opens a bus on db's event log, closed when tb ends.
func openBus(tb testing.TB, db *postgres.DB) *event.Bus {
	tb.Helper()
	b, err := event.Open(context.Background(), db.Cluster().EventLog(), event.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	return b
}

// collect reads n events from s; the deadline only bounds a broken test.
func collect(t *testing.T, s *event.Subscription, n int) []event.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []event.Event
	for len(out) < n {
		var err error
		if out, err = s.NextBatch(ctx, out); err != nil {
			t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
	}
	return out
}

// TestTwoNodes runs two nodes on one database, each with its own pool
// and bus: 76 admitters spread over both race for one empty journal, each
// publishing its outcome on its node's bus. Exactly 64 are admitted, and
// both buses deliver all 76 events in one global order, numbered one
// after another; a subscriber resumes by number on either node.
func TestTwoNodes(t *testing.T) {
	dbs := nodes(t, 2)
	buses := []*event.Bus{openBus(t, dbs[0]), openBus(t, dbs[1])}
	subs := []*event.Subscription{buses[0].Subscribe(0, 256, nil), buses[1].Subscribe(0, 256, nil)}
	run := store.RunRecord{ID: "r", OwnerID: "p", InstanceID: "r-1", Generation: 1, CreatedAt: time.Now(), StartedAt: time.Now()}
	if err := dbs[0].Runs().ClaimRun(t.Context(), run, ""); err != nil {
		t.Fatal(err)
	}
	const admitters = store.ControlPendingLimit + 12
	var admitted, refused atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range admitters {
		wg.Go(func() {
			<-start
			node := i % 2
			q := time.Now()
			_, err := dbs[node].Runs().AdmitControl(t.Context(), run.ID,
				store.Control{ID: fmt.Sprint("c", i), InstanceID: run.InstanceID, Action: "pause", QueuedAt: &q})
			outcome := "admitted"
			var ce *store.ControlError
			switch {
			case err == nil:
				admitted.Add(1)
			case errors.As(err, &ce) && ce.Reason == "control_backpressure":
				refused.Add(1)
				outcome = "refused"
			default:
				t.Errorf("admission %d: %v", i, err)
			}
			data, _ := json.Marshal(map[string]any{"node": node, "control": i})
			buses[node].Publish(event.Event{Type: "control." + outcome, Owner: "p", Audience: []string{"h"}, Data: data})
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != store.ControlPendingLimit || refused.Load() != admitters-store.ControlPendingLimit {
		t.Errorf("%d admitted and %d refused; want %d and %d", admitted.Load(), refused.Load(), store.ControlPendingLimit, admitters-store.ControlPendingLimit)
	}
	got := [][]event.Event{collect(t, subs[0], admitters), collect(t, subs[1], admitters)}
	counts := map[string]int{}
	for i := range admitters {
		a, b := got[0][i], got[1][i]
		if a.Seq != int64(i+1) || b.Seq != a.Seq || a.Type != b.Type || string(a.Data) != string(b.Data) {
			t.Fatalf("event %d: node 0 has %d %s %s, node 1 has %d %s %s; want the same, numbered %d",
				i, a.Seq, a.Type, a.Data, b.Seq, b.Type, b.Data, i+1)
		}
		if a.Owner != "p" || !slices.Equal(b.Audience, []string{"h"}) {
			t.Errorf("event %d lost its audience: %+v", a.Seq, b)
		}
		counts[a.Type]++
	}
	if counts["control.admitted"] != store.ControlPendingLimit || counts["control.refused"] != admitters-store.ControlPendingLimit {
		t.Errorf("events by type %v", counts)
	}
	// A client that saw up to 70 on node 0 resumes on node 1.
	rest := collect(t, buses[1].Subscribe(70, 64, nil), admitters-70)
	if rest[0].Seq != 71 || rest[len(rest)-1].Seq != admitters || rest[0].Type == event.Lagged {
		t.Errorf("resumed on node 1 after 70: %d events from %d (%s)", len(rest), rest[0].Seq, rest[0].Type)
	}
	// A node opened later starts with the log's newest events.
	late := openBus(t, dbs[1])
	if late.Seq() != admitters {
		t.Errorf("a bus opened later starts at %d, want %d", late.Seq(), admitters)
	}
}

// TestLeaseAcrossNodes races the acquisition of one Run's lease from
// three pools: exactly one node wins.
func TestLeaseAcrossNodes(t *testing.T) {
	dbs := nodes(t, 3)
	const racers = 12
	errs := make([]error, racers)
	start := make(chan struct{})
	now := time.Now()
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			_, errs[i] = dbs[i%len(dbs)].Cluster().AcquireLease(t.Context(), "r", fmt.Sprint("node-", i), now, 10*time.Second)
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("racer %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d nodes acquired the lease; exactly one may", won)
	}
}

// TestEventLogTrims checks that the log keeps its newest EventLogKeep
// events and that a bus opened on it then starts from them.
func TestEventLogTrims(t *testing.T) {
	db := nodes(t, 1)[0]
	l := db.Cluster().EventLog()
	batch := make([]event.Event, 1000)
	for i := range batch {
		batch[i] = event.Event{Type: "t", Time: time.Now()}
	}
	total := int64(0)
	for total < postgres.EventLogKeep+1500 {
		last, err := l.Append(t.Context(), batch)
		if err != nil {
			t.Fatal(err)
		}
		total = last
	}
	var n, oldest int64
	if err := db.Pool().QueryRow(t.Context(), `SELECT count(*), min(seq) FROM cluster_events`).Scan(&n, &oldest); err != nil {
		t.Fatal(err)
	}
	if n != postgres.EventLogKeep || oldest != total-postgres.EventLogKeep+1 {
		t.Errorf("log holds %d events from %d; want %d from %d", n, oldest, postgres.EventLogKeep, total-postgres.EventLogKeep+1)
	}
	b := openBus(t, db)
	s := b.Subscribe(1, 16, nil)
	first := collect(t, s, 1)[0]
	var d event.LaggedData
	if first.Type != event.Lagged || json.Unmarshal(first.Data, &d) != nil || d.ResumeAfter != 1 {
		t.Errorf("resuming before the log's oldest event: %s %s, want lagged", first.Type, first.Data)
	}
}

// BenchmarkCrossNodeEvent measures the latency of an event published on
// one node's bus until each of 100 subscribers on another node's bus has
// it, one event at a time; it reports the 50th and 99th percentiles over
// every delivery.
func BenchmarkCrossNodeEvent(b *testing.B) {
	u, _ := pgtest.URL(b)
	open := func() *postgres.DB {
		db, err := postgres.Open(context.Background(), u)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	pub, recv := openBus(b, open()), openBus(b, open())
	const subscribers = 100
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan struct{}, subscribers)
	for range subscribers {
		s := recv.Subscribe(recv.Seq(), 1024, nil)
		wg.Go(func() {
			defer s.Close()
			var buf []event.Event
			for {
				var err error
				if buf, err = s.NextBatch(ctx, buf[:0]); err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				for _, e := range buf {
					lat = append(lat, now.Sub(e.Time))
				}
				mu.Unlock()
				for range buf {
					got <- struct{}{}
				}
			}
		})
	}
	b.ResetTimer()
	for b.Loop() {
		pub.Publish(event.Event{Type: "bench"})
		for range subscribers {
			<-got
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

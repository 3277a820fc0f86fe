package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
)

// Cluster checks Run leases and the shared event log.
func Cluster(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("LeaseRace", func(t *testing.T) { testLeaseRace(t, open(t).Cluster()) })
	t.Run("LeaseHolder", func(t *testing.T) { testLeaseHolder(t, open(t).Cluster()) })
	t.Run("LeaseExpiry", func(t *testing.T) { testLeaseExpiry(t, open(t).Cluster()) })
	t.Run("LeaseTakeoverRace", func(t *testing.T) { testLeaseTakeoverRace(t, open(t).Cluster()) })
	t.Run("RenewLeases", func(t *testing.T) { testRenewLeases(t, open(t).Cluster()) })
	t.Run("LeaseInvalid", func(t *testing.T) { testLeaseInvalid(t, open(t).Cluster()) })
	t.Run("RestartRun", func(t *testing.T) { testRestartRun(t, open(t)) })
	t.Run("EventLogOrder", func(t *testing.T) { testEventLogOrder(t, open(t).Cluster().EventLog()) })
	t.Run("EventLogFields", func(t *testing.T) { testEventLogFields(t, open(t).Cluster().EventLog()) })
	t.Run("EventLogFollow", func(t *testing.T) { testEventLogFollow(t, open(t).Cluster().EventLog()) })
}

const leaseTTL = 10 * time.Second

func testLeaseRace(t *testing.T, c store.Cluster) {
	const n = 8
	errs := race(n, func(i int) error {
		_, err := c.AcquireLease(ctx(t), "r1", fmt.Sprint("node-", i), at(0), leaseTTL)
		return err
	})
	winner := exactlyOne(t, "AcquireLease by 8 nodes", errs, store.ErrConflict)
	l, err := c.Lease(ctx(t), "r1")
	if err != nil || l.Node != fmt.Sprint("node-", winner) || !l.ExpiresAt.Equal(at(leaseTTL)) || !l.AcquiredAt.Equal(at(0)) {
		t.Errorf("Lease = %+v, %v; want node-%d until %v", l, err, winner, at(leaseTTL))
	}
}

func testLeaseHolder(t *testing.T, c store.Cluster) {
	if _, err := c.AcquireLease(ctx(t), "r1", "a", at(0), leaseTTL); err != nil {
		t.Fatal(err)
	}
	// The holder acquiring again renews, keeping the acquisition time.
	l, err := c.AcquireLease(ctx(t), "r1", "a", at(time.Second), leaseTTL)
	if err != nil || !l.AcquiredAt.Equal(at(0)) || !l.ExpiresAt.Equal(at(time.Second+leaseTTL)) || l.PreviousNode != "" {
		t.Errorf("AcquireLease again by the holder = %+v, %v", l, err)
	}
	cur, err := c.AcquireLease(ctx(t), "r1", "b", at(2*time.Second), leaseTTL)
	if !errors.Is(err, store.ErrConflict) || cur.Node != "a" {
		t.Errorf("AcquireLease by another node = %+v, %v; want a's lease and ErrConflict", cur, err)
	}
	if _, err := c.RenewLease(ctx(t), "r1", "b", at(2*time.Second), leaseTTL); !errors.Is(err, store.ErrConflict) {
		t.Errorf("RenewLease by a non-holder = %v, want ErrConflict", err)
	}
	if _, err := c.RenewLease(ctx(t), "r2", "a", at(2*time.Second), leaseTTL); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RenewLease of a Run without lease = %v, want ErrNotFound", err)
	}
	l, err = c.RenewLease(ctx(t), "r1", "a", at(3*time.Second), leaseTTL)
	if err != nil || !l.ExpiresAt.Equal(at(3*time.Second+leaseTTL)) {
		t.Errorf("RenewLease by the holder = %+v, %v", l, err)
	}
	if err := c.ReleaseLease(ctx(t), "r1", "b"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("ReleaseLease by a non-holder = %v, want ErrConflict", err)
	}
	if err := c.ReleaseLease(ctx(t), "r1", "a"); err != nil {
		t.Errorf("ReleaseLease by the holder = %v", err)
	}
	if _, err := c.Lease(ctx(t), "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lease after release = %v, want ErrNotFound", err)
	}
	if err := c.ReleaseLease(ctx(t), "r1", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReleaseLease twice = %v, want ErrNotFound", err)
	}
	if _, err := c.AcquireLease(ctx(t), "r1", "b", at(4*time.Second), leaseTTL); err != nil {
		t.Errorf("AcquireLease after release = %v", err)
	}
}

func testLeaseExpiry(t *testing.T, c store.Cluster) {
	if _, err := c.AcquireLease(ctx(t), "r1", "a", at(0), leaseTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireLease(ctx(t), "r2", "a", at(5*time.Second), leaseTTL); err != nil {
		t.Fatal(err)
	}
	just := at(leaseTTL - time.Millisecond)
	if got, err := c.ExpiredLeases(ctx(t), just); err != nil || len(got) != 0 {
		t.Errorf("ExpiredLeases a millisecond before expiry = %+v, %v; want none", got, err)
	}
	if _, err := c.AcquireLease(ctx(t), "r1", "b", just, leaseTTL); !errors.Is(err, store.ErrConflict) {
		t.Errorf("AcquireLease before expiry = %v, want ErrConflict", err)
	}
	late := at(5*time.Second + leaseTTL)
	got, err := c.ExpiredLeases(ctx(t), late)
	if err != nil || len(got) != 2 || got[0].RunID != "r1" || got[1].RunID != "r2" || got[0].Node != "a" {
		t.Fatalf("ExpiredLeases at expiry = %+v, %v; want r1 then r2, held by a", got, err)
	}
	l, err := c.AcquireLease(ctx(t), "r1", "b", late, leaseTTL)
	if err != nil || l.Node != "b" || l.PreviousNode != "a" || !l.PreviousExpiresAt.Equal(at(leaseTTL)) || !l.AcquiredAt.Equal(late) {
		t.Fatalf("AcquireLease of an expired lease = %+v, %v; want b's, taken from a", l, err)
	}
	if _, err := c.RenewLease(ctx(t), "r1", "a", late, leaseTTL); !errors.Is(err, store.ErrConflict) {
		t.Errorf("RenewLease by the node whose lease was taken = %v, want ErrConflict", err)
	}
	// An expired lease nobody took stays its holder's.
	if l, err := c.RenewLease(ctx(t), "r2", "a", late, leaseTTL); err != nil || l.Node != "a" {
		t.Errorf("RenewLease of an expired lease nobody took = %+v, %v", l, err)
	}
	if got, err := c.ExpiredLeases(ctx(t), late); err != nil || len(got) != 0 {
		t.Errorf("ExpiredLeases after takeover and renewal = %+v, %v; want none", got, err)
	}
}

func testLeaseTakeoverRace(t *testing.T, c store.Cluster) {
	if _, err := c.AcquireLease(ctx(t), "r1", "dead", at(0), leaseTTL); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := race(n, func(i int) error {
		l, err := c.AcquireLease(ctx(t), "r1", fmt.Sprint("node-", i), at(time.Minute), leaseTTL)
		if err == nil && l.PreviousNode != "dead" {
			return fmt.Errorf("took over from %q, want dead", l.PreviousNode)
		}
		return err
	})
	exactlyOne(t, "AcquireLease of an expired lease by 8 nodes", errs, store.ErrConflict)
}

func testRenewLeases(t *testing.T, c store.Cluster) {
	for i, id := range []string{"r3", "r1", "r2"} {
		if _, err := c.AcquireLease(ctx(t), id, "a", at(time.Duration(i)*time.Second), leaseTTL); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AcquireLease(ctx(t), "r4", "b", at(0), leaseTTL); err != nil {
		t.Fatal(err)
	}
	now := at(time.Minute) // every lease has expired; nobody took them
	got, err := c.RenewLeases(ctx(t), "a", now, leaseTTL)
	if err != nil || len(got) != 3 {
		t.Fatalf("RenewLeases = %+v, %v; want a's 3 leases", got, err)
	}
	for i, l := range got {
		if want := fmt.Sprint("r", i+1); l.RunID != want || l.Node != "a" || !l.ExpiresAt.Equal(now.Add(leaseTTL)) {
			t.Errorf("RenewLeases[%d] = %+v; want %s held by a until %v", i, l, want, now.Add(leaseTTL))
		}
	}
	if l, err := c.Lease(ctx(t), "r4"); err != nil || !l.ExpiresAt.Equal(at(leaseTTL)) {
		t.Errorf("b's lease after a renewed = %+v, %v; want it unchanged", l, err)
	}
	if got, err := c.RenewLeases(ctx(t), "nobody", now, leaseTTL); err != nil || len(got) != 0 {
		t.Errorf("RenewLeases of a node without leases = %+v, %v", got, err)
	}
}

func testLeaseInvalid(t *testing.T, c store.Cluster) {
	tests := []struct {
		run, node string
		ttl       time.Duration
	}{
		{"", "a", leaseTTL},
		{"r1", "", leaseTTL},
		{"r1", "a", 0},
		{"r1", "a", -time.Second},
		{"r1", "a", store.LeaseMaxTTL + time.Second},
	}
	for _, tt := range tests {
		if _, err := c.AcquireLease(ctx(t), tt.run, tt.node, at(0), tt.ttl); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AcquireLease(%q, %q, %v) = %v, want ErrInvalid", tt.run, tt.node, tt.ttl, err)
		}
	}
	if _, err := c.RenewLeases(ctx(t), "", at(0), leaseTTL); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RenewLeases without node = %v, want ErrInvalid", err)
	}
}

func testEventLogOrder(t *testing.T, l event.Log) {
	const writers, appends, per = 4, 20, 3
	var mu sync.Mutex
	lasts := map[int64]bool{}
	errs := race(writers, func(w int) error {
		for i := range appends {
			batch := make([]event.Event, per)
			for j := range batch {
				batch[j] = event.Event{Type: "t", Time: at(0), Data: json.RawMessage(fmt.Sprintf(`[%d,%d]`, w, i*per+j))}
			}
			last, err := l.Append(ctx(t), batch)
			if err != nil {
				return err
			}
			mu.Lock()
			lasts[last] = true
			mu.Unlock()
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Append = %v", err)
		}
	}
	const total = writers * appends * per
	got, err := l.Tail(ctx(t), total+10)
	if err != nil || len(got) != total {
		t.Fatalf("Tail = %d events, %v; want %d", len(got), err, total)
	}
	next := make([]int, writers)
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d; the log numbers events one after another from 1", i, e.Seq)
		}
		var wk [2]int
		if err := json.Unmarshal(e.Data, &wk); err != nil {
			t.Fatalf("event %d data %s: %v", e.Seq, e.Data, err)
		}
		if wk[1] != next[wk[0]] {
			t.Fatalf("event %d is item %d of writer %d, want item %d: a writer's events keep their order", e.Seq, wk[1], wk[0], next[wk[0]])
		}
		next[wk[0]]++
	}
	// Batches are appended whole: each ends at a number Append returned
	// and holds the events of one writer.
	for last := range lasts {
		if last < per || last > total {
			t.Fatalf("Append returned %d, outside the log", last)
		}
		var first, end [2]int
		_ = json.Unmarshal(got[last-per].Data, &first)
		_ = json.Unmarshal(got[last-1].Data, &end)
		if first[0] != end[0] || end[1]-first[1] != per-1 {
			t.Fatalf("events %d to %d are not one writer's batch: a batch is appended as one step", last-per+1, last)
		}
	}
	if len(lasts) != writers*appends {
		t.Errorf("Append returned %d distinct last numbers, want %d", len(lasts), writers*appends)
	}
	tail, err := l.Tail(ctx(t), 5)
	if err != nil || len(tail) != 5 || tail[0].Seq != total-4 || tail[4].Seq != total {
		t.Errorf("Tail(5) = seqs %v, %v; want %d to %d", eventSeqs(tail), err, total-4, total)
	}
}

func eventSeqs(es []event.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func testEventLogFields(t *testing.T, l event.Log) {
	in := []event.Event{
		{Type: "everyone", Time: at(time.Second), Data: json.RawMessage(`{"a":1}`)},
		{Type: "owned", Time: at(2 * time.Second), Owner: "agent-1", Audience: []string{"person-1", "person-2"}},
		{Type: "nobody-else", Time: at(3 * time.Second), Owner: "agent-2", Audience: []string{}},
		{Type: "people", Time: at(4 * time.Second), People: true, Data: json.RawMessage(`"x"`)},
	}
	last, err := l.Append(ctx(t), in)
	if err != nil || last != 4 {
		t.Fatalf("Append = %d, %v; want 4", last, err)
	}
	got, err := l.Tail(ctx(t), 10)
	if err != nil || len(got) != len(in) {
		t.Fatalf("Tail = %d events, %v", len(got), err)
	}
	for i, e := range got {
		w := in[i]
		if e.Seq != int64(i+1) || e.Type != w.Type || !e.Time.Equal(w.Time) || e.Owner != w.Owner || e.People != w.People ||
			string(e.Data) != string(w.Data) || !slices.Equal(e.Audience, w.Audience) || (e.Audience == nil) != (w.Audience == nil) {
			t.Errorf("event %d = %+v, want %+v with seq %d", i, e, w, i+1)
		}
		// Who may see it is what the publisher decided.
		for _, who := range []struct {
			id    string
			human bool
		}{{"agent-1", false}, {"person-1", true}, {"person-9", true}, {"agent-9", false}} {
			if e.VisibleTo(who.id, who.human) != w.VisibleTo(who.id, who.human) {
				t.Errorf("event %s: VisibleTo(%s) changed through the log", w.Type, who.id)
			}
		}
	}
}

func testEventLogFollow(t *testing.T, l event.Log) {
	for i := range 5 {
		if _, err := l.Append(ctx(t), []event.Event{{Type: fmt.Sprint("e", i+1), Time: at(0)}}); err != nil {
			t.Fatal(err)
		}
	}
	fctx, cancel := context.WithCancel(ctx(t))
	got := make(chan event.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- l.Follow(fctx, 2, func(es []event.Event) {
			for _, e := range es {
				got <- e
			}
		})
	}()
	// Resume after 2, then events appended while following.
	want := []int64{3, 4, 5, 6, 7, 8}
	appended := false
	deadline := time.After(30 * time.Second) // bounds a broken backend only
	for _, w := range want {
		select {
		case e := <-got:
			if e.Seq != w || e.Type != fmt.Sprint("e", w) {
				t.Fatalf("Follow delivered %d %s, want %d e%d", e.Seq, e.Type, w, w)
			}
		case <-deadline:
			t.Fatalf("Follow did not deliver event %d", w)
		}
		if w == 5 && !appended {
			appended = true
			batch := []event.Event{{Type: "e6", Time: at(0)}, {Type: "e7", Time: at(0)}, {Type: "e8", Time: at(0)}}
			if _, err := l.Append(ctx(t), batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Follow after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Follow did not return after its context was cancelled")
	}
	select {
	case e := <-got:
		t.Errorf("Follow delivered %d after the events appended", e.Seq)
	default:
	}
}

func testRestartRun(t *testing.T, st store.Store) {
	s, c := st.Runs(), st.Cluster()
	r := newRun(t, s, "lost")
	ctl, err := admitOne(s, t, r, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionControl(ctx(t), r.ID, ctl.ID, store.ControlFailed, nil, "generation lost", at(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendTrace(ctx(t), r.ID, store.TraceEvent{ID: "e1", TS: at(0), Kind: "progress.update", Summary: "one"}); err != nil {
		t.Fatal(err)
	}
	r.Stop, r.EndedAt = "lost", at(time.Second)
	if err := s.SaveRun(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	next := store.RunRecord{ID: r.ID, OwnerID: r.OwnerID, InstanceID: "lost-2", Generation: 2, PID: 42, StartTime: "7",
		CreatedAt: at(time.Hour), StartedAt: at(2 * time.Second), Doc: json.RawMessage(`{"node":"b"}`)}
	if err := c.RestartRun(ctx(t), next, "lost-wrong"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("RestartRun of another generation = %v, want ErrConflict", err)
	}
	if err := c.RestartRun(ctx(t), store.RunRecord{ID: "missing", InstanceID: "m-2"}, "m-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RestartRun of an unknown Run = %v, want ErrNotFound", err)
	}
	if err := c.RestartRun(ctx(t), next, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RestartRun without the lost generation = %v, want ErrInvalid", err)
	}
	if err := c.RestartRun(ctx(t), next, r.InstanceID); err != nil {
		t.Fatalf("RestartRun: %v", err)
	}
	got, err := s.Run(ctx(t), r.ID)
	if err != nil || got.InstanceID != "lost-2" || got.Generation != 2 || got.PID != 42 || got.Stop != "" || !got.EndedAt.IsZero() ||
		!got.CreatedAt.Equal(at(0)) || !got.StartedAt.Equal(at(2*time.Second)) || string(got.Doc) != `{"node":"b"}` {
		t.Errorf("Run after RestartRun = %+v, %v; want generation 2 running, created at the first generation's time", got, err)
	}
	if cs, err := s.Controls(ctx(t), r.ID); err != nil || len(cs) != 1 || cs[0].ID != ctl.ID {
		t.Errorf("journal after RestartRun = %+v, %v; want the old generation's record kept", cs, err)
	}
	if tr, err := s.Trace(ctx(t), r.ID, 0); err != nil || len(tr) != 1 || tr[0].ID != "e1" {
		t.Errorf("Trace after RestartRun = %+v, %v; want the old generation's event kept", tr, err)
	}
	// The new generation takes Controls and Trace as any other.
	if _, err := admitOne(s, t, next, 2); err != nil {
		t.Errorf("admission to the restarted generation: %v", err)
	}
	if err := s.AppendTrace(ctx(t), r.ID, store.TraceEvent{ID: "e2", TS: at(3 * time.Second), Kind: "progress.update", Summary: "two"}); err != nil {
		t.Errorf("Trace append after RestartRun: %v", err)
	}
}

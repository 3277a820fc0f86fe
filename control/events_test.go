package control

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

func TestEventsInOrder(t *testing.T) {
	c := newClock()
	r := New(Config{Now: c.now})
	rec, stop := record(r)
	defer stop()
	dispose := mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: NewValue("Ada").Handles()})
	exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent)
	exec(t, r, Command{Action: Apply, Identity: profile}, agent)                                         // refused
	exec(t, r, Command{Action: Apply, Identity: Identity{FormID: "profile", ControlID: "nope"}}, person) // not_found: no event
	exec(t, r, Command{Action: Apply, Identity: profile}, person)
	r.Unregister(Identity{FormID: "profile", ControlID: "nope"}) // unknown: no event
	dispose()
	dispose() // no second event

	type want struct {
		typ    EventType
		action Action
		ok     bool
		reason Reason
	}
	wants := []want{
		{EventRegistered, "", false, ""},
		{EventStaged, Stage, false, ""},
		{EventCommand, Stage, true, ""},
		{EventCommand, Apply, false, ReasonHumanConfirmationRequired},
		{EventCommand, Apply, true, ""},
		{EventUnregistered, "", false, ""},
	}
	// A marker registered afterwards proves nothing else was emitted.
	marker := Identity{FormID: "marker", ControlID: "m"}
	mustRegister(t, r, Registration{Identity: marker, Metadata: text("")})
	evs := rec.wait(t, len(wants)+1)
	if len(evs) != len(wants)+1 || !evs[len(wants)].Identity.Equal(marker) {
		t.Fatalf("got %d events: %+v", len(evs), evs)
	}
	var last time.Time
	for i, w := range wants {
		e := evs[i]
		if e.Type != w.typ || e.Seq != uint64(i+1) || !e.Identity.Equal(profile) {
			t.Errorf("event %d = %s seq %d %v, want %s", i, e.Type, e.Seq, e.Identity, w.typ)
		}
		if !e.Timestamp.After(last) {
			t.Errorf("event %d timestamp %v not from the clock", i, e.Timestamp)
		}
		last = e.Timestamp
		switch e.Type {
		case EventStaged:
			if e.Command.Action != w.action || e.Staged == nil || e.Staged.Revision != 1 || e.Context.Source != SourceAgent || e.Command.Value != "Grace" {
				t.Errorf("staged event = %+v", e)
			}
		case EventCommand:
			if e.Command.Action != w.action || e.Result.OK != w.ok || e.Result.Reason != w.reason || e.Result.Snapshot.IsZero() {
				t.Errorf("command event %d = %+v result %+v", i, e, e.Result)
			}
			if e.Context.PrincipalID == "" {
				t.Errorf("command event %d has no principal", i)
			}
		case EventRegistered, EventUnregistered:
			if e.Command != nil || e.Result != nil {
				t.Errorf("%s event carries a command", e.Type)
			}
		}
	}
	if evs[4].Result.Snapshot.State.Value != "Grace" {
		t.Errorf("apply event snapshot = %+v", evs[4].Result.Snapshot.State)
	}
}

func TestEventsNeverCarryRedactedValues(t *testing.T) {
	r := New(Config{})
	rec, stop := record(r)
	defer stop()
	hidden := Identity{FormID: "profile", ControlID: "hidden"}
	sp := newSpy("hunter2")
	sp.setState(State{ValidationMessage: "hunter2 is weak"})
	mustRegister(t, r, Registration{Identity: hidden, Metadata: Metadata{Kind: KindText, Readable: Bool(false)}, Handles: sp.handles()})
	secret := Identity{FormID: "profile", ControlID: "secret"}
	mustRegister(t, r, Registration{Identity: secret, Metadata: Metadata{Kind: KindPassword, Sensitivity: Secret}, Handles: newSpy("hunter2").handles()})
	exec(t, r, Command{Action: Stage, Identity: hidden, Value: "swordfish"}, agent)
	exec(t, r, Command{Action: Apply, Identity: hidden}, person)
	exec(t, r, Command{Action: Stage, Identity: secret, Value: "swordfish"}, agent)
	exec(t, r, Command{Action: Apply, Identity: secret, Value: "swordfish"}, person)
	exec(t, r, Command{Action: Explain, Identity: secret}, agent)
	evs := rec.wait(t, 2+2+1+3)
	b, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hunter2", "swordfish"} {
		if strings.Contains(string(b), s) {
			t.Errorf("events contain %q: %s", s, b)
		}
	}
	if sp.get() != "swordfish" {
		t.Errorf("the hidden control was not applied: %v", sp.get())
	}
}

func TestPanickingSubscriber(t *testing.T) {
	r := New(Config{})
	stop := r.Subscribe(func(Event) { panic("listener bug") })
	defer stop()
	rec, stop2 := record(r)
	defer stop2()
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()})
	res := exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person)
	wantReason(t, res, "")
	if v.Load() != "Grace" {
		t.Fatal("value not applied")
	}
	// The other subscriber still gets everything.
	if evs := rec.wait(t, 2); evs[1].Result == nil || !evs[1].Result.OK {
		t.Errorf("events = %+v", evs)
	}
}

func TestSlowSubscriberDropsAndCounts(t *testing.T) {
	r := New(Config{EventQueue: 4})
	block := make(chan struct{})
	var mu sync.Mutex
	var got []Event
	first := make(chan struct{})
	var once sync.Once
	stop := r.Subscribe(func(e Event) {
		once.Do(func() { close(first) })
		<-block
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	})
	defer stop()
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: NewValue("Ada").Handles()})
	<-first // the subscriber is now stuck on the registered event
	const n = 1000
	for i := range n {
		res := exec(t, r, Command{Action: Stage, Identity: profile, Value: fmt.Sprint(i)}, agent)
		wantReason(t, res, "")
	}
	close(block)
	marker := Identity{FormID: "m", ControlID: "m"}
	// Wait for the queue to drain, then send one more event that fits.
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k < 5 { // the stuck event plus a full queue of 4
			c.Errorf("only %d events delivered", k)
		}
	}, "the queue drained")
	mustRegister(t, r, Registration{Identity: marker, Metadata: text("")})
	var k int
	var lastEv Event
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		mu.Lock()
		k = len(got)
		if k > 0 {
			lastEv = got[k-1]
		}
		mu.Unlock()
		if !lastEv.Identity.Equal(marker) {
			c.Errorf("%d events, the last not the marker", k)
		}
	}, "the marker delivered")
	if k != 6 {
		t.Errorf("delivered %d events, want 6", k)
	}
	// Every stage emits two events; 4 fit in the queue.
	if want := uint64(2*n - 4); lastEv.Dropped != want {
		t.Errorf("dropped = %d, want %d", lastEv.Dropped, want)
	}
	if lastEv.Seq != uint64(2*n+2) {
		t.Errorf("seq = %d, want %d", lastEv.Seq, 2*n+2)
	}
}

func TestUnsubscribe(t *testing.T) {
	r := New(Config{})
	var mu sync.Mutex
	calls := 0
	stop := r.Subscribe(func(Event) {
		mu.Lock()
		calls++
		mu.Unlock()
	})
	rec, stop2 := record(r)
	defer stop2()
	mustRegister(t, r, Registration{Identity: profile, Metadata: text("")})
	rec.wait(t, 1)
	stop()
	stop() // twice is harmless
	mustRegister(t, r, Registration{Identity: Identity{FormID: "a", ControlID: "b"}, Metadata: text("")})
	rec.wait(t, 2)
	// The stopped subscriber had its one call by the time the other
	// subscriber saw the first event, or it never will: both were queued
	// together, and nothing is queued for it after stop.
	r.Subscribe(nil)() // a nil listener is ignored
	mu.Lock()
	defer mu.Unlock()
	if calls > 1 {
		t.Errorf("stopped subscriber called %d times", calls)
	}
}

func TestSubscriberCanUnsubscribeItself(t *testing.T) {
	r := New(Config{})
	var mu sync.Mutex
	var stop func()
	calls := 0
	done := make(chan struct{})
	mu.Lock()
	stop = r.Subscribe(func(Event) {
		mu.Lock()
		calls++
		s := stop
		mu.Unlock()
		s()
		if calls == 1 {
			close(done)
		}
	})
	mu.Unlock()
	rec, stopRec := record(r)
	defer stopRec()
	mustRegister(t, r, Registration{Identity: profile, Metadata: text("")})
	mustRegister(t, r, Registration{Identity: profile, Metadata: text("again")})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("listener never ran")
	}
	rec.wait(t, 2)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("listener called %d times after stopping itself", calls)
	}
}

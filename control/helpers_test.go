package control

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

var profile = Identity{FormID: "profile", ControlID: "display-name"}

// spy is a control with every handle, recording the calls it receives.
type spy struct {
	mu        sync.Mutex
	value     any
	state     State
	calls     map[string]int
	highlight time.Duration
	setErr    error
	getErr    error
	stateErr  error
	panicOn   string
}

func newSpy(v any) *spy { return &spy{value: v, calls: map[string]int{}} }

func (s *spy) hit(name string) {
	s.calls[name]++
	if s.panicOn == name {
		panic("boom in " + name)
	}
}

func (s *spy) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

func (s *spy) get() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value
}

func (s *spy) setState(st State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
}

func (s *spy) handles() Handles {
	return Handles{
		GetValue: func(context.Context) (any, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("get")
			return s.value, s.getErr
		},
		SetValue: func(_ context.Context, v any) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("set")
			if s.setErr != nil {
				return s.setErr
			}
			s.value = v
			return nil
		},
		Clear: func(context.Context) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("clear")
			s.value = ""
			return nil
		},
		Focus: func(context.Context) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("focus")
			return nil
		},
		Reveal: func(context.Context) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("reveal")
			return nil
		},
		Highlight: func(_ context.Context, d time.Duration) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("highlight")
			s.highlight = d
			return nil
		},
		Validate: func(context.Context) (bool, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("validate")
			return false, nil
		},
		GetState: func(context.Context) (State, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hit("state")
			return s.state, s.stateErr
		},
	}
}

var errBoom = errors.New("the widget is gone (value was hunter2)")

// clock is a deterministic clock that advances one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

var (
	agent    = CommandContext{Source: SourceAgent, PrincipalID: "agent-7", SessionID: "session-9"}
	agentOK  = CommandContext{Source: SourceAgent, Confirmed: true}
	person   = CommandContext{Source: SourceUser, Confirmed: true, PrincipalID: "ada"}
	unsureMe = CommandContext{Source: SourceVoice}
	defaults = CommandContext{}
)

func mustRegister(t testing.TB, r *Registry, reg Registration) func() {
	t.Helper()
	dispose, err := r.Register(reg)
	if err != nil {
		t.Fatalf("Register(%s): %v", reg.Identity, err)
	}
	return dispose
}

func text(label string) Metadata { return Metadata{Kind: KindText, Label: label} }

func exec(t testing.TB, r *Registry, cmd Command, cc CommandContext) Result {
	t.Helper()
	return r.Execute(context.Background(), cmd, cc)
}

func wantReason(t testing.TB, res Result, want Reason) {
	t.Helper()
	if want == "" {
		if !res.OK || res.Reason != "" {
			t.Fatalf("%s: got ok=%v reason=%q (%s), want success", res.Action, res.OK, res.Reason, res.Message)
		}
		return
	}
	if res.OK || res.Reason != want {
		t.Fatalf("%s: got ok=%v reason=%q (%s), want %q", res.Action, res.OK, res.Reason, res.Message, want)
	}
	if res.Message == "" {
		t.Fatalf("%s: refusal %q has no message", res.Action, want)
	}
}

// recorder collects events delivered to a subscriber.
type recorder struct {
	mu     sync.Mutex
	events []Event
	notify chan struct{}
}

func record(r *Registry) (*recorder, func()) {
	rec := &recorder{notify: make(chan struct{}, 1)}
	stop := r.Subscribe(func(e Event) {
		rec.mu.Lock()
		rec.events = append(rec.events, e)
		rec.mu.Unlock()
		select {
		case rec.notify <- struct{}{}:
		default:
		}
	})
	return rec, stop
}

// wait returns once n events have arrived, or fails the test after a
// generous bound.
func (rec *recorder) wait(t testing.TB, n int) []Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		rec.mu.Lock()
		if len(rec.events) >= n {
			out := append([]Event(nil), rec.events...)
			rec.mu.Unlock()
			return out
		}
		rec.mu.Unlock()
		select {
		case <-rec.notify:
		case <-deadline:
			rec.mu.Lock()
			got := len(rec.events)
			rec.mu.Unlock()
			t.Fatalf("got %d events, want %d", got, n)
		}
	}
}

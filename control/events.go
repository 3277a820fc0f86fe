package control

import (
	"sync"
	"sync/atomic"
	"time"
)

// EventType names what an [Event] reports.
type EventType string

// Event types.
const (
	// EventRegistered: a control was registered, or its registration
	// replaced.
	EventRegistered EventType = "registered"
	// EventUnregistered: a control was removed.
	EventUnregistered EventType = "unregistered"
	// EventStaged: a value was staged. It comes just before the command
	// event of the same stage.
	EventStaged EventType = "staged"
	// EventCommand: a command ran, was refused or failed. Commands for an
	// identity that is not registered, and malformed commands, emit nothing.
	EventCommand EventType = "command"
)

// Event is one thing that happened in a registry. Events are live
// notifications, not a durable log: a subscriber that falls behind loses
// events (see [Registry.Subscribe]).
//
// Values of redacted controls never appear in events: the command's value is
// removed and the result's snapshot is redacted. Every subscriber receives
// the same Command, Context, Result and Staged values; treat them as
// read-only.
type Event struct {
	// Seq numbers events in the order the registry emitted them, starting
	// at 1. Every subscriber sees the same number for the same event.
	Seq  uint64    `json:"seq"`
	Type EventType `json:"type"`
	// Identity is the control the event is about.
	Identity Identity `json:"identity"`
	// Command and Context are set for staged and command events.
	Command *Command        `json:"command,omitempty"`
	Context *CommandContext `json:"context,omitempty"`
	// Result is set for command events.
	Result *Result `json:"result,omitempty"`
	// Staged describes the new proposal of a staged event.
	Staged *Proposal `json:"staged,omitempty"`
	// Timestamp comes from the registry's clock.
	Timestamp time.Time `json:"timestamp"`
	// Dropped is the number of events this subscriber missed just before
	// this one because its queue was full.
	Dropped uint64 `json:"dropped,omitempty"`
}

// hub fans events out to subscribers. Each subscriber has a bounded queue
// drained by its own goroutine, so a slow or panicking listener delays only
// itself.
type hub struct {
	now   func() time.Time
	queue int

	n    atomic.Int32 // len(subs), readable without mu
	mu   sync.Mutex
	seq  uint64
	subs []*subscriber
}

type subscriber struct {
	ch      chan Event
	done    chan struct{}
	dropped uint64 // guarded by hub.mu
	once    sync.Once
}

// active reports whether anyone listens. Callers use it to skip building
// events nobody will receive.
func (h *hub) active() bool { return h.n.Load() > 0 }

// emit stamps ev and queues it for every subscriber without blocking.
func (h *hub) emit(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	h.seq++
	ev.Seq = h.seq
	ev.Timestamp = h.now()
	for _, s := range h.subs {
		e := ev
		e.Dropped = s.dropped
		select {
		case s.ch <- e:
			s.dropped = 0
		default:
			s.dropped++
		}
	}
}

func (h *hub) subscribe(fn func(Event)) func() {
	s := &subscriber{ch: make(chan Event, h.queue), done: make(chan struct{})}
	h.mu.Lock()
	h.subs = append(h.subs, s)
	h.n.Store(int32(len(h.subs)))
	h.mu.Unlock()
	go s.run(fn)
	return func() {
		s.once.Do(func() {
			h.mu.Lock()
			for i, x := range h.subs {
				if x == s {
					h.subs = append(h.subs[:i:i], h.subs[i+1:]...)
					h.n.Store(int32(len(h.subs)))
					break
				}
			}
			h.mu.Unlock()
			close(s.done)
		})
	}
}

func (s *subscriber) run(fn func(Event)) {
	for {
		select {
		case <-s.done:
			return
		case ev := <-s.ch:
			select {
			case <-s.done:
				return
			default:
			}
			deliver(fn, ev)
		}
	}
}

// deliver calls fn and swallows a panic, so one faulty listener neither
// stops its own delivery nor reaches the registry.
func deliver(fn func(Event), ev Event) {
	defer func() { _ = recover() }()
	fn(ev)
}

// Package event is assent's in-process event bus.
//
// Every event gets a sequence number, increasing by one per event. The bus
// keeps the newest events in a bounded replay buffer, so a subscriber that
// reconnects with the last sequence it saw receives exactly what it missed,
// without gaps or duplicates, as long as that is still in the buffer.
//
// Each subscriber has a bounded queue. Publishing never blocks: when a
// subscriber's queue is full, the events it cannot take are dropped for it
// alone and, once it catches up, it receives one "lagged" event saying how
// many it missed and from which sequence to resynchronise. Other subscribers
// are unaffected.
package event

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// Lagged is the type of the event a subscriber receives after it fell
// behind and lost events.
const Lagged = "lagged"

// Event is one message on the bus.
type Event struct {
	Seq  int64     `json:"seq"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	// Owner, when set, is the only principal allowed to see the event.
	// Events without an owner are visible to every principal the filter
	// of a subscription admits.
	Owner string `json:"-"`
	// People, when set, makes the event visible to every person (human
	// principal) and, besides them, only to its Owner when there is one.
	People bool            `json:"-"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// VisibleTo reports whether the principal id, a person when human is set,
// may see e.
func (e Event) VisibleTo(id string, human bool) bool {
	if e.People {
		return human || (e.Owner != "" && e.Owner == id)
	}
	return e.Owner == "" || e.Owner == id
}

// LaggedData is the payload of a Lagged event.
type LaggedData struct {
	// Missed is how many events were dropped.
	Missed int64 `json:"missed"`
	// ResumeAfter is the last sequence delivered before the gap; a client
	// can resubscribe after it to fetch what is still in the replay buffer,
	// or reload its state.
	ResumeAfter int64 `json:"resumeAfter"`
}

// ErrClosed is returned by Next when the subscription or the bus is closed.
var ErrClosed = errors.New("event: subscription closed")

// Bus fans events out to subscribers. The zero value is not usable; call New.
type Bus struct {
	mu     sync.Mutex
	seq    int64
	ring   []Event // replay buffer, oldest first, len ≤ cap(ring)
	start  int     // index of the oldest event in ring
	subs   map[*Subscription]struct{}
	closed bool
	now    func() time.Time
}

// Options configure a Bus.
type Options struct {
	// Replay is how many recent events are kept for resumption
	// (default 4096).
	Replay int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// New returns a bus.
func New(opts Options) *Bus {
	if opts.Replay <= 0 {
		opts.Replay = 4096
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Bus{ring: make([]Event, 0, opts.Replay), subs: map[*Subscription]struct{}{}, now: opts.Now}
}

// Publish assigns e its sequence number and time and delivers it. It never
// blocks.
func (b *Bus) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return e
	}
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = b.now()
	}
	if len(b.ring) < cap(b.ring) {
		b.ring = append(b.ring, e)
	} else {
		b.ring[b.start] = e
		b.start = (b.start + 1) % len(b.ring)
	}
	for s := range b.subs {
		s.offer(e)
	}
	return e
}

// Seq returns the sequence number of the newest event.
func (b *Bus) Seq() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Close ends every subscription.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.mu.Lock()
		s.closeLocked()
		s.mu.Unlock()
	}
	b.subs = map[*Subscription]struct{}{}
}

// Subscription is one subscriber's view of the bus.
type Subscription struct {
	bus    *Bus
	filter func(Event) bool

	mu        sync.Mutex
	queue     []Event
	max       int
	lost      int64 // dropped since the last delivered event
	lastSeq   int64 // last sequence handed to the queue
	delivered int64 // last sequence returned by Next
	closed    bool
	wake      chan struct{}
}

// Subscribe starts a subscription that receives, in order, the events after
// sequence after that pass filter (nil admits all), then new ones. queue
// bounds how many undelivered events it holds (default 256). When after is
// older than the replay buffer, the subscription starts with a Lagged event.
func (b *Bus) Subscribe(after int64, queue int, filter func(Event) bool) *Subscription {
	if queue <= 0 {
		queue = 256
	}
	if filter == nil {
		filter = func(Event) bool { return true }
	}
	s := &Subscription{bus: b, filter: filter, max: queue, wake: make(chan struct{}, 1), delivered: after, lastSeq: after}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.closed = true
		return s
	}
	if after > b.seq {
		// A sequence from the future (for example from before a restart):
		// start from now and say so.
		s.queue = append(s.queue, s.laggedEvent(1, b.seq, b.seq))
		s.lastSeq = b.seq
	} else if n := len(b.ring); after < b.seq {
		oldest := b.seq - int64(n) + 1
		if after+1 < oldest {
			s.queue = append(s.queue, s.laggedEvent(oldest-after-1, after, oldest-1))
			s.lastSeq = oldest - 1
		}
		for i := 0; i < n; i++ {
			e := b.ring[(b.start+i)%n]
			if e.Seq > s.lastSeq {
				s.offerLocked(e)
			}
		}
	}
	b.subs[s] = struct{}{}
	return s
}

func (s *Subscription) offer(e Event) {
	s.mu.Lock()
	s.offerLocked(e)
	s.mu.Unlock()
}

func (s *Subscription) offerLocked(e Event) {
	if s.closed || !s.filter(e) {
		return
	}
	if s.lost > 0 || len(s.queue) >= s.max {
		// Keep dropping until the reader has drained the queue, so the
		// Lagged event marks one contiguous gap.
		s.lost++
		s.lastSeq = e.Seq
		s.signal()
		return
	}
	s.queue = append(s.queue, e)
	s.lastSeq = e.Seq
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next returns the next event, waiting until one arrives, ctx is done or the
// subscription is closed.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			e := s.queue[0]
			s.queue[0] = Event{}
			s.queue = s.queue[1:]
			if len(s.queue) == 0 {
				s.queue = nil
			}
			s.delivered = e.Seq
			s.mu.Unlock()
			return e, nil
		}
		if s.lost > 0 {
			e := s.laggedEvent(s.lost, s.delivered, s.lastSeq)
			s.lost = 0
			s.delivered = s.lastSeq
			s.mu.Unlock()
			return e, nil
		}
		if s.closed {
			s.mu.Unlock()
			return Event{}, ErrClosed
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// laggedEvent reports missed events lost after sequence resumeAfter; its own
// sequence is seq, the last one skipped.
func (s *Subscription) laggedEvent(missed, resumeAfter, seq int64) Event {
	d, _ := json.Marshal(LaggedData{Missed: missed, ResumeAfter: resumeAfter})
	return Event{Seq: seq, Type: Lagged, Time: s.bus.now(), Data: d}
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
	s.mu.Lock()
	s.closeLocked()
	s.mu.Unlock()
}

func (s *Subscription) closeLocked() {
	if !s.closed {
		s.closed = true
		s.signal()
	}
}

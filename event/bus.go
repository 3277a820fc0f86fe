package event

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrClosed is returned by Next when the subscription or the bus is closed.
var ErrClosed = errors.New("event: subscription closed")

// Bus fans events out to subscribers. The zero value is not usable; call New.
//
// An event is stored once, when it is published; the replay buffer and the
// subscribers' queues share it, so fanning it out copies a pointer per
// subscriber and allocates nothing.
type Bus struct {
	mu     sync.Mutex
	seq    int64
	ring   []*Event // replay buffer, oldest first from start, len ≤ cap(ring)
	start  int      // index of the oldest event in ring
	subs   []*Subscription
	closed bool
	now    func() time.Time
	// relay, when set, links the bus to a shared Log (see Open).
	relay *relay
}

// Options configure a Bus.
type Options struct {
	// Replay is how many recent events are kept for resumption
	// (default 4096).
	Replay int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Backlog bounds, on a bus opened on a Log, how many published events
	// may wait to be appended to it (default 65536). Past it, Publish
	// drops the event and reports it to Logger.
	Backlog int
	// Logger receives the problems of a bus opened on a Log (appends that
	// fail and are retried, dropped events); slog.Default when nil.
	Logger *slog.Logger
}

// New returns a bus.
func New(opts Options) *Bus {
	if opts.Replay <= 0 {
		opts.Replay = 4096
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Bus{ring: make([]*Event, 0, opts.Replay), now: opts.Now}
}

// Publish assigns e its sequence number and time and delivers it. It never
// blocks.
//
// On a bus opened on a Log, Publish sets the time and queues e to be
// appended to the log, which assigns its sequence number; e is delivered,
// with that number, once the log has it. The returned event's Seq is then
// zero.
func (b *Bus) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return e
	}
	if e.Time.IsZero() {
		e.Time = b.now()
	}
	if b.relay != nil {
		b.relay.enqueue(e)
		return e
	}
	b.seq++
	e.Seq = b.seq
	p := new(Event)
	*p = e
	b.acceptLocked(p)
	return e
}

// acceptLocked makes p, whose sequence number follows b.seq, the newest
// event: it enters the replay buffer and every subscriber's queue.
func (b *Bus) acceptLocked(p *Event) {
	b.seq = p.Seq
	if len(b.ring) < cap(b.ring) {
		b.ring = append(b.ring, p)
	} else {
		b.ring[b.start] = p
		b.start++
		if b.start == len(b.ring) {
			b.start = 0
		}
	}
	for _, s := range b.subs {
		s.offer(p)
	}
}

// Seq returns the sequence number of the newest event.
func (b *Bus) Seq() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Close ends every subscription. On a bus opened on a Log it also stops
// following the log, after appending what was published before it, for
// at most flushTimeout, and returns once that is done.
func (b *Bus) Close() {
	if b.relay != nil {
		defer b.relay.stop()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, s := range b.subs {
		s.index = -1
		s.mu.Lock()
		s.closeLocked()
		s.mu.Unlock()
	}
	b.subs = nil
}

// Subscription is one subscriber's view of the bus.
//
// Read it with Next, one event at a time, or with NextBatch and TryBatch,
// which take every event ready at once. A reader that also waits for other
// things (a timer, a shutdown signal) drains the subscription with
// TryBatch, then waits on Ready together with them.
type Subscription struct {
	bus    *Bus
	filter func(Event) bool // nil admits all
	index  int              // position in bus.subs, under bus.mu; -1 once removed

	mu        sync.Mutex
	queue     []*Event // ring buffer of undelivered events, grown up to max
	head      int      // index of the oldest queued event
	n         int      // number of queued events
	max       int
	lost      int64 // dropped since the last delivered event
	lastSeq   int64 // last sequence handed to the queue
	delivered int64 // last sequence returned to the reader
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
	s := &Subscription{bus: b, filter: filter, index: -1, max: queue, wake: make(chan struct{}, 1), delivered: after, lastSeq: after}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.closed = true
		return s
	}
	if after > b.seq {
		// A sequence from the future (for example from before a restart):
		// start from now and say so.
		s.push(s.laggedEvent(1, b.seq, b.seq))
		s.lastSeq = b.seq
	} else if n := len(b.ring); after < b.seq {
		oldest := b.seq - int64(n) + 1
		if after+1 < oldest {
			s.push(s.laggedEvent(oldest-after-1, after, oldest-1))
			s.lastSeq = oldest - 1
		}
		for i := 0; i < n; i++ {
			e := b.ring[(b.start+i)%n]
			if e.Seq > s.lastSeq {
				s.offerLocked(e)
			}
		}
	}
	s.index = len(b.subs)
	b.subs = append(b.subs, s)
	return s
}

func (s *Subscription) offer(e *Event) {
	s.mu.Lock()
	s.offerLocked(e)
	s.mu.Unlock()
}

// offerLocked queues e if the filter admits it. The reader is woken only
// when the subscription goes from having nothing to deliver to having
// something: a reader waits only after finding nothing, so later events
// need no wake-up of their own.
func (s *Subscription) offerLocked(e *Event) {
	if s.closed || s.filter != nil && !s.filter(*e) {
		return
	}
	idle := s.n == 0 && s.lost == 0
	if s.lost > 0 || s.n >= s.max {
		// Keep dropping until the reader has drained the queue, so the
		// Lagged event marks one contiguous gap.
		s.lost++
	} else {
		s.push(e)
	}
	s.lastSeq = e.Seq
	if idle {
		s.signal()
	}
}

// push appends e to the queue, growing it when full; the caller keeps the
// queue within max.
func (s *Subscription) push(e *Event) {
	if s.n == len(s.queue) {
		grown := make([]*Event, min(max(8, 2*len(s.queue)), max(s.max, s.n+1)))
		k := copy(grown, s.queue[s.head:])
		copy(grown[k:], s.queue[:s.head])
		s.queue, s.head = grown, 0
	}
	i := s.head + s.n
	if i >= len(s.queue) {
		i -= len(s.queue)
	}
	s.queue[i] = e
	s.n++
}

func (s *Subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// popLocked takes the next event to deliver: a queued one, then, after a
// gap, the Lagged event. ok is false when there is none; err is ErrClosed
// once the subscription is closed and drained.
func (s *Subscription) popLocked() (e Event, ok bool, err error) {
	if s.n > 0 {
		p := s.queue[s.head]
		s.queue[s.head] = nil
		s.head++
		if s.head == len(s.queue) {
			s.head = 0
		}
		s.n--
		s.delivered = p.Seq
		return *p, true, nil
	}
	if s.lost > 0 {
		p := s.laggedEvent(s.lost, s.delivered, s.lastSeq)
		s.lost = 0
		s.delivered = s.lastSeq
		return *p, true, nil
	}
	if s.closed {
		return Event{}, false, ErrClosed
	}
	return Event{}, false, nil
}

// Next returns the next event, waiting until one arrives, ctx is done or the
// subscription is closed.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		e, ok, err := s.popLocked()
		if ok && (s.n > 0 || s.lost > 0) {
			// Leave a wake-up for any other reader waiting.
			s.signal()
		}
		s.mu.Unlock()
		if ok || err != nil {
			return e, err
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// TryBatch appends to dst every event ready now, in order, without
// waiting, and returns the extended slice. The error is ErrClosed once the
// subscription is closed and every event has been taken.
func (s *Subscription) TryBatch(dst []Event) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		e, ok, err := s.popLocked()
		if !ok {
			if len(dst) > 0 {
				// Report the close with the next call, after these.
				err = nil
			}
			return dst, err
		}
		dst = append(dst, e)
	}
}

// NextBatch appends to dst every event ready, waiting until there is at
// least one, ctx is done or the subscription is closed.
func (s *Subscription) NextBatch(ctx context.Context, dst []Event) ([]Event, error) {
	n := len(dst)
	for {
		var err error
		if dst, err = s.TryBatch(dst); len(dst) > n || err != nil {
			return dst, err
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

// Ready returns a channel that receives a value when events may have become
// ready, or the subscription was closed, since the reader last found none.
// A reader drains the subscription with TryBatch before waiting on it, and
// reads again after; a value may arrive when nothing is left to read.
func (s *Subscription) Ready() <-chan struct{} { return s.wake }

// laggedEvent reports missed events lost after sequence resumeAfter; its own
// sequence is seq, the last one skipped.
func (s *Subscription) laggedEvent(missed, resumeAfter, seq int64) *Event {
	d, _ := json.Marshal(LaggedData{Missed: missed, ResumeAfter: resumeAfter})
	return &Event{Seq: seq, Type: Lagged, Time: s.bus.now(), Data: d}
}

// Close ends the subscription.
func (s *Subscription) Close() {
	b := s.bus
	b.mu.Lock()
	if i := s.index; i >= 0 {
		last := len(b.subs) - 1
		b.subs[i] = b.subs[last]
		b.subs[i].index = i
		b.subs[last] = nil
		b.subs = b.subs[:last]
		s.index = -1
	}
	b.mu.Unlock()
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

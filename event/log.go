package event

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Log is an ordered log of events shared by the buses of several nodes:
// the seam through which they deliver one another's events. The log
// numbers the events it is given, one global sequence for every node, each
// number one more than the one before; it may forget its oldest events.
//
// A Log is safe for concurrent use.
type Log interface {
	// Append adds events to the log, in order, as one step: either all
	// are appended, numbered one after another, or none. It returns the
	// sequence number given to the last one. The Seq of each event given
	// is ignored.
	Append(ctx context.Context, events []Event) (last int64, err error)
	// Tail returns the newest events of the log, at most n, oldest
	// first.
	Tail(ctx context.Context, n int) ([]Event, error)
	// Follow calls deliver with the events after sequence after, then
	// with each event appended later by any node, in sequence order,
	// until ctx is done; it then returns ctx's error. Each call of
	// deliver continues where the previous one stopped; a jump in
	// sequence means the log forgot those events before they were read.
	// Follow returns another error only when it cannot go on; calling it
	// again resumes. deliver must not keep the slice it is given.
	Follow(ctx context.Context, after int64, deliver func([]Event)) error
}

// Bounds of a bus linked to a log.
const (
	// appendBatchMax is the most events appended in one call.
	appendBatchMax = 512
	// flushTimeout bounds how long Close waits for published events to
	// reach the log.
	flushTimeout = 5 * time.Second
	// retryMax is the longest pause between two attempts to append or to
	// follow after a failure.
	retryMax = time.Second
)

// Open returns a bus on log: every event published on it is appended to
// the log and delivered, on this bus and on every other bus of the log,
// in the log's order and with the log's sequence numbers. Subscribe
// resumes by those numbers, so a client may resume on any node.
//
// Open fills the replay buffer with the newest events of the log, then
// follows it until Close. The bus appends in the background, in batches:
// Publish never waits for the log. When an append fails it is retried,
// with a growing pause, and the events wait (see Options.Backlog).
func Open(ctx context.Context, log Log, opts Options) (*Bus, error) {
	b := New(opts)
	tail, err := log.Tail(ctx, cap(b.ring))
	if err != nil {
		return nil, fmt.Errorf("event: read the newest events of the log: %w", err)
	}
	b.deliver(tail)
	r := &relay{log: log, logger: opts.Logger, backlog: opts.Backlog, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	if r.backlog <= 0 {
		r.backlog = 65536
	}
	r.appendCtx, r.cancelAppend = context.WithCancel(context.Background())
	followCtx, cancelFollow := context.WithCancel(context.Background())
	r.cancelFollow = cancelFollow
	b.relay = r
	r.wg.Add(2)
	go b.appendLoop(r)
	go b.followLoop(r, followCtx)
	return b, nil
}

// relay links a bus to its log: a queue of events to append, and the
// goroutines that append them and follow the log.
type relay struct {
	log     Log
	logger  *slog.Logger
	backlog int

	mu      sync.Mutex
	queue   []Event
	dropped int64
	closing bool
	wake    chan struct{}

	appendCtx    context.Context
	cancelAppend context.CancelFunc
	cancelFollow context.CancelFunc
	stopOnce     sync.Once
	stopped      chan struct{}
	wg           sync.WaitGroup
}

// enqueue queues e for appending, or drops it when the backlog is full.
func (r *relay) enqueue(e Event) {
	r.mu.Lock()
	if len(r.queue) >= r.backlog {
		r.dropped++
		n := r.dropped
		r.mu.Unlock()
		if n&(n-1) == 0 { // 1, 2, 4, …: say it without flooding the log
			r.logger.Error("event log backlog full: events dropped", "dropped", n, "backlog", r.backlog)
		}
		return
	}
	r.queue = append(r.queue, e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take removes and returns up to appendBatchMax queued events, waiting for
// some; ok is false once the relay is closing and nothing is queued.
func (r *relay) take(dst []Event) (batch []Event, ok bool) {
	for {
		r.mu.Lock()
		if n := min(len(r.queue), appendBatchMax); n > 0 {
			dst = append(dst[:0], r.queue[:n]...)
			rest := copy(r.queue, r.queue[n:])
			clear(r.queue[rest:])
			r.queue = r.queue[:rest]
			r.mu.Unlock()
			return dst, true
		}
		closing := r.closing
		r.mu.Unlock()
		if closing {
			return dst, false
		}
		<-r.wake
	}
}

// stop flushes the queue (for at most flushTimeout), stops following the
// log and waits for both goroutines.
func (r *relay) stop() {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.closing = true
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
		r.cancelFollow()
		t := time.AfterFunc(flushTimeout, r.cancelAppend)
		r.wg.Wait()
		t.Stop()
		r.cancelAppend()
		close(r.stopped)
	})
	<-r.stopped
}

// appendLoop appends the queued events in batches, retrying failures
// until the bus is closed and the flush time is over. A batch appended is
// delivered at once when it follows the newest event delivered; otherwise
// the follower delivers it in its turn.
func (b *Bus) appendLoop(r *relay) {
	defer r.wg.Done()
	var batch []Event
	for {
		var ok bool
		if batch, ok = r.take(batch); !ok {
			return
		}
		last, err := r.appendRetrying(batch)
		if err != nil {
			r.logger.Error("events not appended to the event log", "events", len(batch), "err", err)
			continue
		}
		b.mu.Lock()
		if first := last - int64(len(batch)) + 1; first == b.seq+1 && !b.closed {
			own := make([]Event, len(batch))
			copy(own, batch)
			for i := range own {
				own[i].Seq = first + int64(i)
				b.acceptLocked(&own[i])
			}
		}
		b.mu.Unlock()
		clear(batch)
	}
}

// appendRetrying appends batch, retrying with a growing pause until it is
// appended or the relay's append context ends.
func (r *relay) appendRetrying(batch []Event) (int64, error) {
	pause := 10 * time.Millisecond
	for {
		last, err := r.log.Append(r.appendCtx, batch)
		if err == nil {
			return last, nil
		}
		if r.appendCtx.Err() != nil {
			return 0, err
		}
		r.logger.Warn("append to the event log failed; retrying", "events", len(batch), "err", err)
		if !sleep(r.appendCtx, pause) {
			return 0, err
		}
		pause = min(2*pause, retryMax)
	}
}

// followLoop follows the log from the newest event delivered until ctx
// ends, resuming after a failure.
func (b *Bus) followLoop(r *relay, ctx context.Context) {
	defer r.wg.Done()
	pause := 10 * time.Millisecond
	for {
		err := r.log.Follow(ctx, b.Seq(), b.deliver)
		if ctx.Err() != nil {
			return
		}
		r.logger.Warn("following the event log failed; resuming", "err", err)
		if !sleep(ctx, pause) {
			return
		}
		pause = min(2*pause, retryMax)
	}
}

// deliver takes events read from the log, in sequence order. Those
// already delivered are skipped. Before an event that does not follow the
// newest one, the events in between, which the log no longer has, count
// as missed for every subscriber, and the replay buffer starts again.
func (b *Bus) deliver(events []Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	k := 0
	for k < len(events) && events[k].Seq <= b.seq {
		k++
	}
	if k == len(events) {
		return
	}
	// One copy per batch: the buffer and the queues keep pointers into it.
	own := make([]Event, len(events)-k)
	copy(own, events[k:])
	for i := range own {
		p := &own[i]
		if p.Seq <= b.seq {
			continue
		}
		if gap := p.Seq - b.seq - 1; gap > 0 {
			b.skipLocked(gap, p.Seq-1)
		}
		b.acceptLocked(p)
	}
}

// skipLocked records that the events after b.seq up to sequence last are
// gone: each subscriber receives a Lagged event in their place (or counts
// them with the events it is already missing), and the replay buffer
// starts again.
func (b *Bus) skipLocked(missed, last int64) {
	clear(b.ring)
	b.ring, b.start = b.ring[:0], 0
	for _, s := range b.subs {
		s.mu.Lock()
		if !s.closed {
			idle := s.n == 0 && s.lost == 0
			if s.lost == 0 && s.n < s.max {
				s.push(s.laggedEvent(missed, s.lastSeq, last))
			} else {
				s.lost += missed
			}
			s.lastSeq = last
			if idle {
				s.signal()
			}
		}
		s.mu.Unlock()
	}
	b.seq = last
}

// sleep pauses for d, reporting false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

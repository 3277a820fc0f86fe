package event

import (
	"context"
	"sync"
)

// MemoryLog is a Log kept in memory, shared by the buses of one process:
// for tests, and for programs that run several buses side by side. It
// keeps the newest events, at most its bound.
type MemoryLog struct {
	mu     sync.Mutex
	keep   int
	events []Event // the retained events, oldest first
	last   int64
	// changed is closed, and replaced, at every append.
	changed chan struct{}
}

// NewMemoryLog returns an empty log that keeps at most keep events
// (4096 when keep is not positive).
func NewMemoryLog(keep int) *MemoryLog {
	if keep <= 0 {
		keep = 4096
	}
	return &MemoryLog{keep: keep, changed: make(chan struct{})}
}

// Append implements Log.
func (l *MemoryLog) Append(ctx context.Context, events []Event) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range events {
		l.last++
		e.Seq = l.last
		l.events = append(l.events, e)
	}
	if over := len(l.events) - l.keep; over > 0 {
		n := copy(l.events, l.events[over:])
		clear(l.events[n:])
		l.events = l.events[:n]
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return l.last, nil
}

// Tail implements Log.
func (l *MemoryLog) Tail(ctx context.Context, n int) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(max(n, 0), len(l.events))
	return append([]Event(nil), l.events[len(l.events)-n:]...), nil
}

// Follow implements Log.
func (l *MemoryLog) Follow(ctx context.Context, after int64, deliver func([]Event)) error {
	var batch []Event
	for {
		l.mu.Lock()
		batch = batch[:0]
		if len(l.events) > 0 {
			// Numbers are consecutive: the first event after after is at
			// its distance from the oldest.
			i := max(after-l.events[0].Seq+1, 0)
			if i < int64(len(l.events)) {
				batch = append(batch, l.events[i:]...)
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if len(batch) > 0 {
			deliver(batch)
			after = batch[len(batch)-1].Seq
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Package testclock is a clock for tests: it stands still until told to
// move, and is safe for concurrent use.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock. Pass its Now method where a func() time.Time
// is wanted.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock that reads t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

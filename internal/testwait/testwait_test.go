package testwait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of ending the
// test, so the helpers' failures can be checked.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	tests := []struct {
		name    string
		trueAt  int32 // the call from which cond holds; 0 for never
		timeout time.Duration
		fails   bool
	}{
		{name: "at once", trueAt: 1, timeout: time.Second},
		{name: "after some calls", trueAt: 5, timeout: 5 * time.Second},
		{name: "never", trueAt: 0, timeout: 30 * time.Millisecond, fails: true},
		{name: "zero timeout still looks", trueAt: 1, timeout: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			r := &recorder{TB: t}
			start := time.Now()
			Eventually(r, tt.timeout, func() bool {
				n := calls.Add(1)
				return tt.trueAt != 0 && n >= tt.trueAt
			}, "the thing")
			took := time.Since(start)
			if tt.fails {
				if !strings.Contains(r.fatal, "the thing: not within 30ms") {
					t.Errorf("failure message %q", r.fatal)
				}
				if took < tt.timeout {
					t.Errorf("gave up after %v, before the timeout %v", took, tt.timeout)
				}
				return
			}
			if r.fatal != "" {
				t.Errorf("failed: %s", r.fatal)
			}
			if got := calls.Load(); got != tt.trueAt {
				t.Errorf("cond called %d times, want %d", got, tt.trueAt)
			}
		})
	}
}

func TestEventuallyWaitsForBackground(t *testing.T) {
	var done atomic.Bool
	time.AfterFunc(20*time.Millisecond, func() { done.Store(true) })
	r := &recorder{TB: t}
	Eventually(r, 10*time.Second, done.Load, "background work")
	if r.fatal != "" {
		t.Fatal(r.fatal)
	}
}

func TestEventuallyC(t *testing.T) {
	t.Run("reports the last try", func(t *testing.T) {
		r := &recorder{TB: t}
		n := 0
		EventuallyC(r, 30*time.Millisecond, func(c *C) {
			n++
			c.Errorf("status %d", n)
		}, "status done")
		want := fmt.Sprintf("status done: not within 30ms; last try: status %d", n)
		if r.fatal != want {
			t.Errorf("failure %q, want %q", r.fatal, want)
		}
	})
	t.Run("a try with no message succeeds", func(t *testing.T) {
		r := &recorder{TB: t}
		n := 0
		EventuallyC(r, 5*time.Second, func(c *C) {
			n++
			if n < 3 {
				c.Errorf("only %d", n)
			}
			if c.Failed() != (n < 3) {
				t.Errorf("Failed() = %v on try %d", c.Failed(), n)
			}
		}, "three tries")
		if r.fatal != "" || n != 3 {
			t.Errorf("fatal %q after %d tries", r.fatal, n)
		}
	})
}

func TestPollBacksOff(t *testing.T) {
	var calls int
	start := time.Now()
	poll(300*time.Millisecond, func() bool { calls++; return false })
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("poll gave up after %v", took)
	}
	// Doubling from 1ms to 50ms spends about 63ms on 7 sleeps, then sleeps
	// 50ms at a time: about 12 calls in 300ms. Polling every millisecond
	// would make about 300.
	if calls > 40 {
		t.Errorf("cond called %d times in 300ms: no backoff", calls)
	}
}

// Package testwait waits in tests for a condition that something running in
// the background makes true: a Run that finishes, a node that sees another's
// write, a lock that frees.
//
// It imports only the standard library, so tests of any package, low or
// high in the module, can use it.
package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Polling starts at firstPoll and doubles up to maxPoll, so a condition
// that holds almost at once is seen almost at once and a slow one costs
// little.
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Eventually calls cond until it returns true, failing t (t.Fatalf) when
// it has not within timeout. what says what was awaited, for the failure
// message. cond runs on the calling goroutine, so it may itself fail t.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("%s: not within %v", what, timeout)
	}
}

// C collects what one try of an EventuallyC condition observed. A try that
// reports nothing through Errorf is a success.
type C struct {
	msgs []string
}

// Errorf records that the condition does not hold yet, and why: the
// message of the last try is the failure message if time runs out.
func (c *C) Errorf(format string, args ...any) {
	c.msgs = append(c.msgs, fmt.Sprintf(format, args...))
}

// Failed reports whether this try has recorded a message.
func (c *C) Failed() bool { return len(c.msgs) > 0 }

// EventuallyC calls check, with a fresh C each time, until a call records
// nothing through C.Errorf; when that has not happened within timeout it
// fails t (t.Fatalf) with what and the messages of the last call, so the
// failure shows the last value observed.
func EventuallyC(t testing.TB, timeout time.Duration, check func(c *C), what string) {
	t.Helper()
	var last *C
	ok := poll(timeout, func() bool {
		last = &C{}
		check(last)
		return !last.Failed()
	})
	if !ok {
		t.Fatalf("%s: not within %v; last try: %s", what, timeout, strings.Join(last.msgs, "; "))
	}
}

// poll calls cond until it returns true or timeout has passed, and reports
// whether it returned true. cond is called at least once, and once more
// after the timeout has passed, so a slow first call still gets a second
// look.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	wait := firstPoll
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, maxPoll)
	}
}

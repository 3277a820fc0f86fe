package testclock_test

import (
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testclock"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Unix(1e9, 0)
	c := testclock.New(start)
	for range 3 {
		if !c.Now().Equal(start) {
			t.Fatal("the clock moved by itself")
		}
	}
	c.Advance(time.Minute)
	if got := c.Now().Sub(start); got != time.Minute {
		t.Fatalf("advanced by %s, want 1m", got)
	}
}

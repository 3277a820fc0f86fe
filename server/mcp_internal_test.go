package server

import (
	"testing"
	"time"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/testclock"
	"github.com/assent-run/assent/store"
)

func TestOpenMemo(t *testing.T) {
	p := store.Principal{ID: "p_a", Kind: store.KindAgent}
	tests := []struct {
		name      string
		between   func(bus *event.Bus, clock *testclock.Clock)
		wantCount int // counts made after the second get
	}{
		{"nothing happened", func(*event.Bus, *testclock.Clock) {}, 1},
		{"an event was published", func(bus *event.Bus, _ *testclock.Clock) { bus.Publish(event.Event{Type: "run.status"}) }, 2},
		{"the counts grew old", func(_ *event.Bus, c *testclock.Clock) { c.Advance(openMemoTTL) }, 2},
		{"some time passed", func(_ *event.Bus, c *testclock.Clock) { c.Advance(openMemoTTL / 2) }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bus := event.New(event.Options{})
			defer bus.Close()
			clock := testclock.New(time.Unix(1e9, 0))
			memo := &openMemo{now: clock.Now}
			counted := 0
			count := func() map[string]int {
				counted++
				return map[string]int{"runs": counted}
			}
			if got := memo.get(bus, p, count); got["runs"] != 1 {
				t.Fatalf("first get = %v", got)
			}
			tc.between(bus, clock)
			got := memo.get(bus, p, count)
			if counted != tc.wantCount || got["runs"] != tc.wantCount {
				t.Fatalf("counted %d times, got %v; want %d counts", counted, got, tc.wantCount)
			}
			// Another principal never shares the counts.
			if other := memo.get(bus, store.Principal{ID: "p_b"}, count); other["runs"] != tc.wantCount+1 {
				t.Fatalf("another principal got %v", other)
			}
		})
	}
}

package host

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestRepeatRunsAtOnceAndStops(t *testing.T) {
	var passes atomic.Int32
	first := make(chan struct{})
	stop := Repeat(time.Hour, func(ctx context.Context) {
		if passes.Add(1) == 1 {
			close(first)
		}
	})
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first pass did not run at once")
	}
	stop()
	stop() // a second stop does nothing
	if n := passes.Load(); n != 1 {
		t.Errorf("%d passes within an hour's interval, want 1", n)
	}
}

func TestRepeatCancelsThePassInFlight(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	stop := Repeat(time.Millisecond, func(ctx context.Context) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		select {
		case ended <- ctx.Err():
		default:
		}
	})
	<-started
	stop()
	select {
	case err := <-ended:
		if err != context.Canceled {
			t.Errorf("the pass's context ended with %v, want context.Canceled", err)
		}
	default:
		t.Error("stop returned before the pass in flight ended")
	}
}

package host

import (
	"context"
	"sync"
	"time"
)

// Repeat runs pass at once and then every interval, in a goroutine of its
// own, until the returned function is called. That function cancels the
// context pass receives and waits for pass to return; calling it again
// does nothing. It is the loop of the parts' deadline sweepers: each pass
// reads only what is due and logs its own failures, and the next pass
// tries again.
func Repeat(every time.Duration, pass func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			pass(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

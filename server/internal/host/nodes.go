package host

import (
	"context"

	"github.com/assent-run/assent/event"
)

// followQueue bounds the events waiting to be followed; past it the
// subscription reports event.Lagged.
const followQueue = 1024

// FollowOtherNodes calls handle, from one goroutine and in order, with each
// event that match accepts among those published from now on, when the bus
// is shared with other nodes (SharedBus); otherwise it does nothing. A part
// uses it to bring its copies up to date with the changes other nodes make;
// handle skips the events stamped with this process's Origin. The lagged
// event is offered to match like any other, so a part that missed events
// can read everything again. It returns at once; stop ends the following
// and waits for a handle under way.
func (h *Host) FollowOtherNodes(match func(event.Event) bool, handle func(context.Context, event.Event)) (stop func()) {
	if !h.SharedBus {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	sub := h.Bus.Subscribe(h.Bus.Seq(), followQueue, match)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			e, err := sub.Next(ctx)
			if err != nil {
				return
			}
			handle(ctx, e)
		}
	}()
	return func() {
		cancel()
		sub.Close()
		<-done
	}
}

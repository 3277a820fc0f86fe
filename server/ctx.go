package server

import (
	"context"
	"time"
)

// contextWithTimeoutOr returns a context that ends after d, or when either
// parent or also ends.
func contextWithTimeoutOr(parent, also context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, d)
	stop := context.AfterFunc(also, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

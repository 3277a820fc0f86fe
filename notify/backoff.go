package notify

import "time"

// Retry schedule of a failed delivery: the first retry after FirstRetry,
// each later one after twice the wait before it, never more than MaxWait,
// and the message goes to the dead letters after MaxAttempts attempts.
const (
	FirstRetry  = time.Second
	MaxWait     = 4 * time.Hour
	MaxAttempts = 18
)

// NextAttempt returns how long to wait before trying again a delivery that
// has failed attempts times (1 after the first failure), and false when no
// attempt is left and the message is dead. The waits are 1 s, 2 s, 4 s, …
// up to MaxWait: the third attempt starts about 3 s after the first, and
// all MaxAttempts take about a day and a half.
func NextAttempt(attempts int) (time.Duration, bool) {
	if attempts >= MaxAttempts {
		return 0, false
	}
	if attempts < 1 {
		attempts = 1
	}
	d := FirstRetry
	for i := 1; i < attempts; i++ {
		d *= 2
		if d >= MaxWait {
			return MaxWait, true
		}
	}
	return d, true
}

package host

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/assent-run/assent/event"
)

// PingInterval is how often an idle event stream sends a ": ping" comment.
const PingInterval = 15 * time.Second

// ServeSSE writes sub's events as server-sent events until the client goes
// away or the server shuts down.
//
// Every event ready when the writer wakes is encoded into one reused
// buffer and sent with one write and one flush, so delivering an event
// allocates nothing.
func (s *Host) ServeSSE(w http.ResponseWriter, r *http.Request, sub *event.Subscription) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, ": ok\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	// One channel says the stream is over, whether the client left or the
	// server is shutting down, so each wait watches three channels.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.Streams, cancel)()
	done := ctx.Done()
	// The ping timer is not re-armed at every write: when it fires after
	// a write, it is set again for the rest of the idle interval.
	ping := time.NewTimer(PingInterval)
	defer ping.Stop()
	lastWrite := time.Now()
	var batch []event.Event
	buf := make([]byte, 0, 1024)
	for {
		// Take every event ready now and write them in one go; wait only
		// when none is.
		var err error
		batch, err = sub.TryBatch(batch[:0])
		if len(batch) > 0 {
			buf = buf[:0]
			for i := range batch {
				buf = appendSSE(buf, &batch[i])
				batch[i] = event.Event{} // drop the references until the next batch
			}
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
				return
			}
			lastWrite = time.Now()
			continue
		}
		if err != nil {
			return
		}
		select {
		case <-sub.Ready():
		case <-ping.C:
			if idle := time.Since(lastWrite); idle < PingInterval {
				ping.Reset(PingInterval - idle)
				continue
			}
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			lastWrite = time.Now()
			ping.Reset(PingInterval)
		case <-done:
			return
		}
	}
}

// appendSSE appends e to b in the event-stream wire format:
// "id: <seq>\nevent: <type>\ndata: <data>\n\n", with {} for no data.
func appendSSE(b []byte, e *event.Event) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, e.Type...)
	b = append(b, "\ndata: "...)
	if len(e.Data) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, e.Data...)
	}
	return append(b, "\n\n"...)
}

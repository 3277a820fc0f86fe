package host

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/assent-run/assent/event"
)

// PingInterval is how often an idle event stream sends a ": ping" comment.
const PingInterval = 15 * time.Second

// ServeSSE writes sub's events as server-sent events until the client goes
// away or the server shuts down.
func (s *Host) ServeSSE(w http.ResponseWriter, r *http.Request, sub *event.Subscription) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": ok\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	ctx := r.Context()
	ping := time.NewTimer(PingInterval)
	defer ping.Stop()
	var batch []event.Event
	var buf []byte
	for {
		// Take every event ready now and write them in one go; wait only
		// when none is.
		var err error
		batch, err = sub.TryBatch(batch[:0])
		if len(batch) > 0 {
			buf = buf[:0]
			for _, e := range batch {
				buf = fmt.Appendf(buf, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, dataOf(e))
			}
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
				return
			}
			ping.Reset(PingInterval)
			continue
		}
		if err != nil {
			return
		}
		select {
		case <-sub.Ready():
		case <-ping.C:
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			ping.Reset(PingInterval)
		case <-ctx.Done():
			return
		case <-s.Streams.Done():
			return
		}
	}
}

func dataOf(e event.Event) []byte {
	if len(e.Data) == 0 {
		return []byte("{}")
	}
	return e.Data
}

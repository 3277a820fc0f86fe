package server

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/wire"
	"github.com/assent-run/assent/store"
)

// pingInterval is how often an idle event stream sends a ": ping" comment.
const pingInterval = 15 * time.Second

// handleEvents serves GET /v1/events: the event stream, filtered to what the
// principal may see. Each event carries its sequence as the SSE id; a client
// resumes with Last-Event-ID (or ?after=N).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	var after int64 = -1
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, wire.InvalidRequest, "Last-Event-ID must be a sequence number from this stream")
			return
		}
		after = n
	} else if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, wire.InvalidRequest, "after must be a non-negative sequence number")
			return
		}
		after = n
	}
	if after < 0 {
		after = s.bus.Seq() // a fresh client starts from now
	}
	human := p.Kind == store.KindHuman
	sub := s.bus.Subscribe(after, 256, func(e event.Event) bool { return e.VisibleTo(p.ID, human) })
	defer sub.Close()
	s.serveSSE(w, r, sub)
}

// serveSSE writes sub's events as server-sent events until the client goes
// away or the server shuts down.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request, sub *event.Subscription) {
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
	ping := time.NewTimer(pingInterval)
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
			ping.Reset(pingInterval)
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
			ping.Reset(pingInterval)
		case <-ctx.Done():
			return
		case <-s.streams.Done():
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

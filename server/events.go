package server

import (
	"net/http"
	"strconv"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// handleEvents serves GET /v1/events: the event stream, filtered to what the
// principal may see. Each event carries its sequence as the SSE id; a client
// resumes with Last-Event-ID (or ?after=N).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	var after int64 = -1
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			host.WriteError(w, wire.InvalidRequest, "Last-Event-ID must be a sequence number from this stream")
			return
		}
		after = n
	} else if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			host.WriteError(w, wire.InvalidRequest, "after must be a non-negative sequence number")
			return
		}
		after = n
	}
	if after < 0 {
		after = s.host.Bus.Seq() // a fresh client starts from now
	}
	human := p.Kind == store.KindHuman
	sub := s.host.Bus.Subscribe(after, 256, func(e event.Event) bool { return e.VisibleTo(p.ID, human) })
	defer sub.Close()
	s.host.ServeSSE(w, r, sub)
}

package server

import (
	"context"
	"net/http"

	"github.com/assent-run/assent/store"
)

// controlsState holds the server's controls part.
type controlsState struct{}

func (s *Server) initControls(ctx context.Context) error { return nil }

func (s *Server) closeControls() {}

func (s *Server) routesControls(mux *http.ServeMux) {}

func (s *Server) inboxControls(ctx context.Context, p store.Principal) (inboxSection, error) {
	return inboxSection{}, nil
}

package server

import (
	"context"
	"net/http"

	"github.com/assent-run/assent/store"
)

// flowsState holds the server's flows part.
type flowsState struct{}

func (s *Server) initFlows(ctx context.Context) error { return nil }

func (s *Server) closeFlows() {}

func (s *Server) routesFlows(mux *http.ServeMux) {}

func (s *Server) inboxFlows(ctx context.Context, p store.Principal) ([]inboxSection, error) {
	return nil, nil
}

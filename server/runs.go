package server

import (
	"context"
	"net/http"
)

// runsState holds the server's runs part.
type runsState struct{}

func (s *Server) initRuns(ctx context.Context) error { return nil }

func (s *Server) closeRuns() {}

func (s *Server) routesRuns(mux *http.ServeMux) {}

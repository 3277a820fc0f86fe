package server

import (
	"context"
	"net/http"
)

// screensState holds the server's screens part.
type screensState struct{}

func (s *Server) initScreens(ctx context.Context) error { return nil }

func (s *Server) closeScreens() {}

func (s *Server) routesScreens(mux *http.ServeMux) {}

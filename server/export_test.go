package server

import (
	"context"
	"net/http"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// Names the external tests reach inside the package.

type (
	WaitItem    = waitItem
	WaitOutcome = waitOutcome
)

const (
	WaitMax         = waitMax
	OutcomeNotFound = outcomeNotFound
)

var (
	InboxWait = (*Server).inboxWait
	MCPTool   = mcpTool
)

// Patterns returns the route patterns of the server's handler.
func (s *Server) Patterns() []string { return s.patterns }

// MCPSessions reports how many MCP sessions principalID holds.
func (s *Server) MCPSessions(principalID string) int { return s.mcp.sessions.count(principalID) }

// Oversees reports whether p oversees what ownerID owns.
func (s *Server) Oversees(ctx context.Context, p store.Principal, ownerID string) bool {
	return s.host.Oversees(ctx, p, ownerID)
}

// CachedPrincipals reports how many bearer tokens' principals are cached.
func (s *Server) CachedPrincipals() int { return s.host.CachedPrincipals() }

// Held reports how many things principalID holds open.
func (s *Server) Held(principalID string) int { return s.host.Held(principalID) }

// PendingNotices reports how many one-shot banners wait to be shown.
func (s *Server) PendingNotices() int { return s.host.PendingNotices() }

// EndStreams ends the long-lived responses, as shutdown does.
func (s *Server) EndStreams() { s.host.EndStreams() }

// SetNotice keeps a one-shot banner for r's web session.
func (s *Server) SetNotice(w http.ResponseWriter, r *http.Request, msg string) {
	s.host.SetNotice(w, r, msg)
}

// TakeNotice returns and forgets the banner kept for r's web session.
func (s *Server) TakeNotice(w http.ResponseWriter, r *http.Request) string {
	return s.host.TakeNotice(w, r)
}

// HostSessionCookie is the cookie the host sets.
const HostSessionCookie = host.SessionCookie

package server

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

package server

import (
	"log/slog"
	"time"

	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/store"
)

// Config configures a Server. Only Store is required.
type Config struct {
	// DataDir is the data directory (logs, run files, recipes).
	DataDir string
	// Store is the persistence backend. The server does not close it.
	Store store.Store
	// Logger receives structured logs. Secrets never reach it.
	Logger *slog.Logger
	// BaseURL is the externally visible URL (scheme://host:port), used in
	// printed links and for same-origin checks. Empty means the listener's
	// address over http.
	BaseURL string
	// RateLimit is the sustained requests per second allowed per principal
	// (default 100); RateBurst the burst (default 200). A negative RateLimit
	// disables limiting.
	RateLimit float64
	RateBurst int
	// SessionTimeout ends idle MCP sessions (default 30 minutes).
	SessionTimeout time.Duration
	// MaxSessions caps the live MCP sessions one principal may hold
	// (default 32). Opening one more first closes that principal's
	// least recently used idle session; when none is idle the new session
	// is refused with too_many_sessions. A negative value disables the cap.
	MaxSessions int
	// BodyReadTimeout bounds how long reading a request body may take
	// (default 30 seconds); a slower body is cut and its connection
	// closed. Responses, including event and MCP streams, are not bounded
	// by it. A negative value disables it.
	BodyReadTimeout time.Duration
	// SignInRate is how many sign-in attempts per minute one client
	// address may make (default 20, which is also the burst). A negative
	// value disables the limit.
	SignInRate int
	// ShutdownGrace bounds how long in-flight requests may take to finish
	// on shutdown (default 10 seconds).
	ShutdownGrace time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// RunUser is the user Run and tool processes run as when the server
	// runs as root: a user name or numeric "uid:gid" (default "nobody").
	RunUser string
	// Node names this node among the nodes sharing the store: it holds
	// the leases of the Runs it supervises under this name. It must be
	// unique among them and stay the same across restarts (default:
	// the host name and a digest of the data
	// directory, stable across restarts).
	Node string
	// OAuthInsecureClientIDs lets the OAuth authorization server fetch
	// client ID metadata documents over plain http and from loopback and
	// private addresses. For tests and local development only.
	OAuthInsecureClientIDs bool
	// LeaseTTL is the time to live of the lease a node holds on each Run
	// it supervises (default 15 seconds): a Run whose node dies is found
	// lost within about this time and a third.
	LeaseTTL time.Duration
	// Notify configures notifications: the mail server (none: no mail)
	// and how often a node looks for pending items (docs/notifications.md).
	Notify notify.Options
	// RunNetwork is the network Run and tool processes get: "isolated"
	// (the default when empty) gives each a network namespace of its own
	// with loopback only, from which a Run reaches this server alone, at
	// its ASSENT_URL; "host" lets them share the server's network (see
	// run.Config.Network).
	RunNetwork string
	// DecisionDeadlines is how long each kind of decision waits for a
	// person when its request names no deadline, keyed by kind
	// ("command" for command and tool proposals, "proposal" for values
	// staged on controls, "question" for agents' questions); a kind not listed has no deadline unless its
	// request names one. Past its deadline a decision takes its fallback
	// (docs/notifications.md).
	DecisionDeadlines map[string]time.Duration
	// RemindBefore are the points before a decision's deadline at which
	// the people it is routed to are reminded, once each, by mail and
	// webhook (type decision.reminder); none when empty.
	RemindBefore []time.Duration
}

// Kinds of decision a default deadline is set for (Config.DecisionDeadlines).
const (
	// DeadlineCommand is an agent's command or tool proposal.
	DeadlineCommand = "command"
	// DeadlineProposal is a value an agent staged on a control.
	DeadlineProposal = "proposal"
	// DeadlineQuestion is an agent's question (approvals_request) that
	// names neither deadline_seconds nor fallback; it is declined.
	DeadlineQuestion = "question"
	// DeadlineProgram is an agent's proposal to load a Flow program.
	DeadlineProgram = "program"
)

package runs

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Deps is what the Runs part is built on. Every field is needed but
// Config's.
type Deps struct {
	// Gate authenticates requests, lays out pages and says who oversees
	// whom.
	Gate
	Store Stores
	// Bus carries the part's events; SharedBus is set when other nodes
	// share it, so requests about their Runs travel on it as Signals.
	Bus       *event.Bus
	SharedBus bool
	// Tools receives the actors_* tools.
	Tools *tool.Registry
	Log   *slog.Logger
	Now   func() time.Time
	// Web receives the part's pages.
	Web    *host.WebUI
	Config Config
}

// Gate is the part of the server's host the Runs part calls.
type Gate interface {
	// CountRouted counts the decisions of filed that are routed to p
	// (package route), for the inbox badge and runtime_status.
	CountRouted(ctx context.Context, p store.Principal, filed []host.Filed) int
	Authed(next http.Handler) http.Handler
	WebPage(h func(w http.ResponseWriter, r *http.Request, pg host.Page)) http.Handler
	SetNotice(w http.ResponseWriter, r *http.Request, msg string)
	TakeNotice(w http.ResponseWriter, r *http.Request) string
	Oversees(ctx context.Context, p store.Principal, ownerID string) bool
	// Routed refuses (not_routed) a decision by a person it is not
	// routed to (package route).
	Routed(ctx context.Context, p store.Principal, filer, group string) error
	OwnedEvent(typ, ownerID string, data []byte) event.Event
	PrincipalNames(ctx context.Context) map[string]string
	// RevokePrincipal revokes the token of a Run that ended.
	RevokePrincipal(ctx context.Context, id string) error
}

// Stores are the stores the Runs part reads and writes.
type Stores struct {
	store.Audit
	Runs       store.Runs
	Proposals  store.Proposals
	Principals store.Principals
	// Cluster holds the leases by which one node supervises each Run.
	Cluster store.Cluster
	// Backend is the whole store, in which the Runs' tokens are issued as
	// service principals.
	Backend store.Store
	// Deadlines keeps the deadlines of command and tool proposals.
	Deadlines store.Deadlines
}

// Config is the part's share of the server's configuration.
type Config struct {
	// DataDir holds the Runs' files and the recipes.
	DataDir string
	// BaseURL is given to Runs as ASSENT_URL when they share the
	// server's network; a Run with a network of its own gets the
	// loopback address of the run API instead (see run.Config.Network).
	BaseURL string
	// RunUser, Node, LeaseTTL and Network are as in run.Config.
	RunUser  string
	Node     string
	LeaseTTL time.Duration
	Network  string
	// DecisionDeadline is how long a command or tool proposal that names
	// no deadline waits for a person before it is declined; none when
	// zero.
	DecisionDeadline time.Duration
	// Sweep is how often the part looks for proposals past their
	// deadline; DefaultSweep when zero.
	Sweep time.Duration
}

// DefaultSweep is how often the part looks for proposals past their
// deadline.
const DefaultSweep = time.Second

func (d Deps) check() error {
	miss := func(f string) error { return host.MissingDep("runs", f) }
	switch {
	case d.Gate == nil:
		return miss("Gate")
	case d.Store.Audit == nil || d.Store.Runs == nil || d.Store.Proposals == nil || d.Store.Principals == nil || d.Store.Cluster == nil || d.Store.Backend == nil || d.Store.Deadlines == nil:
		return miss("Store")
	case d.Bus == nil:
		return miss("Bus")
	case d.Tools == nil:
		return miss("Tools")
	case d.Log == nil:
		return miss("Log")
	case d.Now == nil:
		return miss("Now")
	case d.Web == nil:
		return miss("Web")
	}
	return nil
}

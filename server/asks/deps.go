package asks

import (
	"context"
	"log/slog"
	"time"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Deps is what the part is built on. Every field is needed but Config's.
type Deps struct {
	// Gate says who oversees whom and addresses the part's events.
	Gate Gate
	// Asks keeps the questions.
	Asks store.Asks
	// Groups says which groups exist, for a question that names one.
	Groups store.Groups
	// Audit records who asked, who decided and which deadlines passed.
	Audit store.Audit
	// Bus carries the part's events, which wake agents waiting in
	// inbox_wait.
	Bus *event.Bus
	// Tools receives approvals_request.
	Tools *tool.Registry
	Log   *slog.Logger
	Now   func() time.Time
	// Config is the part's share of the server's configuration.
	Config Config
}

// Gate is what the part uses of the server's host.
type Gate interface {
	// CountRouted counts the decisions of filed that are routed to p
	// (package route), for the inbox badge and runtime_status.
	CountRouted(ctx context.Context, p store.Principal, filed []host.Filed) int
	Oversees(ctx context.Context, p store.Principal, ownerID string) bool
	OwnedEvent(typ, ownerID string, data []byte) event.Event
	PrincipalNames(ctx context.Context) map[string]string
	// Routed returns nil when p may decide the item filer filed, naming
	// group (or ""), else an error coded not_routed.
	Routed(ctx context.Context, p store.Principal, filer, group string) error
}

// Config is the part's share of the server's configuration.
type Config struct {
	// BaseURL is the server's externally visible URL, for the card's
	// link; empty gives a link relative to the server.
	BaseURL string
	// Sweep is how often the part looks for questions whose deadline
	// passed; 0 means DefaultSweep.
	Sweep time.Duration
	// Limits bound what an agent asks; a zero field keeps its default.
	Limits Limits
	// DefaultDeadline is the deadline of a question that names neither
	// deadline_seconds nor fallback: past it, the question is declined.
	// None when zero, or outside the limits' bounds.
	DefaultDeadline time.Duration
}

// DefaultSweep is how often, by default, questions past their deadline
// are looked for: a deadline takes effect within about this long.
const DefaultSweep = time.Second

func (d Deps) check() error {
	miss := func(f string) error { return host.MissingDep("asks", f) }
	switch {
	case d.Gate == nil:
		return miss("Gate")
	case d.Asks == nil:
		return miss("Asks")
	case d.Groups == nil:
		return miss("Groups")
	case d.Audit == nil:
		return miss("Audit")
	case d.Bus == nil:
		return miss("Bus")
	case d.Tools == nil:
		return miss("Tools")
	case d.Log == nil:
		return miss("Log")
	case d.Now == nil:
		return miss("Now")
	}
	return nil
}

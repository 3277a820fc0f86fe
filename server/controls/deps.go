package controls

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

// Deps is what the controls part is built on. Every field is needed.
type Deps struct {
	// Gate authenticates requests, lays out pages and says who oversees
	// whom.
	Gate
	Store Stores
	// Bus carries the part's events; SharedBus is set when other nodes
	// share it, so the part follows their changes, and Origin marks this
	// node's own events.
	Bus       *event.Bus
	SharedBus bool
	Origin    string
	// Tools receives the controls_* tools.
	Tools *tool.Registry
	Log   *slog.Logger
	Now   func() time.Time
	// Web receives the part's pages.
	Web    *host.WebUI
	Config Config
}

// Gate is the part of the server's host the controls part calls.
type Gate interface {
	// CountRouted counts the decisions of filed that are routed to p
	// (package route), for the inbox badge and runtime_status.
	CountRouted(ctx context.Context, p store.Principal, filed []host.Filed) int
	Authed(next http.Handler) http.Handler
	WebPage(h func(w http.ResponseWriter, r *http.Request, pg host.Page)) http.Handler
	SetNotice(w http.ResponseWriter, r *http.Request, msg string)
	Oversees(ctx context.Context, p store.Principal, ownerID string) bool
	OverseenBy(ctx context.Context, p store.Principal) (seen map[string]bool, names map[string]string, err error)
	OwnedEvent(typ, ownerID string, data []byte) event.Event
	PrincipalNames(ctx context.Context) map[string]string
	FollowOtherNodes(match func(event.Event) bool, handle func(context.Context, event.Event)) (stop func())
	// Routed refuses (not_routed) a decision by a person it is not
	// routed to (package route).
	Routed(ctx context.Context, p store.Principal, filer, group string) error
}

// Stores are the stores the controls part reads and writes.
type Stores struct {
	store.Audit
	// ControlRegistry keeps the registry's proposals, undo histories and
	// hosted forms.
	ControlRegistry store.Controls
	// Settings holds the notes people wrote on the control's proposals,
	// read back for their proposers.
	Settings store.Settings
	// Deadlines, when set, keeps the deadlines of staged values; without
	// it a staged value waits for a person however long it takes.
	Deadlines store.Deadlines
	// Groups, when set, is where a stage's escalate_to group is looked
	// up; without it a stage may not name one.
	Groups store.Groups
}

// Config is the part's share of the server's configuration.
type Config struct {
	// BaseURL is the server's externally visible URL.
	BaseURL string
	// DecisionDeadline is how long a value an agent staged without
	// deadline_seconds waits for a person before it is discarded; none
	// when zero.
	DecisionDeadline time.Duration
	// Sweep is how often the part looks for staged values past their
	// deadline; DefaultSweep when zero.
	Sweep time.Duration
}

// check reports which field of d is missing.
func (d Deps) check() error {
	switch {
	case d.Gate == nil:
		return host.MissingDep("controls", "Gate")
	case d.Store.Audit == nil || d.Store.ControlRegistry == nil || d.Store.Settings == nil:
		return host.MissingDep("controls", "Store")
	case d.Bus == nil:
		return host.MissingDep("controls", "Bus")
	case d.Tools == nil:
		return host.MissingDep("controls", "Tools")
	case d.Log == nil:
		return host.MissingDep("controls", "Log")
	case d.Now == nil:
		return host.MissingDep("controls", "Now")
	case d.Web == nil:
		return host.MissingDep("controls", "Web")
	}
	return nil
}

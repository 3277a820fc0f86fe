package screens

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Deps is what the screens part is built on. Every field is needed but
// Config's.
type Deps struct {
	// Gate authenticates requests, lays out pages and says who oversees
	// whom.
	Gate
	Store Stores
	// Controls holds the screens' fields as private forms.
	Controls Controls
	// Bus carries the part's events; SharedBus is set when other nodes
	// share it, so the part follows their screens, and Origin marks this
	// node's own events.
	Bus       *event.Bus
	SharedBus bool
	Origin    string
	// Streams is done when the server shuts down, ending live feeds.
	Streams context.Context
	// Tools receives show_screen.
	Tools *tool.Registry
	Log   *slog.Logger
	Now   func() time.Time
	// Started is when the server started.
	Started time.Time
	// Web receives the part's pages.
	Web    *host.WebUI
	Config Config
}

// Gate is the part of the server's host the screens part calls.
type Gate interface {
	// CountRouted counts the decisions of filed that are routed to p
	// (package route), for the inbox badge and runtime_status.
	CountRouted(ctx context.Context, p store.Principal, filed []host.Filed) int
	Authed(next http.Handler) http.Handler
	Unauthorized(w http.ResponseWriter, err error)
	Allow(w http.ResponseWriter, p store.Principal) bool
	CheckWebChange(r *http.Request, sess store.Session) *wire.Error
	SameOrigin(r *http.Request) bool
	PrincipalByBearer(ctx context.Context, tok string) (store.Principal, error)
	WebPage(h func(w http.ResponseWriter, r *http.Request, pg host.Page)) http.Handler
	SetNotice(w http.ResponseWriter, r *http.Request, msg string)
	Oversees(ctx context.Context, p store.Principal, ownerID string) bool
	OwnedEvent(typ, ownerID string, data []byte) event.Event
	PrincipalNames(ctx context.Context) map[string]string
	FollowOtherNodes(match func(event.Event) bool, handle func(context.Context, event.Event)) (stop func())
	// Routed refuses (not_routed) a decision by a person it is not
	// routed to (package route).
	Routed(ctx context.Context, p store.Principal, filer, group string) error
}

// Controls is what the screens part asks of the control registry's part.
type Controls interface {
	Registry() *control.Registry
	RegisterPrivateForm(owner, formID string, regs []control.Registration) (remove func(), err error)
}

// Stores are the stores the screens part reads and writes.
type Stores struct {
	// Principals names the owners of screens and the people pressing.
	store.Principals
	// Sessions holds the web sessions whose presses the part checks.
	store.Sessions
	// Screens keeps the screens shown.
	Screens store.Screens
}

// Config is the part's share of the server's configuration.
type Config struct {
	// DataDir holds tools.json, the tools screens' buttons call.
	DataDir string
	// BaseURL is the server's externally visible URL.
	BaseURL string
}

func (d Deps) check() error {
	miss := func(f string) error { return host.MissingDep("screens", f) }
	switch {
	case d.Gate == nil:
		return miss("Gate")
	case d.Store.Principals == nil || d.Store.Sessions == nil || d.Store.Screens == nil:
		return miss("Store")
	case d.Controls == nil:
		return miss("Controls")
	case d.Bus == nil:
		return miss("Bus")
	case d.Streams == nil:
		return miss("Streams")
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

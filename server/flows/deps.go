package flows

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Deps is what the Flows part is built on. Every field is needed but
// Config's and Groups'.
type Deps struct {
	// Gate authenticates requests, lays out pages and says who oversees
	// whom.
	Gate
	Store Stores
	// Controls are the controls the control.apply effect commands.
	Controls Controls
	// Runs starts the Runs of the run.spawn effect.
	Runs Runs
	// Bus carries the part's events.
	Bus *event.Bus
	// Tools receives the flows_* tools, and runs those of tool.call.
	Tools *tool.Registry
	Log   *slog.Logger
	Now   func() time.Time
	// Web receives the part's pages.
	Web    *host.WebUI
	Config Config
	// Groups says who belongs to the groups that programs' approval rules
	// name; nil counts every person who may decide as a member.
	Groups flow.Groups
}

// Gate is the part of the server's host the Flows part calls.
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
}

// Controls is what the Flows part asks of the control registry's part.
type Controls interface {
	Registry() *control.Registry
	Exec(ctx context.Context, p store.Principal, cmd control.Command, cc control.CommandContext) control.Result
	FormVisible(ctx context.Context, p store.Principal, formID string) bool
}

// Runs starts Recipes, reports on Runs and reads Recipes' stored
// definitions; *run.Manager is one.
type Runs interface {
	Spawn(ctx context.Context, ownerID string, req run.SpawnRequest) (*run.Run, error)
	Status(ctx context.Context, ownerID, id string) (*run.Run, error)
	LoadRecipe(stem string) (*run.Recipe, json.RawMessage, error)
}

// Stores are the stores the Flows part reads.
type Stores struct {
	// Principals tells who asks for an effect.
	store.Principals
	// Settings names the demo's agent.
	store.Settings
	// Flows is the kernel's store.
	Flows flow.Store
	// Audit, when set, records people's changes to approvals' values.
	Audit store.Audit
	// Deadlines, when set, keeps the deadlines of proposed programs, so
	// that they survive restarts and every node sees them.
	Deadlines store.Deadlines
}

// Config is the part's share of the server's configuration.
type Config struct {
	// DataDir holds the recipes.
	DataDir string
	// BaseURL is the server's externally visible URL.
	BaseURL string
	// Node names this node on a store several nodes share: the kernel
	// marks the applies it begins with it, so that another node settles
	// them if this one dies mid-apply.
	Node string
	// InterruptedAfter is how old another node's apply mark must be
	// before this node settles it (flow.DefaultInterruptedAfter when 0).
	InterruptedAfter time.Duration
	// DeadlineSweep is how often the part looks for approvals past their
	// deadline; 0 means DefaultDeadlineSweep.
	DeadlineSweep time.Duration
	// ProgramDeadline is how long a proposed program that names no
	// deadline_seconds waits for a person before it is declined; 0 means
	// no deadline.
	ProgramDeadline time.Duration
}

func (d Deps) check() error {
	miss := func(f string) error { return host.MissingDep("flows", f) }
	switch {
	case d.Gate == nil:
		return miss("Gate")
	case d.Store.Principals == nil || d.Store.Settings == nil || d.Store.Flows == nil:
		return miss("Store")
	case d.Controls == nil:
		return miss("Controls")
	case d.Runs == nil:
		return miss("Runs")
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

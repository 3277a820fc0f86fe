package oauth

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// Deps is what the authorization server is built on. Every field is
// needed but BaseURL.
type Deps struct {
	// Gate reads web sessions and request origins, and revokes the
	// principals of revoked clients.
	Gate
	Store Stores
	Log   *slog.Logger
	Now   func() time.Time
	// Web receives the consent page.
	Web *host.WebUI
	// BaseURL is the server's externally visible URL. Without it, OAuth
	// answers only requests whose Host names the address their
	// connection reached.
	BaseURL string
}

// Gate is the part of the server's host the authorization server calls.
type Gate interface {
	WebSession(r *http.Request) (store.Principal, store.Session, bool)
	CheckWebChange(r *http.Request, sess store.Session) *wire.Error
	AnonymousDelay(r *http.Request) time.Duration
	RevokePrincipal(ctx context.Context, id string) error
}

// Stores are the stores the authorization server reads and writes.
type Stores struct {
	store.Principals
	store.Audit
	// OAuth keeps clients, codes and grants.
	OAuth store.OAuth
}

func (d Deps) check() error {
	miss := func(f string) error { return host.MissingDep("oauth", f) }
	switch {
	case d.Gate == nil:
		return miss("Gate")
	case d.Store.Principals == nil || d.Store.Audit == nil || d.Store.OAuth == nil:
		return miss("Store")
	case d.Log == nil:
		return miss("Log")
	case d.Now == nil:
		return miss("Now")
	case d.Web == nil:
		return miss("Web")
	}
	return nil
}

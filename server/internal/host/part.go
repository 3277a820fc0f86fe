package host

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/store"
)

// Part is one part of the server's surface — controls, screens, Runs,
// Flows — built on what it needs of a Host. It registers its own tools
// when it is built; the server mounts its routes and pages.
//
// A part may also implement Inboxer, Counter and io.Closer; the server
// discovers them with a type assertion, the way net/http discovers
// http.Flusher.
type Part interface {
	// Name names the part, in lower case ("controls").
	Name() string
	// Routes registers the part's HTTP routes and web pages on mux.
	Routes(mux *Mux)
}

// Inboxer is a Part that shows a person what waits for their decision.
type Inboxer interface {
	// Inbox returns p's sections of the inbox, in the order they are shown.
	Inbox(ctx context.Context, p store.Principal) ([]InboxSection, error)
}

// Counter is a Part that counts what a principal has waiting, for
// runtime_status and the inbox badge: for a person, the decisions waiting
// on them; for an agent or service, what it filed that waits for a person
// (and its active Runs).
type Counter interface {
	// CountOpen returns how many items p has open, by kind.
	CountOpen(ctx context.Context, p store.Principal) map[string]int
}

// MissingDep is the error of a part built without the dependency named
// field.
func MissingDep(part, field string) error {
	return fmt.Errorf("%s: built without %s", part, field)
}

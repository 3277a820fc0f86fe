package host

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
)

// Supervision: every agent and service principal acts for one or more
// people, its supervisors, fixed when its token is made. A person sees
// what they own and what the principals they supervise own; anyone else
// gets the answer given for a thing that does not exist.

// maxSupervisionCache bounds how many principals' supervisors are kept in
// memory; past it the cache starts over.
const maxSupervisionCache = 10_000

// supervisionCache remembers each principal's supervisors. They are set
// when the principal is created and never change, so an entry never goes
// stale; caching them keeps visibility checks and event audiences off the
// store.
type supervisionCache struct {
	mu sync.Mutex
	m  map[string]supervisedBy
}

// supervisedBy is what the cache knows of one owner.
type supervisedBy struct {
	// ids are the owner's supervisors.
	ids []string
	// inProcess is set when the owner is not a stored principal: an
	// application running in the server's process (the demo, or a Go
	// program embedding assent) that shows what it owns to every person.
	inProcess bool
}

// supervisorsOf returns what is known of ownerID's supervisors. ok is false
// when the store could not be read; nothing is cached then.
func (s *Host) supervisorsOf(ctx context.Context, ownerID string) (sb supervisedBy, ok bool) {
	c := &s.supervision
	c.mu.Lock()
	sb, ok = c.m[ownerID]
	c.mu.Unlock()
	if ok {
		return sb, true
	}
	o, err := s.Store.Principal(ctx, ownerID)
	switch {
	case err == nil:
		sb = supervisedBy{ids: slices.Clone(o.Supervisors)}
	case errors.Is(err, store.ErrNotFound):
		sb = supervisedBy{inProcess: true}
	default:
		return supervisedBy{}, false
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSupervisionCache {
		c.m = map[string]supervisedBy{}
	}
	c.m[ownerID] = sb
	c.mu.Unlock()
	return sb, true
}

// Oversees reports whether p may see what the principal ownerID owns: p
// owns it, or p is a person who supervises ownerID. Unowned things
// (ownerID "") are everyone's, and things an in-process application owns
// are every person's.
func (s *Host) Oversees(ctx context.Context, p store.Principal, ownerID string) bool {
	if ownerID == "" || p.ID == ownerID {
		return true
	}
	if p.Kind != store.KindHuman {
		return false
	}
	sb, ok := s.supervisorsOf(ctx, ownerID)
	return ok && (sb.inProcess || slices.Contains(sb.ids, p.ID))
}

// Audience returns who, besides ownerID itself, may see an event about
// what ownerID owns: its supervisors. For an in-process application's
// things it is nil with people set, since every person sees them. A store
// failure leaves the Audience empty, so the event reaches its owner only.
func (s *Host) Audience(ownerID string) (ids []string, people bool) {
	if ownerID == "" {
		return nil, false
	}
	sb, ok := s.supervisorsOf(context.Background(), ownerID)
	if !ok {
		return []string{}, false
	}
	if sb.inProcess {
		return nil, true
	}
	return sb.ids, false
}

// OwnedEvent returns an event of type typ about what ownerID owns,
// addressed to ownerID and the people who oversee it.
func (s *Host) OwnedEvent(typ, ownerID string, data []byte) event.Event {
	ids, people := s.Audience(ownerID)
	return event.Event{Type: typ, Owner: ownerID, Audience: ids, People: people, Data: data}
}

// OverseenBy returns the ids of the principals p oversees (p itself, and
// for a person the principals it supervises) with every principal's
// name, in one read of the store, for pages that filter many records.
func (s *Host) OverseenBy(ctx context.Context, p store.Principal) (seen map[string]bool, names map[string]string, err error) {
	ps, err := s.Store.ListPrincipals(ctx)
	if err != nil {
		return nil, nil, err
	}
	seen = map[string]bool{p.ID: true}
	names = make(map[string]string, len(ps))
	for _, o := range ps {
		names[o.ID] = o.Name
		if p.Kind == store.KindHuman && slices.Contains(o.Supervisors, p.ID) {
			seen[o.ID] = true
		}
	}
	return seen, names, nil
}

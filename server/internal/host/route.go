package host

import (
	"context"
	"errors"

	"github.com/assent-run/assent/server/route"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Router returns who decisions are routed to, read from the store.
func (s *Host) Router() route.Router {
	return route.Router{Principals: s.Store.Principals, Groups: s.Store.Backend.Groups(), Settings: s.Store.Settings}
}

// Routed returns nil when p may decide the item filer filed, naming
// group (or ""); otherwise a *tool.Error coded not_routed, or the store's
// failure. Parts call it before carrying out a person's decision.
func (s *Host) Routed(ctx context.Context, p store.Principal, filer, group string) error {
	err := s.Router().Check(ctx, p, filer, group)
	var we *wire.Error
	if errors.As(err, &we) {
		return tool.Errorf(string(we.Code), "%s", we.Message)
	}
	if err != nil {
		s.Log.Error("routing a decision", "err", err)
		return StoreUnavailableError()
	}
	return nil
}

// RouteItems sets AskedOf on the decision of every item, and NotRouted
// on those p may not decide. A route the store cannot read refuses the
// decision (and says so), rather than letting anyone decide it.
func (s *Host) RouteItems(ctx context.Context, p store.Principal, items []InboxItem) {
	rt := s.Router()
	type key struct{ filer, group string }
	seen := map[key]route.Route{}
	for _, it := range items {
		d := it.Decision
		if d == nil {
			continue
		}
		k := key{d.ProposedBy, d.Group}
		r, ok := seen[k]
		if !ok {
			var err error
			if r, err = rt.For(ctx, d.ProposedBy, d.Group); err != nil {
				s.Log.Error("routing a decision", "filer", d.ProposedBy, "group", d.Group, "err", err)
				d.NotRouted = StoreUnavailableError()
				continue
			}
			seen[k] = r
		}
		d.AskedOf = r.Label()
		if !r.Allows(p) {
			d.NotRouted = r.Refusal()
		}
	}
}

// RoutedItems returns the items of sections p may see: every item
// without a decision, and those with one routed to p (or decidable by
// p as the owner), each with AskedOf set.
func (s *Host) RoutedItems(ctx context.Context, p store.Principal, sections []InboxSection) []InboxSection {
	for i := range sections {
		s.RouteItems(ctx, p, sections[i].Items)
		var keep []InboxItem
		for _, it := range sections[i].Items {
			if it.Decision == nil || it.Decision.NotRouted == nil {
				keep = append(keep, it)
			}
		}
		sections[i].Items = keep
	}
	return sections
}

// Filed is a decision waiting for a person, as routing sees it: who filed
// it and the group it names ("" when it names none).
type Filed struct{ By, Group string }

// CountRouted counts the decisions of filed that p may decide: those
// RouteItems would leave decidable by p on their cards. It reads each
// route (filer and group) once and builds no card, so the inbox badge and
// runtime_status count what the inbox shows without building it. A route
// the store cannot read counts nothing, as its card refuses the decision.
func (s *Host) CountRouted(ctx context.Context, p store.Principal, filed []Filed) int {
	rt := s.Router()
	allowed := make(map[Filed]bool, len(filed))
	n := 0
	for _, f := range filed {
		ok, seen := allowed[f]
		if !seen {
			r, err := rt.For(ctx, f.By, f.Group)
			if err != nil {
				s.Log.Error("routing a decision", "filer", f.By, "group", f.Group, "err", err)
			}
			ok = err == nil && r.Allows(p)
			allowed[f] = ok
		}
		if ok {
			n++
		}
	}
	return n
}

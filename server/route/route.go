// Package route decides who is asked to decide an item an agent filed: a
// Flow approval, a command or tool proposal, a program proposal, a press
// on a screen, a value staged on a control.
//
// An item goes to the supervisors of the principal that filed it, unless
// it names a group: then to that group's members. A group without
// members, or supervisors who were all revoked, leave the item to the
// workspace's owner. The owner may decide every item; anyone else may
// decide only the items routed to them. An agent whose token named no
// supervisor is supervised by the owner, so its items go to the owner.
// Items filed by a person, by the workspace's own agent (made at first
// start), by an agent supervised by no one, or by an application running
// in the server's process (not a stored principal), are every person's,
// as they are everywhere else in the server; their notifications go to
// the owner.
package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// Router reads who an item goes to from the store.
type Router struct {
	Principals store.Principals
	Groups     store.Groups
	Settings   store.Settings
}

// Route is who an item goes to.
type Route struct {
	// Group is the group the item named, or "".
	Group string
	// People are the ids of the people asked, in order; the owner when
	// nobody else is.
	People []string
	// Names are the names of People, in the same order.
	Names []string
	// Owner is the workspace owner's id ("" before one signs in).
	Owner string
	// Anyone is set for items of an in-process application, which every
	// person may decide.
	Anyone bool
	// ToOwner is set when the item was left to the owner because nobody
	// it names (the group's members, the supervisors) may decide it.
	ToOwner bool
}

// For returns who the item filed by filer and naming group (or "") goes
// to. An unreadable store is an error; unknown principals are not.
func (rt Router) For(ctx context.Context, filer, group string) (Route, error) {
	owner, err := rt.Settings.Setting(ctx, auth.SettingOwner)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Route{}, fmt.Errorf("route: owner: %w", err)
	}
	r := Route{Group: group, Owner: owner}
	if group != "" {
		if r.People, err = rt.Groups.GroupMembers(ctx, group); err != nil {
			return Route{}, fmt.Errorf("route: group %s: %w", group, err)
		}
	} else if filer == "" {
		r.Anyone = true
	} else {
		agent, err := rt.Principals.Principal(ctx, filer)
		switch {
		case errors.Is(err, store.ErrNotFound):
			r.Anyone = true
		case err != nil:
			return Route{}, fmt.Errorf("route: %w", err)
		case agent.Kind == store.KindHuman:
			// A person's own request is not an agent's: whoever the
			// part lets decide it may.
			r.Anyone = true
		case len(agent.Supervisors) == 0:
			// Made before the workspace had an owner: supervised by no
			// one, its items are every person's.
			r.Anyone = true
		case len(agent.Supervisors) == 1 && agent.Supervisors[0] == owner && rt.workspaceAgent(ctx, agent.ID):
			// The workspace's own agent, made at first start: its items
			// are every person's, so that a team can take turns on it.
			r.Anyone = true
		default:
			r.People = slices.Clone(agent.Supervisors)
		}
	}
	// Revoked people are asked of no more.
	people := r.People[:0:0]
	for _, id := range r.People {
		p, err := rt.Principals.Principal(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return Route{}, fmt.Errorf("route: %w", err)
		}
		if p.Kind == store.KindHuman && !p.Revoked {
			people = append(people, id)
			r.Names = append(r.Names, p.Name)
		}
	}
	r.People = people
	if len(r.People) == 0 && owner != "" && !r.Anyone {
		r.People, r.ToOwner = []string{owner}, true
		if p, err := rt.Principals.Principal(ctx, owner); err == nil {
			r.Names = []string{p.Name}
		}
	}
	return r, nil
}

// workspaceAgent reports whether id is the agent the workspace made at its
// first start. An unreadable setting counts as not.
func (rt Router) workspaceAgent(ctx context.Context, id string) bool {
	v, err := rt.Settings.Setting(ctx, auth.SettingAgent)
	return err == nil && v == id
}

// Allows reports whether p may see and decide the item: p is a person,
// and is asked, or is the owner, or the item is anyone's.
func (r Route) Allows(p store.Principal) bool {
	if p.Kind != store.KindHuman || p.Revoked {
		return false
	}
	return r.Anyone || p.ID == r.Owner && r.Owner != "" || slices.Contains(r.People, p.ID)
}

// Label says on a card to whom the item went: "Asked of group finance:
// Cy, Dee" (the group's people; just "Asked of group legal" when it has
// none and the owner decides), "Asked of: Ada, Ben".
func (r Route) Label() string {
	switch {
	case r.Group != "" && (r.ToOwner || len(r.Names) == 0):
		return "Asked of group " + r.Group
	case r.Group != "":
		return "Asked of group " + r.Group + ": " + strings.Join(r.Names, ", ")
	case r.Anyone:
		return "Asked of: any person"
	case len(r.Names) == 0:
		return "Asked of: the workspace's owner"
	}
	return "Asked of: " + strings.Join(r.Names, ", ")
}

// Refusal is the error given to a person an item is not routed to.
func (r Route) Refusal() *wire.Error {
	who := "the agent's supervisors"
	if r.Group != "" {
		who = "group " + r.Group
	}
	people := strings.TrimPrefix(strings.TrimPrefix(r.Label(), "Asked of: "), "Asked of ")
	if r.Group != "" {
		people = strings.Join(r.Names, ", ")
		if r.ToOwner || people == "" {
			people = "no members: the workspace's owner"
		}
	}
	return wire.New(wire.NotRouted, "this decision is asked of "+who+" ("+people+"); only they and the workspace's owner may decide it")
}

// Check returns nil when p may decide the item filed by filer and
// naming group, else a *wire.Error with code not_routed (or the store's
// failure).
func (rt Router) Check(ctx context.Context, p store.Principal, filer, group string) error {
	r, err := rt.For(ctx, filer, group)
	if err != nil {
		return err
	}
	if !r.Allows(p) {
		return r.Refusal()
	}
	return nil
}

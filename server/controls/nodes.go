package controls

import (
	"context"
	"encoding/json"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
)

// Several nodes share one store and one event log. Each node's registry
// holds the controls in memory and writes every change through to the
// store, which refuses a decision taken on a copy another node has made
// out of date (the registry then reads the control again). A change
// another node made reaches this node as its event, stamped with that
// node's origin:
//
//   - control.command (a command that succeeded) and control.value (an
//     edit of a hosted control): the registry reads that one control
//     again from the store;
//   - control.form (a hosted form declared, redeclared or removed): the
//     registry reads that one form again, hosting, replacing or removing
//     it here, and the part records who owns it.
//
// So a person can apply on one node what an agent staged on another, and
// a form an application declared through one node is served by all.

// nodeEvent is what following another node's change needs from a
// control.command, control.value or control.form event.
type nodeEvent struct {
	Origin string `json:"origin"`
	// OK is false for a command that was refused: nothing changed.
	OK       *bool            `json:"ok"`
	Identity control.Identity `json:"identity"`
	FormID   string           `json:"formId"`
}

// followed reports whether an event of type typ is followed.
func followed(typ string) bool {
	switch typ {
	case "control.command", "control.value", "control.form", event.Lagged:
		return true
	}
	return false
}

// followOtherNodes starts following the changes other nodes make. It
// returns at once; Close stops it.
func (s *Part) followOtherNodes() {
	s.stopFollowing = s.FollowOtherNodes(func(e event.Event) bool { return followed(e.Type) }, func(ctx context.Context, e event.Event) {
		if e.Type == event.Lagged {
			s.catchUp(ctx)
			return
		}
		var ne nodeEvent
		if json.Unmarshal(e.Data, &ne) != nil || ne.Origin == "" || ne.Origin == s.Origin || (ne.OK != nil && !*ne.OK) {
			return
		}
		s.follow(ctx, e.Type, ne)
	})
}

// catchUp brings this node up to date after it missed events: every
// hosted form the store keeps, and every control this node holds, are
// read again.
func (s *Part) catchUp(ctx context.Context) {
	saved, err := s.Store.ControlRegistry.LoadControls(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Warn("the saved forms could not be read after missed events", "err", err)
		}
		return
	}
	ids := map[string]bool{}
	for _, f := range saved.Forms {
		ids[f.FormID] = true
	}
	s.formsMu.Lock()
	for id, d := range s.forms {
		if d.hosted {
			ids[id] = true // removed elsewhere, perhaps
		}
	}
	s.formsMu.Unlock()
	for id := range ids {
		if err := s.followForm(ctx, id); err != nil && ctx.Err() == nil {
			s.Log.Warn("a form could not be read again", "form", id, "err", err)
		}
	}
	for _, snap := range s.controls.List(ctx, "") {
		if err := s.controls.Refresh(ctx, snap.Identity.Key()); err != nil && ctx.Err() == nil {
			s.Log.Warn("a control could not be read again", "form", snap.Identity.FormID, "control", snap.Identity.ControlID, "err", err)
		}
	}
}

// follow brings this node up to date with the change ne of another node.
func (s *Part) follow(ctx context.Context, typ string, ne nodeEvent) {
	if typ == "control.form" {
		if ne.FormID == "" {
			return
		}
		if err := s.followForm(ctx, ne.FormID); err != nil && ctx.Err() == nil {
			s.Log.Warn("a form another node declared or removed could not be read again", "form", ne.FormID, "err", err)
		}
		return
	}
	if err := s.controls.Refresh(ctx, ne.Identity.Key()); err != nil && ctx.Err() == nil {
		s.Log.Warn("a control another node changed could not be read again", "form", ne.Identity.FormID, "control", ne.Identity.ControlID, "err", err)
	}
}

// followForm reads the hosted form formID again and records its owner, or
// forgets it when the store no longer holds it. A form id this node uses
// for a screen's fields is left alone.
func (s *Part) followForm(ctx context.Context, formID string) error {
	// Run alone among this node's declarations and removals of the form,
	// so what is recorded below is what the store held.
	unlock, err := s.lockForm(ctx, formID)
	if err != nil {
		return err
	}
	defer unlock()
	screenForm := func() bool {
		d, ok := s.forms[formID]
		return ok && !d.hosted
	}
	s.formsMu.Lock()
	skip := screenForm()
	s.formsMu.Unlock()
	if skip {
		return nil
	}
	// The registry takes each control's lock, which a command on the
	// form may hold while it reads the forms: formsMu is not held here.
	f, ok, err := s.controls.RefreshForm(ctx, formID)
	if err != nil {
		return err
	}
	s.formsMu.Lock()
	defer s.formsMu.Unlock()
	switch {
	case screenForm():
	case ok:
		s.forms[formID] = &formDecl{owner: f.Owner, private: f.Private, hosted: true}
	default:
		delete(s.forms, formID)
	}
	return nil
}

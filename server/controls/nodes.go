package controls

import (
	"context"
	"encoding/json"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
)

// Several nodes share one store and one event log. Each node's registry
// holds the controls in memory and writes every change through to the
// store; a change another node made reaches this node as its
// control.command event, and the registry then reads that control again
// from the store, so a person can apply on one node what an agent staged
// on another.

// originQueue bounds the command events waiting to be followed; past it
// the subscription reports lagged and the controls it missed are read
// again when they are next refreshed.
const originQueue = 1024

// commandEvent is what following another node's change needs from a
// control.command event.
type commandEvent struct {
	Origin   string           `json:"origin"`
	OK       bool             `json:"ok"`
	Identity control.Identity `json:"identity"`
}

// followOtherNodes starts refreshing the controls that other nodes change.
// It returns at once; Close stops it.
func (s *Part) followOtherNodes() {
	ctx, cancel := context.WithCancel(context.Background())
	sub := s.Bus.Subscribe(s.Bus.Seq(), originQueue, func(e event.Event) bool { return e.Type == "control.command" })
	done := make(chan struct{})
	s.stopFollowing = func() {
		cancel()
		sub.Close()
		<-done
	}
	go func() {
		defer close(done)
		for {
			e, err := sub.Next(ctx)
			if err != nil {
				return
			}
			var ce commandEvent
			if json.Unmarshal(e.Data, &ce) != nil || !ce.OK || ce.Origin == "" || ce.Origin == s.origin {
				continue
			}
			if err := s.controls.Refresh(ctx, ce.Identity.Key()); err != nil && ctx.Err() == nil {
				s.Log.Warn("a control another node changed could not be read again", "form", ce.Identity.FormID, "control", ce.Identity.ControlID, "err", err)
			}
		}
	}()
}

// newOrigin returns the id this process stamps on the changes it makes.
func newOrigin() string { return auth.NewID("n_") }

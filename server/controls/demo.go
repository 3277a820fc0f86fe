package controls

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// SeedDemoProposal stages plan = "pro" on the demo profile as agent unless
// a proposal for the plan is already open, the plan is pro already, or a
// person has decided on the plan before (applied, discarded, cleared or
// undone it): seeding puts back what is missing, never a question a
// person answered.
func (s *Part) SeedDemoProposal(ctx context.Context, agent store.Principal) (string, error) {
	id := control.Identity{FormID: "profile", ControlID: "plan"}
	name := id.FormID + "/" + id.ControlID
	for _, snap := range s.controls.Proposals(ctx, id.FormID) {
		if snap.Identity.ControlID == id.ControlID && snap.Identity.Subject == nil {
			return name, nil
		}
	}
	if snap, ok := s.controls.Get(ctx, id); ok && snap.State.Value == "pro" {
		return name, nil
	}
	decided, err := s.personDecided(ctx, id)
	if err != nil {
		return "", fmt.Errorf("controls: seeding the demo proposal: %w", err)
	}
	if decided {
		return name, nil
	}
	res := s.Exec(ctx, agent, control.Command{Action: control.Stage, Identity: id, Value: "pro"},
		control.CommandContext{Source: control.SourceAgent})
	if !res.OK {
		return "", fmt.Errorf("controls: seeding the demo proposal: %s: %s", res.Reason, res.Message)
	}
	return name, nil
}

// personDecided reports whether the audit log holds a person's successful
// apply, discard, clear or undo of the control id.
func (s *Part) personDecided(ctx context.Context, id control.Identity) (bool, error) {
	f := store.AuditFilter{FormID: id.FormID}
	for {
		recs, err := s.Store.ListAudit(ctx, f)
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			if r.ControlID != id.ControlID || r.Subject != "" || !r.OK || r.Source != string(control.SourceUser) {
				continue
			}
			switch control.Action(r.Action) {
			case control.Apply, control.Discard, control.Clear, control.Undo:
				return true, nil
			}
		}
		if len(recs) < f.Max() {
			return false, nil
		}
		f.AfterSeq = recs[len(recs)-1].Seq
	}
}

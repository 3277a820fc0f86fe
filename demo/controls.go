package demo

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/store"
)

// profileForm is the demo's hosted form; its plan is what Seed proposes
// to change.
const profileForm = "profile"

// declareProfile hosts the profile form, unless the store kept it from an
// earlier start with the values people gave it since.
func (a *App) declareProfile(ctx context.Context) error {
	part := a.srv.Controls()
	if part.Hosts(profileForm) {
		return nil
	}
	return part.DeclareForm(ctx, "", profileForm, []controls.HostedControl{
		{ControlID: "displayName", Metadata: control.Metadata{Kind: control.KindText, Label: "Display name", Sensitivity: control.Personal}, Value: "Ada Lovelace"},
		{ControlID: "email", Metadata: control.Metadata{Kind: control.KindEmail, Label: "Email", Sensitivity: control.Personal}, Value: "ada@example.com"},
		{ControlID: "plan", Metadata: control.Metadata{Kind: control.KindSelect, Label: "Plan", Options: []control.Option{
			{Value: "free", Label: "Free"}, {Value: "pro", Label: "Pro"}, {Value: "team", Label: "Team"},
		}}, Value: "free"},
		{ControlID: "apiKey", Metadata: control.Metadata{Kind: control.KindPassword, Label: "API key", Sensitivity: control.Secret}, Value: "sk-demo-not-a-real-key"},
	})
}

// seedProposal stages plan = "pro" on the profile as agent unless a
// proposal for the plan is already open, the plan is pro already, or a
// person has decided on the plan before (applied, discarded, cleared or
// undone it): seeding puts back what is missing, never a question a
// person answered.
func (a *App) seedProposal(ctx context.Context, agent store.Principal) (string, error) {
	part := a.srv.Controls()
	id := control.Identity{FormID: profileForm, ControlID: "plan"}
	name := id.FormID + "/" + id.ControlID
	for _, snap := range part.Registry().Proposals(ctx, id.FormID) {
		if snap.Identity.ControlID == id.ControlID && snap.Identity.Subject == nil {
			return name, nil
		}
	}
	if snap, ok := part.Registry().Get(ctx, id); ok && snap.State.Value == "pro" {
		return name, nil
	}
	decided, err := a.personDecided(ctx, id)
	if err != nil {
		return "", fmt.Errorf("demo: seeding the proposal: %w", err)
	}
	if decided {
		return name, nil
	}
	res := part.Exec(ctx, agent, control.Command{Action: control.Stage, Identity: id, Value: "pro"},
		control.CommandContext{Source: control.SourceAgent})
	if !res.OK {
		return "", fmt.Errorf("demo: seeding the proposal: %s: %s", res.Reason, res.Message)
	}
	return name, nil
}

// personDecided reports whether the audit log holds a person's successful
// apply, discard, clear or undo of the control id.
func (a *App) personDecided(ctx context.Context, id control.Identity) (bool, error) {
	f := store.AuditFilter{FormID: id.FormID}
	for {
		recs, err := a.st.Audit().ListAudit(ctx, f)
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

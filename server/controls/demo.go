package controls

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// SeedDemoProposal stages plan = "pro" on the demo profile as agent unless
// a proposal for the plan is already open.
func (s *Part) SeedDemoProposal(ctx context.Context, agent store.Principal) (string, error) {
	id := control.Identity{FormID: "profile", ControlID: "plan"}
	for _, snap := range s.controls.Proposals(ctx, id.FormID) {
		if snap.Identity.ControlID == id.ControlID && snap.Identity.Subject == nil {
			return id.FormID + "/" + id.ControlID, nil
		}
	}
	res := s.Exec(ctx, agent, control.Command{Action: control.Stage, Identity: id, Value: "pro"},
		control.CommandContext{Source: control.SourceAgent})
	if !res.OK {
		return "", fmt.Errorf("controls: seeding the demo proposal: %s: %s", res.Reason, res.Message)
	}
	return id.FormID + "/" + id.ControlID, nil
}

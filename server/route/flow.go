package route

import (
	"context"
	"slices"

	"github.com/assent-run/assent/flow"
)

// FlowApprovalGroup is the group a Flow approval is routed to: the group
// its transition's approval rule names, or "" when it goes to the
// supervisors of the agent that asked. The inbox, the decision checks and
// the notifications all follow it.
func FlowApprovalGroup(a flow.Approval) string { return a.Group }

// FlowGroups answers the Flow kernel's question whether a person counts
// towards an approval rule that names a group: the group's members do,
// and so does the workspace's owner, who may decide every item. A group
// without members leaves the approval to the owner, as routing does.
type FlowGroups struct{ Router Router }

var _ flow.Groups = FlowGroups{}

// IsMember implements flow.Groups.
func (g FlowGroups) IsMember(ctx context.Context, group, person string) (bool, error) {
	r, err := g.Router.For(ctx, "", group)
	if err != nil {
		return false, err
	}
	return person != "" && (person == r.Owner || slices.Contains(r.People, person)), nil
}

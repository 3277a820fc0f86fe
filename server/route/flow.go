package route

import "github.com/assent-run/assent/flow"

// FlowApprovalGroup is the group a Flow approval is routed to, or "" when
// it goes to the supervisors of the agent that asked. The approval record
// does not carry a group yet; once it does, this returns it, and the
// inbox, the decision checks and the notifications all follow it.
func FlowApprovalGroup(a flow.Approval) string { return "" }

package flows

import "github.com/assent-run/assent/tool"

// Names the external tests reach inside the package.
var (
	WriteDemoDeployRecipes = writeDemoDeployRecipes
	FormatAmount           = formatAmount
	ShowIBAN               = showIBAN
	NormalizeIBAN          = normalizeIBAN
	SummarizeApproval      = (*Part).summarizeApproval
	FlowStart              = (*Part).flowStart
	FlowPrescribe          = (*Part).flowPrescribe
	FlowApply              = (*Part).flowApply
)

// StartRequest is startRequest.
type StartRequest = startRequest

// Payments returns the demo payments_send tool's records.
func Payments(s *Part) []demoPayment {
	s.paymentsMu.Lock()
	defer s.paymentsMu.Unlock()
	return append([]demoPayment(nil), s.payments...)
}

// FlowsListTool returns the flows_list tool.
func FlowsListTool(s *Part) tool.Tool {
	for _, t := range s.flowTools() {
		if t.Name == "flows_list" {
			return t
		}
	}
	panic("no flows_list tool")
}

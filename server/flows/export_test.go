package flows

import "github.com/assent-run/assent/tool"

// SummarizeApproval is the kernel Summarizer the part installs, for the
// external tests.
var SummarizeApproval = (*Part).summarizeApproval

// FlowsListTool returns the flows_list tool.
func FlowsListTool(s *Part) tool.Tool {
	for _, t := range s.flowTools() {
		if t.Name == "flows_list" {
			return t
		}
	}
	panic("no flows_list tool")
}

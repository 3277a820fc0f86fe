package flows

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// flowTools are the MCP tools of the Flows part. Every instance belongs to
// the principal that started it: another agent's instance is not_found.
//
// Annotations: flows_list and flows_inspect only read. flows_prescribe
// writes a prescription (and, when a person must decide, an approval
// request) but changes no instance and nothing outside assent; asking again
// at the same revision files the same approval, so it is idempotent and not
// destructive. flows_apply runs the transition's effect, which may call a
// tool, apply control values or start a Run, so it is destructive and open
// to the world; applying the same prescription again returns the same
// receipt, so it is idempotent.
func (s *Part) flowTools() []tool.Tool {
	return []tool.Tool{
		tool.New(tool.Spec[struct{}]{
			Name:        "flows_list",
			Title:       "List Flows",
			Description: "List the loaded Control Programs (program id, version, fingerprint, objectives, and status: active, or proposed and waiting for a person) and the Flow instances you started, with their phase and revision.",
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
		}, func(ctx context.Context, c tool.Call, _ struct{}) (*tool.Reply[flowsList], error) {
			progs, err := s.flowPrograms(ctx)
			if err != nil {
				return nil, err
			}
			pv := make([]programView, 0, len(progs))
			for _, p := range progs {
				pv = append(pv, s.viewLoadedProgram(ctx, p))
			}
			insts, err := s.visibleInstances(ctx, c.Principal)
			if err != nil {
				return nil, err
			}
			for i := range insts {
				insts[i].ClearPending()
			}
			return tool.Answer(flowsList{Programs: pv, Instances: insts}), nil
		}),
		tool.New(tool.Spec[inspectArgs]{
			Name:  "flows_inspect",
			Title: "Inspect a Flow instance",
			Description: "Return one of your Flow instances: phase, facts, objective, revision, recovery mark, the journal of applies, the receipts of committed transitions and the approvals still waiting for a person. " +
				"Pass approval (an apr-… id from flows_prescribe) to see whether a person approved or declined it, and the receipt.",
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
			Example:     inspectArgs{Instance: exampleInstance},
		}, func(ctx context.Context, c tool.Call, a inspectArgs) (*tool.Reply[instanceView], error) {
			v, err := s.flowInspect(ctx, c.Principal, a.Instance, a.Approval)
			if err != nil {
				return nil, err
			}
			return tool.Answer(v), nil
		}),
		tool.New(tool.Spec[prescribeArgs]{
			Name:  "flows_prescribe",
			Title: "Ask a Flow for the next step",
			Description: "Ask the kernel what to do next on one of your Flow instances. The decision is PRESCRIBED (with a prescription to apply within two minutes), MARKED (objective met), BLOCKED, REFUSED, UNRESOLVED, " +
				"or FRONTIER: awaiting a choice, parameters, or a person. When a person must approve, an approval request is filed in their inbox; wait for the decision with inbox_wait. " +
				"When a person declined the same request, the answer says so with their reason; pass ask_again to file a new approval, or request another transition. " +
				"Name a transition to request it explicitly; pass its parameters here (secret ones are never shown back).",
			Annotations: tool.Annotations{ReadOnly: false, Destructive: false, Idempotent: true, OpenWorld: false},
			Example:     prescribeArgs{Instance: exampleInstance},
		}, func(ctx context.Context, c tool.Call, a prescribeArgs) (*tool.Reply[prescribeAnswer], error) {
			req := flow.Request{Transition: a.Transition, Objective: a.Objective, Parameters: a.Parameters}
			res, err := s.Prescribe(ctx, c.Principal, a.Instance, req)
			if err != nil {
				return nil, err
			}
			s.afterDecline(ctx, c.Principal, a.Instance, req, a.AskAgain, &res)
			out := prescribeAnswer{PrescribeResult: res}
			if res.Decision.Kind == flow.Frontier && res.Approval != nil {
				// A person decides the approval on the instance's page.
				out.URL = strings.TrimRight(s.Config.BaseURL, "/") + "/flows/instances/" + url.PathEscape(a.Instance)
			}
			return &tool.Reply[prescribeAnswer]{Out: out, Decision: out.URL}, nil
		}),
		tool.New(tool.Spec[applyArgs]{
			Name:  "flows_apply",
			Title: "Apply a Flow prescription",
			Description: "Apply a prescription that flows_prescribe issued to you: the kernel re-resolves (STALE_PRESCRIPTION if anything changed, PRESCRIPTION_EXPIRED after two minutes), runs the transition's effect and commits a receipt. " +
				"Applying the same prescription again returns the same receipt. parameters, when given, must be the ones the prescription binds.",
			Annotations: tool.Annotations{ReadOnly: false, Destructive: true, Idempotent: true, OpenWorld: true},
			Example:     applyArgs{Prescription: "prx-0123456789abcdef"},
		}, func(ctx context.Context, c tool.Call, a applyArgs) (*tool.Reply[flow.Receipt], error) {
			r, err := s.Apply(ctx, c.Principal, a.Prescription, a.Parameters)
			if err != nil {
				return nil, err
			}
			return tool.Answer(r), nil
		}),
		s.flowsStartTool(),
		s.flowsProposeTool(),
	}
}

// exampleInstance is the instance the tools' examples name.
const exampleInstance = "exp-lunch-42"

// flowsList is flows_list's answer.
type flowsList struct {
	Programs  []programView   `json:"programs"`
	Instances []flow.Instance `json:"instances"`
}

// inspectArgs are flows_inspect's arguments.
type inspectArgs struct {
	Instance string `json:"instance" minLength:"1" maxLength:"128" jsonschema:"The instance id."`
	Approval string `json:"approval,omitempty" maxLength:"80" jsonschema:"An approval id to report on, whatever its status."`
}

// prescribeArgs are flows_prescribe's arguments.
type prescribeArgs struct {
	Instance   string            `json:"instance" minLength:"1" maxLength:"128"`
	Transition string            `json:"transition,omitempty" maxLength:"300" jsonschema:"A transition to request (local or qualified id)."`
	Objective  string            `json:"objective,omitempty" maxLength:"128" jsonschema:"The objective to pursue, when the instance has none."`
	Parameters map[string]string `json:"parameters,omitempty" jsonschema:"The transition's parameters."`
	AskAgain   bool              `json:"ask_again,omitempty" jsonschema:"After a person declined this request, file a new approval for it instead of reporting the decline."`
}

// applyArgs are flows_apply's arguments.
type applyArgs struct {
	Prescription string            `json:"prescription" minLength:"1" maxLength:"80" jsonschema:"The prx-… id."`
	Parameters   map[string]string `json:"parameters,omitempty"`
}

// flowsStartTool starts a Flow instance, by the path and the checks of
// POST /v1/flows/instances. It writes a new instance and nothing outside
// assent; calling it twice starts two instances (or, with the same id, is
// refused as already_exists), so it is not idempotent.
func (s *Part) flowsStartTool() tool.Tool {
	return tool.New(tool.Spec[StartRequest]{
		Name:  "flows_start",
		Title: "Start a Flow instance",
		Description: "Start an instance of a loaded Control Program (see flows_list for programs and their phases), owned by you. Use it to begin a process the program governs, such as an expense to be approved and paid; then ask flows_prescribe for the next step. " +
			"An agent starts in one of the program's entry phases and gives only the facts a starter knows, never ones the program's transitions establish (an approval, a payment); the program's own start check may refuse or complete the facts. " +
			`id is optional (letters, digits, '.', '_', '-'; one is made up when left out). facts maps a facet to {"status", "value"?}, status being known, unknown or absent (or stale, ambiguous, conflicting). ` +
			`Example: {"program": "expense-approval", "phase": "draft", "id": "exp-lunch-42", "facts": {"expense.amount": {"status": "known", "value": "86.50 EUR"}, "expense.description": {"status": "known", "value": "Team lunch"}}, "objective": "expense-paid"}`,
		Annotations: tool.Annotations{ReadOnly: false, Destructive: false, Idempotent: false, OpenWorld: false},
		Example: StartRequest{Program: "expense-approval", Phase: "draft", ID: exampleInstance, Objective: "expense-paid", Facts: map[string]flow.Fact{
			"expense.amount": {Status: flow.StatusKnown, Value: "86.50 EUR"}, "expense.description": {Status: flow.StatusKnown, Value: "Team lunch"}}},
	}, func(ctx context.Context, c tool.Call, req StartRequest) (*tool.Reply[flow.Instance], error) {
		inst, err := s.Start(ctx, c.Principal, req)
		if err != nil {
			return nil, err
		}
		inst.ClearPending()
		return tool.Answer(inst), nil
	})
}

// prescribeAnswer is flows_prescribe's answer: the decision and, when an
// approval awaits a person, the page where they decide it.
type prescribeAnswer struct {
	PrescribeResult
	URL string `json:"url,omitempty"`
}

// afterDecline completes a prescribe answer that found a person's approval
// request. Pending, it names inbox_wait. Declined, it reports the decline
// and its reason and what the requester can do next, instead of sending it
// back to the inbox; with askAgain it files a new approval request for a
// person to decide.
func (s *Part) afterDecline(ctx context.Context, p store.Principal, instance string, req flow.Request, askAgain bool, res *PrescribeResult) {
	a := res.Approval
	if a == nil {
		return
	}
	switch a.Status {
	case flow.ApprovalPending:
		if a.People() > 1 {
			res.Next += fmt.Sprintf("; it needs %d different people to approve, %d approved so far", a.People(), len(a.Approvers))
		}
		res.Next += fmt.Sprintf(`; or wait for the decision with inbox_wait {"items":[{"approval":%q}]}`, a.ID)
		return
	case flow.ApprovalDeclined:
	default:
		return
	}
	if !askAgain {
		reason := a.Reason
		if reason == "" {
			reason = "no reason given"
		}
		res.Next = fmt.Sprintf("a person declined %s (approval %s): %q. Nothing was applied. "+
			"Ask again only if something changed: prescribe with \"ask_again\": true to file a new approval request; or request another transition",
			a.Transition, a.ID, reason)
		if others := slices.DeleteFunc(slices.Clone(res.Decision.Candidates), func(t string) bool { return t == a.Transition }); len(others) > 0 {
			res.Next += " (" + host.JoinOr(others, "") + ")"
		}
		return
	}
	if err := s.checkApprovalRoom(ctx, p, instance, a.Transition); err != nil {
		res.Next = "a person declined this before, and asking again was refused: " + err.Error()
		return
	}
	na, err := s.flows.RequestApprovalAgain(ctx, instance, flowPrincipal(p), req)
	if err != nil {
		res.Next = "a person declined this before, and asking again failed: " + flowError(err).Error()
		return
	}
	res.Approval = &na
	res.Next = fmt.Sprintf(`a person declined this before; a new approval request %s is filed for a person to decide in the web inbox; wait for the decision with inbox_wait {"items":[{"approval":%q}]}`, na.ID, na.ID)
	s.publishFlow("flow.approval", p.ID, map[string]any{"approval": na.ID, "instance": na.Instance, "status": na.Status})
}

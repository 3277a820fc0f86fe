package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/assent-run/assent/flow"
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
func (s *Server) flowTools() []tool.Tool {
	return []tool.Tool{
		{
			Name:         "flows_list",
			Title:        "List Flows",
			Description:  "List the loaded Control Programs (program id, version, fingerprint, objectives, and status: active, or proposed and waiting for a person) and the Flow instances you started, with their phase and revision.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
			OutputSchema: flowsListSchema,
			Annotations:  tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var none struct{}
				if err := tool.DecodeArgs(c.Args, &none); err != nil {
					return nil, err
				}
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
					insts[i].Pending = ""
				}
				return &tool.Result{Structured: map[string]any{"programs": pv, "instances": insts}}, nil
			},
		},
		{
			Name:  "flows_inspect",
			Title: "Inspect a Flow instance",
			Description: "Return one of your Flow instances: phase, facts, objective, revision, recovery mark, the journal of applies, the receipts of committed transitions and the approvals still waiting for a person. " +
				"Pass approval (an apr-… id from flows_prescribe) to see whether a person approved or declined it, and the receipt.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{
  "instance":{"type":"string","minLength":1,"maxLength":128,"description":"The instance id."},
  "approval":{"type":"string","maxLength":80,"description":"An approval id to report on, whatever its status."}},
  "required":["instance"],"additionalProperties":false}`),
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var a struct {
					Instance string `json:"instance"`
					Approval string `json:"approval"`
				}
				if err := tool.DecodeArgs(c.Args, &a); err != nil {
					return nil, err
				}
				v, err := s.flowInspect(ctx, c.Principal, a.Instance, a.Approval)
				if err != nil {
					return nil, err
				}
				return &tool.Result{Structured: v}, nil
			},
		},
		{
			Name:  "flows_prescribe",
			Title: "Ask a Flow for the next step",
			Description: "Ask the kernel what to do next on one of your Flow instances. The decision is PRESCRIBED (with a prescription to apply within two minutes), MARKED (objective met), BLOCKED, REFUSED, UNRESOLVED, " +
				"or FRONTIER: awaiting a choice, parameters, or a person. When a person must approve, an approval request is filed in their inbox; wait for the decision with inbox_wait. " +
				"When a person declined the same request, the answer says so with their reason; pass ask_again to file a new approval, or request another transition. " +
				"Name a transition to request it explicitly; pass its parameters here (secret ones are never shown back).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{
  "instance":{"type":"string","minLength":1,"maxLength":128},
  "transition":{"type":"string","maxLength":300,"description":"A transition to request (local or qualified id)."},
  "objective":{"type":"string","maxLength":128,"description":"The objective to pursue, when the instance has none."},
  "parameters":{"type":"object","additionalProperties":{"type":"string"},"description":"The transition's parameters."},
  "ask_again":{"type":"boolean","description":"After a person declined this request, file a new approval for it instead of reporting the decline."}},
  "required":["instance"],"additionalProperties":false}`),
			OutputSchema: flowsPrescribeSchema,
			Annotations:  tool.Annotations{ReadOnly: false, Destructive: false, Idempotent: true, OpenWorld: false},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var a struct {
					Instance   string            `json:"instance"`
					Transition string            `json:"transition"`
					Objective  string            `json:"objective"`
					Parameters map[string]string `json:"parameters"`
					AskAgain   bool              `json:"ask_again"`
				}
				if err := tool.DecodeArgs(c.Args, &a); err != nil {
					return nil, err
				}
				req := flow.Request{Transition: a.Transition, Objective: a.Objective, Parameters: a.Parameters}
				res, err := s.flowPrescribe(ctx, c.Principal, a.Instance, req)
				if err != nil {
					return nil, err
				}
				s.afterDecline(ctx, c.Principal, a.Instance, req, a.AskAgain, &res)
				out := prescribeAnswer{prescribeResult: res}
				if res.Decision.Kind == flow.Frontier && res.Approval != nil {
					// A person decides the approval on the instance's page.
					out.URL = strings.TrimRight(s.cfg.BaseURL, "/") + "/flows/instances/" + url.PathEscape(a.Instance)
				}
				return &tool.Result{Structured: out}, nil
			},
		},
		{
			Name:  "flows_apply",
			Title: "Apply a Flow prescription",
			Description: "Apply a prescription that flows_prescribe issued to you: the kernel re-resolves (STALE_PRESCRIPTION if anything changed, PRESCRIPTION_EXPIRED after two minutes), runs the transition's effect and commits a receipt. " +
				"Applying the same prescription again returns the same receipt. parameters, when given, must be the ones the prescription binds.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{
  "prescription":{"type":"string","minLength":1,"maxLength":80,"description":"The prx-… id."},
  "parameters":{"type":"object","additionalProperties":{"type":"string"}}},
  "required":["prescription"],"additionalProperties":false}`),
			Annotations: tool.Annotations{ReadOnly: false, Destructive: true, Idempotent: true, OpenWorld: true},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var a struct {
					Prescription string            `json:"prescription"`
					Parameters   map[string]string `json:"parameters"`
				}
				if err := tool.DecodeArgs(c.Args, &a); err != nil {
					return nil, err
				}
				r, err := s.flowApply(ctx, c.Principal, a.Prescription, a.Parameters)
				if err != nil {
					return nil, err
				}
				return &tool.Result{Structured: r}, nil
			},
		},
	}
}

// prescribeAnswer is flows_prescribe's answer: the decision and, when an
// approval awaits a person, the page where they decide it.
type prescribeAnswer struct {
	prescribeResult
	URL string `json:"url,omitempty"`
}

// Output schemas of the flows_* tools.
var (
	flowsListSchema = json.RawMessage(`{"type":"object","properties":{
"programs":{"type":["array","null"],"items":{"type":"object"}},
"instances":{"type":["array","null"],"items":{"type":"object"}}},
"required":["programs","instances"],"additionalProperties":true}`)
	flowsPrescribeSchema = json.RawMessage(`{"type":"object","properties":{
"decision":{"type":"object","description":"the kernel's decision; its kind is PRESCRIBED, MARKED, BLOCKED, REFUSED, UNRESOLVED or FRONTIER"},
"approval":{"type":"object","description":"the approval request filed for a person"},
"next":{"type":"string","description":"what the caller can do now"},
"url":{"type":"string","description":"page where a person decides the approval"}},
"required":["decision"],"additionalProperties":true}`)
)

// afterDecline completes a prescribe answer that found a person's approval
// request. Pending, it names inbox_wait. Declined, it reports the decline
// and its reason and what the requester can do next, instead of sending it
// back to the inbox; with askAgain it files a new approval request for a
// person to decide.
func (s *Server) afterDecline(ctx context.Context, p store.Principal, instance string, req flow.Request, askAgain bool, res *prescribeResult) {
	a := res.Approval
	if a == nil {
		return
	}
	switch a.Status {
	case flow.ApprovalPending:
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
			res.Next += " (" + joinOr(others, "") + ")"
		}
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

package flows

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// programLoad is what loading a program by POST /v1/flows/programs or
// flows_program_propose did: the program as stored, whether it waits for
// a person, and when it is declined if nobody decides it.
type programLoad struct {
	prog     *flow.Program
	view     programView
	proposed bool
	due      time.Time
}

// loadProgram loads the program src on behalf of pr, the one path of the
// HTTP route and the MCP tool. A person, or a service granted flow.load,
// loads it active; anyone else proposes it: the proposal's bounds are
// checked, its deadline (seconds, else the server's default) stored
// before it, and the people who decide are told. why is the reason the
// caller gave, already checked with tool.CheckReason.
func (s *Part) loadProgram(ctx context.Context, pr store.Principal, src []byte, why string, seconds int64) (programLoad, error) {
	var due time.Time
	if proposes(pr) {
		s.proposeMu.Lock()
		defer s.proposeMu.Unlock()
		if err := s.checkProposal(ctx, pr, src); err != nil {
			return programLoad{}, err
		}
		// The deadline is written before the proposal, so that a proposal
		// is never kept without it.
		filed := s.Now().UTC()
		due = s.programDeadline(seconds, filed)
		if err := s.fileProgramDeadline(ctx, src, due, filed); err != nil {
			return programLoad{}, err
		}
	}
	p, load, err := s.flows.LoadProgram(ctx, src, flowPrincipal(pr), flow.WithWhy(why))
	if err != nil {
		return programLoad{}, err
	}
	if load.Status != flow.ProgramProposed && !due.IsZero() {
		// Already active: nothing waits for a decision.
		s.dropProgramDeadline(ctx, p.Fingerprint())
		due = time.Time{}
	}
	out := programLoad{prog: p, view: s.viewLoadedProgram(ctx, p), proposed: load.Status != flow.ProgramActive, due: due}
	if out.proposed {
		s.publishFlow("flow.approval", pr.ID, map[string]any{"program": p.Fingerprint(), "status": load.Status})
	}
	return out, nil
}

// programsInboxURL is the section of the web inbox where a person decides proposed
// programs.
func (s *Part) programsInboxURL() string {
	return strings.TrimSuffix(s.Config.BaseURL, "/") + "/inbox#section-flow-programs"
}

// proposeArgs are flows_program_propose's arguments. reason and
// deadline_seconds are checked by the tool, not the schema, so that their
// refusals carry the codes of POST /v1/flows/programs.
type proposeArgs struct {
	Program         string `json:"program" minLength:"1" jsonschema:"The Control Program: its JSON document as text, exactly as POST /v1/flows/programs takes it."`
	Reason          string `json:"reason,omitempty" jsonschema:"Why you propose it, in a sentence the person reads on the card (at most 500 characters)."`
	DeadlineSeconds int64  `json:"deadline_seconds,omitempty" jsonschema:"Seconds a person has to decide before the proposal is declined with the reason 'no decision before the deadline' (1 to 2592000, 30 days); leave it out for the server's default."`
}

// proposeAnswer is flows_program_propose's answer.
type proposeAnswer struct {
	// Status is "proposed" while the program waits for a person, "active"
	// when it was loaded (by a person or a service granted flow.load, or
	// approved before).
	Status      string      `json:"status"`
	Fingerprint string      `json:"fingerprint"`
	Program     programView `json:"program"`
	// Deadline is when the proposal is declined if no person decides it;
	// absent when it has none.
	Deadline    time.Time   `json:"deadline,omitzero"`
	URL         string      `json:"url,omitempty"`
	Next        string      `json:"next"`
	NextActions []tool.Next `json:"next_actions"`
}

// exampleProgram is the program flows_program_propose's example proposes.
const exampleProgram = `{"schema_version": 1, "program_id": "door", "program_version": "1", "requires_runtime": ">=0.1.0",
 "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
 "owned_resources": [],
 "objective_contracts": [{"objective": "open", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["open"]}]}],
 "transitions": [{"id": "open", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["closed"], "target_phases": ["open"],
  "authority": ["agent"], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
  "assignments": [{"facet": "door.state", "value": "open"}],
  "prescription": {"operation": "open", "expected_postcondition": "the door is open"}}]}`

// flowsProposeTool proposes a Control Program by the path and the checks
// of POST /v1/flows/programs. It stores a program and a proposal but
// changes nothing outside assent and starts nothing until a person
// approves; proposing the same program again files nothing new, so it is
// idempotent.
func (s *Part) flowsProposeTool() tool.Tool {
	return tool.New(tool.Spec[proposeArgs]{
		Name:  "flows_program_propose",
		Title: "Propose a Control Program",
		Description: "Propose a Control Program (its JSON document, as text) for a person to load. It is checked strictly, fingerprinted and filed in the people's web inbox; it starts nothing until a person approves it. " +
			"The answer gives its fingerprint and status (proposed, or active when it is already loaded) and the deadline, if any, after which it is declined when nobody decides. " +
			`Wait for the decision with inbox_wait {"items":[{"program":"<fingerprint>"}]}; once active, start instances with flows_start. ` +
			"Give reason, the sentence the person reads, and deadline_seconds to bound the wait.",
		Annotations: tool.Annotations{ReadOnly: false, Destructive: false, Idempotent: true, OpenWorld: false},
		Example:     proposeArgs{Program: exampleProgram, Reason: "Let visitors in without waiting for the desk", DeadlineSeconds: 86400},
	}, func(ctx context.Context, c tool.Call, a proposeArgs) (*tool.Reply[proposeAnswer], error) {
		out, err := s.proposeProgram(ctx, c.Principal, []byte(a.Program), a.Reason, a.DeadlineSeconds)
		if err != nil {
			return nil, err
		}
		return &tool.Reply[proposeAnswer]{Out: out, Decision: out.URL}, nil
	})
}

// proposeProgram proposes the program src on behalf of p with the checks
// of flows_program_propose: a person, or a service granted flow.load,
// loads it active; anyone else files it for a person to approve, with
// reason shown on the card and a deadline of deadlineSeconds (0 for the
// server's default). Errors carry the codes of POST /v1/flows/programs.
func (s *Part) proposeProgram(ctx context.Context, p store.Principal, src []byte, reason string, deadlineSeconds int64) (proposeAnswer, error) {
	if len(src) > flow.MaxDocumentSize {
		return proposeAnswer{}, tool.Errorf("too_large", "a program is at most %d bytes", flow.MaxDocumentSize)
	}
	why, rerr := tool.CheckReason(reason)
	if rerr != nil {
		return proposeAnswer{}, rerr
	}
	if deadlineSeconds < 0 || deadlineSeconds > flow.MaxApprovalDeadline {
		return proposeAnswer{}, tool.Errorf("invalid_request", "deadline_seconds must be a whole number of seconds from 1 to %d (30 days); leave it out for the server's default", flow.MaxApprovalDeadline)
	}
	l, err := s.loadProgram(ctx, p, src, why, deadlineSeconds)
	if err != nil {
		return proposeAnswer{}, flowError(err)
	}
	fp := l.prog.Fingerprint()
	out := proposeAnswer{Status: "active", Fingerprint: fp, Program: l.view, Deadline: l.due}
	if !l.proposed {
		out.Next = fmt.Sprintf("%s is active: start an instance with flows_start", l.prog.ID())
		out.NextActions = []tool.Next{tool.NextCall("flows_list", nil)}
		return out, nil
	}
	out.Status = "proposed"
	out.URL = s.programsInboxURL()
	out.Next = "Loading a program is a person's act: a person must approve " + l.prog.ID() + " in the web inbox before it starts anything. Wait for the decision with inbox_wait"
	if !l.due.IsZero() {
		out.Next += "; it is declined if nobody decides by " + l.due.Format(time.RFC3339)
	}
	out.NextActions = []tool.Next{tool.NextCall("inbox_wait", map[string]any{"items": []any{map[string]any{"program": fp}}})}
	return out, nil
}

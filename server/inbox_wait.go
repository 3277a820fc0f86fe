package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/asks"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Limits of inbox_wait.
const (
	waitDefault  = 60 * time.Second
	waitMax      = 5 * time.Minute
	waitMaxItems = 50
	// waitRecheck is how often pending command proposals are looked at
	// again, for a decision this process did not hear of (one made by
	// another process on the same store).
	waitRecheck = 2 * time.Second
	// waitReplay bounds the events a wait reads from the bus's replay
	// buffer to learn what became of proposals staged before it started.
	waitReplay = 4096
)

// Outcomes of a waited-on item.
const (
	outcomePending   = "pending"
	outcomeApplied   = "applied"
	outcomeDiscarded = "discarded"
	outcomeApproved  = "approved"
	outcomeDeclined  = "declined"
	outcomeStale     = "stale"
	outcomeNotFound  = "not_found"
)

// waitItem names one thing an agent waits on: exactly one of Proposal (a
// control proposal, optionally at Revision), Approval or CommandProposal.
type waitItem struct {
	Proposal        *control.Identity `json:"proposal,omitempty"`
	Revision        int64             `json:"revision,omitempty" minimum:"1" jsonschema:"The proposal's revision, from the stage result; default: your newest proposal for the control."`
	Approval        string            `json:"approval,omitempty" maxLength:"80"`
	CommandProposal string            `json:"command_proposal,omitempty" maxLength:"128"`
	// Screen names a screen whose press, filed from a screen view, a
	// person confirms or declines.
	Screen string `json:"screen,omitempty" maxLength:"128"`
	// Program names, by fingerprint, a Flow program you proposed to load.
	Program string `json:"program,omitempty" maxLength:"128"`
	// NotesSeen is how many of the item's replies (notes sent without
	// deciding) you have read; a newer one ends the wait. Default: the
	// replies there when the wait starts.
	NotesSeen *int `json:"notes_seen,omitempty" minimum:"0" maximum:"1000" jsonschema:"How many of the item's replies (notes with decision respond) you have read; a newer reply ends the wait. Default: the replies there when the wait starts."`
}

// inboxWaitArgs are inbox_wait's arguments.
type inboxWaitArgs struct {
	Items     []waitItem `json:"items" minItems:"1" maxItems:"50"`
	TimeoutMs *int64     `json:"timeout_ms,omitempty" type:"integer" minimum:"0" maximum:"300000"`
}

// inboxWaitAnswer is inbox_wait's answer.
type inboxWaitAnswer struct {
	// Items are the items in the order asked, each with its outcome.
	Items []waitOutcome `json:"items"`
	// Pending counts the items still waiting for a person.
	Pending  int  `json:"pending"`
	TimedOut bool `json:"timed_out"`
}

// waitOutcome is what became of one item.
type waitOutcome struct {
	Kind      string   `json:"kind"`
	ID        string   `json:"id"`
	Status    string   `json:"status"`
	Revision  int64    `json:"revision,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Changed   []string `json:"changed,omitempty"`
	DecidedBy string   `json:"decided_by,omitempty"`
	Receipt   string   `json:"receipt,omitempty"`
	Next      string   `json:"next,omitempty"`
	// Notes are what people wrote to you on the item, oldest first: a
	// note with a decision, or an answer sent without deciding.
	Notes []inboxNote `json:"notes,omitempty"`

	// Answer is a person's answer to a question from approvals_request.
	Answer string `json:"answer,omitempty"`
}

func (o waitOutcome) decided() bool { return o.Status != outcomePending }

// initInboxWait registers the inbox_wait tool.
func (s *Server) initInboxWait(context.Context) error {
	return s.host.Tools.Register(s.inboxWaitTool())
}

// inboxWaitTool lets an agent wait for people's decisions instead of
// polling. It only reads, changes nothing, and answers from assent's own
// state, so it is read-only, idempotent and closed-world.
func (s *Server) inboxWaitTool() tool.Tool {
	return tool.New(tool.Spec[inboxWaitArgs]{
		Name:  "inbox_wait",
		Title: "Wait for a person's decisions",
		Description: "Wait until a person has decided every item, or has written to you on one, or one is escalated to a group at its first deadline, or timeout_ms passes (default 60000, at most 300000), then return each item's outcome: " +
			"pending, applied (with changed, when a person edited your value first), discarded, approved, declined (with the person's reason), stale or not_found, with the notes people wrote to you on it. Items: " +
			`{"proposal":{"formId","controlId","subject"?},"revision"?} for a control value you staged, {"approval":"apr-…"} for a Flow approval from flows_prescribe, ` +
			`{"approval":"ask_…"} for a question from approvals_request (answered, with answer, or declined), {"command_proposal":"<id>"} for a command or tool proposal, {"screen":"<screen id>"} for a press of a screen's button that a person confirms (approved, failed or declined), {"program":"<fingerprint>"} for a Flow program you proposed to load (approved or declined). Only your own items are reported; anything else is not_found.`,
		Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
		Example:     inboxWaitArgs{Items: []waitItem{{Approval: "apr-0123456789abcdef"}}, TimeoutMs: new(int64)},
	}, func(ctx context.Context, c tool.Call, a inboxWaitArgs) (*tool.Reply[inboxWaitAnswer], error) {
		// The schema bounds timeout_ms by waitMax.
		timeout := waitDefault
		if a.TimeoutMs != nil {
			timeout = time.Duration(*a.TimeoutMs) * time.Millisecond
		}
		if err := checkWaitItems(a.Items); err != nil {
			return nil, err
		}
		out, timedOut, err := s.inboxWait(ctx, c.Principal, a.Items, timeout)
		if err != nil {
			return nil, err
		}
		pending := 0
		for _, o := range out {
			if !o.decided() {
				pending++
			}
		}
		return tool.Answer(inboxWaitAnswer{Items: out, Pending: pending, TimedOut: timedOut}), nil
	})
}

// inboxWait evaluates items for p until every one is decided or timeout
// passes, waking on the event bus. It reports whether the timeout passed.
// The caller's cancellation is an error; the server shutting down ends the
// wait with the outcomes so far.
func (s *Server) inboxWait(ctx context.Context, p store.Principal, items []waitItem, timeout time.Duration) ([]waitOutcome, bool, error) {
	// wctx bounds the waiting; ctx, the caller's, the reading of state.
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(s.host.Streams, cancel)
	defer stop()

	hist := newProposalHistory()
	after := s.host.Bus.Seq()
	proposals, commands := false, false
	for _, it := range items {
		proposals = proposals || it.Proposal != nil
		commands = commands || it.CommandProposal != ""
	}
	replayTo := int64(0)
	if proposals {
		// Read what is still in the replay buffer, so a proposal decided
		// before the wait started reports its outcome.
		replayTo, after = after, max(0, after-waitReplay)
	}
	sub := s.host.Bus.Subscribe(after, waitReplay+256, nil)
	defer sub.Close()
	for replayTo > 0 {
		e, err := sub.Next(wctx)
		if err != nil {
			break
		}
		hist.observe(p, e)
		if e.Seq >= replayTo {
			break
		}
	}

	notify := progressOf(ctx)
	reported := 0
	var noted []int      // notes per item when the wait started
	var escalated []bool // items escalated when the wait started
	for {
		out, err := s.waitOutcomes(ctx, p, items, hist)
		if err != nil {
			return nil, false, err
		}
		// A person's reply without deciding ends the wait too, so the agent
		// reads it while the item still waits for a decision. (A note
		// sent with a decision arrives with the decision's outcome.) So
		// does an item's escalation to a group at its first deadline: the
		// agent hears who decides now, and by when.
		answered := false
		for i, o := range out {
			if noted == nil {
				continue
			}
			answered = answered || replies(o.Notes) > noted[i] || (!o.decided() && isEscalated(o) && !escalated[i])
		}
		if noted == nil {
			noted = make([]int, len(out))
			escalated = make([]bool, len(out))
			for i, o := range out {
				escalated[i] = isEscalated(o)
				noted[i] = replies(o.Notes)
				if n := items[i].NotesSeen; n != nil {
					noted[i] = min(*n, noted[i])
					answered = answered || replies(o.Notes) > *n
				}
			}
		}
		if answered {
			return out, false, nil
		}
		decided, recheck := 0, false
		for i, o := range out {
			if o.decided() {
				decided++
			} else {
				recheck = recheck || items[i].CommandProposal != ""
			}
		}
		if decided == len(out) {
			return out, false, nil
		}
		if decided > reported && notify != nil {
			notify(ctx, decided, len(out))
		}
		reported = max(reported, decided)
		if err := s.waitEvent(wctx, p, sub, hist, recheck && commands); err != nil {
			if perr := ctx.Err(); perr != nil {
				return nil, false, perr
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, event.ErrClosed) {
				// Timeout or shutdown: the outcomes as they are now.
				out, err := s.waitOutcomes(ctx, p, items, hist)
				return out, true, err
			}
			return nil, false, err
		}
	}
}

// replies counts the notes sent without deciding.
func replies(notes []inboxNote) int {
	n := 0
	for _, x := range notes {
		if x.Decision == "respond" {
			n++
		}
	}
	return n
}

// waitEvent blocks until an event that may change an outcome arrives, or,
// with recheck, until waitRecheck passes.
func (s *Server) waitEvent(ctx context.Context, p store.Principal, sub *event.Subscription, hist *proposalHistory, recheck bool) error {
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if recheck {
			wctx, cancel = context.WithTimeout(ctx, waitRecheck)
		}
		e, err := sub.Next(wctx)
		cancel()
		if err != nil {
			if recheck && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		if !e.VisibleTo(p.ID, p.Kind == store.KindHuman) && e.Type != event.Lagged {
			continue
		}
		hist.observe(p, e)
		if e.Type == event.Lagged || strings.HasPrefix(e.Type, "control.") || strings.HasPrefix(e.Type, "flow.") || strings.HasPrefix(e.Type, "run.") || strings.HasPrefix(e.Type, "screen.") || strings.HasPrefix(e.Type, "question.") || e.Type == "inbox.note" {
			return nil
		}
	}
}

// waitOutcomes evaluates every item now.
func (s *Server) waitOutcomes(ctx context.Context, p store.Principal, items []waitItem, hist *proposalHistory) ([]waitOutcome, error) {
	out := make([]waitOutcome, 0, len(items))
	for _, it := range items {
		var o waitOutcome
		var err error
		switch {
		case it.Proposal != nil:
			o = s.proposalOutcome(ctx, p, *it.Proposal, it.Revision, hist)
		case isQuestion(it.Approval):
			o, err = s.questionOutcome(ctx, p, it.Approval)
		case it.Approval != "":
			o, err = s.approvalOutcome(ctx, p, it.Approval)
		case it.Screen != "":
			o = s.screenPressOutcome(ctx, p, it.Screen)
		case it.Program != "":
			o, err = s.programOutcome(ctx, p, it.Program)
		default:
			o, err = s.commandProposalOutcome(ctx, p, it.CommandProposal)
		}
		if err != nil {
			return nil, err
		}
		if id := s.noteItemID(ctx, p, it, o); id != "" {
			if o.Notes, err = s.notesOf(ctx, id); err != nil {
				return nil, err
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// noteItemID is the inbox id under which people's notes on the waited-on
// item are kept, or "" when the item is not the caller's.
func (s *Server) noteItemID(ctx context.Context, p store.Principal, it waitItem, o waitOutcome) string {
	if o.Status == outcomeNotFound {
		return ""
	}
	switch {
	case it.Proposal != nil && o.Revision > 0:
		return fmt.Sprintf("control_proposal:%s@%d", it.Proposal.String(), o.Revision)
	case isQuestion(it.Approval):
		if a, err := s.asks.Visible(ctx, p, it.Approval); err == nil {
			return asks.ItemID(a)
		}
	case it.Approval != "":
		if a, err := s.flows.VisibleApproval(ctx, p, it.Approval); err == nil {
			return flows.ApprovalNoteID(a)
		}
	case it.CommandProposal != "":
		return "command_proposal:" + it.CommandProposal + "@pending"
	case it.Screen != "":
		if _, press, _ := s.screens.PressOutcome(ctx, p, it.Screen); press != "" {
			return "screen_press:" + it.Screen + "/" + press + "@pending"
		}
	}
	return ""
}

// proposalOutcome reports what became of the control proposal at rev (0:
// p's newest on the control). Only the principal that staged a proposal
// learns its outcome.
func (s *Server) proposalOutcome(ctx context.Context, p store.Principal, id control.Identity, rev int64, hist *proposalHistory) waitOutcome {
	o := waitOutcome{Kind: "proposal", ID: id.String(), Revision: rev, Status: outcomeNotFound,
		Next: "stage a value with controls_execute and pass the revision of its result; only your own proposals are reported"}
	var cur *control.Proposal
	if snap, ok := s.controls.Registry().Get(ctx, id); ok && s.controls.FormVisible(ctx, p, id.FormID) {
		cur = snap.State.Staged
	}
	if rev == 0 {
		if cur != nil && cur.Provenance.PrincipalID == p.ID {
			rev = cur.Revision
		} else {
			rev = hist.newest(id.Key(), p.ID)
		}
		o.Revision = rev
	}
	if rev == 0 {
		return o
	}
	if cur != nil && cur.Revision == rev {
		switch {
		case cur.Provenance.PrincipalID != p.ID:
			return o
		case cur.Stale:
			o.Status, o.Reason = outcomeStale, "the value changed after it was proposed, so it cannot be applied"
			o.Next = "inspect the control and stage a new value if it is still needed"
		default:
			o.Status, o.Next = outcomePending, "a person decides in the web inbox"
			if g := s.controls.EscalatedTo(ctx, id, rev); g != "" {
				o.Reason, o.Next = escalatedReason(g), "group "+g+" decides in the web inbox"
			}
		}
		return o
	}
	h, ok := hist.revs[rev]
	if !ok || h.stager != p.ID || h.key != id.Key() {
		return o
	}
	if h.status == outcomePending {
		// Decided in the registry, and the event saying how is on its
		// way.
		o.Status, o.Next = outcomePending, "a person decides in the web inbox"
		return o
	}
	o.Status, o.DecidedBy, o.Next = h.status, h.by, ""
	switch h.status {
	case outcomeApplied:
		o.Next = "the value is live"
		if h.changed != nil {
			o.Reason, o.Changed = "approved with changes: a person changed the value before applying it", h.changed
			o.Next = "the value the person chose is live; read it with controls_inspect"
		}
	case outcomeDiscarded:
		o.Reason = "a person discarded the proposal"
		if h.by == "" {
			// Discarded in no one's name: by its deadline.
			o.Reason = controls.NoDecision
		}
	case outcomeStale:
		o.Reason = "a newer proposal replaced it"
	}
	return o
}

// screenPressOutcome reports what became of the last press filed from a
// screen view on the screen id.
func (s *Server) screenPressOutcome(ctx context.Context, p store.Principal, id string) waitOutcome {
	status, _, by := s.screens.PressOutcome(ctx, p, id)
	o := waitOutcome{Kind: "screen", ID: id, Status: status, DecidedBy: by}
	switch status {
	case screens.PressPending:
		o.Next = "a person confirms or declines the press in the web inbox"
	case screens.PressConfirmed:
		o.Next = "a person confirmed and the tool ran once"
	case screens.PressFailed:
		o.Reason, o.Next = "a person confirmed but the tool failed", "show the screen again if the action is still needed"
	case screens.PressDeclined:
		o.Reason = "a person declined the press; nothing ran"
	default:
		o.Next = "pass the id of a screen you showed with show_screen"
	}
	return o
}

// approvalOutcome reports a Flow approval to its requester (and to people).
func (s *Server) approvalOutcome(ctx context.Context, p store.Principal, id string) (waitOutcome, error) {
	o := waitOutcome{Kind: "approval", ID: id, Status: outcomeNotFound, Next: "pass an approval id that flows_prescribe gave you"}
	if len(id) > 80 {
		return o, nil
	}
	a, err := s.flows.VisibleApproval(ctx, p, id)
	if err != nil {
		var te *tool.Error
		if errors.As(err, &te) && te.Code == "not_found" {
			return o, nil
		}
		return o, err
	}
	o.DecidedBy, o.Receipt, o.Next = a.Decider, a.Receipt, ""
	switch a.Status {
	case flow.ApprovalPending, flow.ApprovalApproving:
		o.Status, o.Next = outcomePending, "a person decides in the web inbox"
		if a.Escalated() {
			o.Reason = escalatedReason(a.Group)
		}
		if a.People() > 1 {
			o.Next = fmt.Sprintf("%d different people must approve in the web inbox; %d approved so far", a.People(), len(a.Approvers))
		}
		if ch := a.ChangedParameters(); len(ch) > 0 {
			o.Reason, o.Changed = "a person changed parameters before approving; it waits for more people to approve the new values", changeLines(ch)
		}
		if inst, err := s.flows.Kernel().Instance(ctx, a.Instance); err == nil && inst.Revision != a.Revision {
			o.Status = outcomeStale
			o.Changed = []string{fmt.Sprintf("instance %s: was at revision %d, now at %d", inst.ID, a.Revision, inst.Revision)}
			o.Next = "prescribe again: the instance moved on, so this approval can no longer be given"
		}
	case flow.ApprovalApproved:
		o.Status, o.Next = outcomeApproved, "a person approved and the transition was applied; see the receipt with flows_inspect"
		if ch := a.ChangedParameters(); len(ch) > 0 {
			o.Reason = "approved with changes: a person changed parameters before approving, and the step was applied with their values"
			o.Changed = changeLines(ch)
			o.Next = "the step was applied with the values the person chose (changed lists each as old → new); use them from now on"
		}
	case flow.ApprovalDeclined:
		o.Status, o.Reason = outcomeDeclined, a.Reason
		o.Next = `prescribe with "ask_again": true to file a new approval request, or request another transition`
	case flow.ApprovalStale:
		o.Status, o.Changed = outcomeStale, a.Changed
		o.Next = "prescribe again so that a person sees the new values"
	}
	return o, nil
}

// escalatedPrefix begins the reason of every escalated item.
const escalatedPrefix = "escalated to group "

// isEscalated reports whether o is an item routed to a group at its first
// deadline.
func isEscalated(o waitOutcome) bool {
	return strings.HasPrefix(o.Reason, escalatedPrefix)
}

// escalatedReason is the reason a pending item gives once it was routed
// to group at its first deadline: it still waits, for that group.
func escalatedReason(group string) string {
	return escalatedPrefix + group + ": nobody decided before the first deadline; it waits for the group as long again"
}

// changeLines are a Flow approval's changed parameters, each as
// name: "old" → "new".
func changeLines(ch []flow.ParameterChange) []string {
	out := make([]string, len(ch))
	for i, c := range ch {
		out[i] = c.String()
	}
	return out
}

// commandProposalOutcome reports a command or tool proposal to its
// proposer (and to the people who may decide it).
func (s *Server) commandProposalOutcome(ctx context.Context, p store.Principal, id string) (waitOutcome, error) {
	o := waitOutcome{Kind: "command_proposal", ID: id, Status: outcomeNotFound, Next: "pass a proposal id that a spawn or tool registration gave you"}
	if s.runs.ToolSet() == nil {
		return o, nil
	}
	pr, err := s.runs.ToolSet().Proposal(ctx, p, id)
	if err != nil {
		var re *run.Error
		if errors.As(err, &re) && re.Code == run.CodeNotFound {
			return o, nil
		}
		return o, err
	}
	o.DecidedBy, o.Reason, o.Next = pr.DecidedBy, pr.Reason, ""
	switch pr.Status {
	case store.ProposalPending:
		o.Status, o.Next = outcomePending, "a person decides at "+s.runs.ToolSet().ProposalURL(pr.ID)
		if g := s.runs.ToolSet().ProposalEscalatedTo(ctx, pr.ID); g != "" {
			o.Reason = escalatedReason(g)
			o.Next = "group " + g + " decides at " + s.runs.ToolSet().ProposalURL(pr.ID)
		}
	case store.ProposalApproved:
		o.Status = outcomeApproved
	case store.ProposalDeclined:
		o.Status = outcomeDeclined
	}
	return o, nil
}

// programOutcome reports a proposed Flow program to the principal that
// proposed it: approved, or declined with the person's reason or, past its
// deadline, "no decision before the deadline".
func (s *Server) programOutcome(ctx context.Context, p store.Principal, fingerprint string) (waitOutcome, error) {
	o := waitOutcome{Kind: "program", ID: fingerprint, Status: outcomeNotFound, Next: "pass the fingerprint of a program you proposed (POST /v1/flows/programs)"}
	l, err := s.flows.Kernel().ProgramLoad(ctx, fingerprint)
	if err != nil {
		var fe *flow.Error
		if errors.As(err, &fe) && fe.Code == flow.CodeNotFound {
			return o, nil
		}
		return o, err
	}
	if l.LoadedBy != p.ID || l.LoaderKind == flow.LoaderOperator {
		return o, nil
	}
	o.Next = ""
	switch l.Status {
	case flow.ProgramProposed:
		o.Status, o.Next = outcomePending, "a person decides in the web inbox"
	case flow.ProgramActive:
		o.Status, o.DecidedBy = outcomeApproved, l.ActivatedBy
	case flow.ProgramDeclined:
		o.Status, o.Reason, o.DecidedBy = outcomeDeclined, l.Reason, l.DecidedBy
		if l.DecidedBySystem != "" {
			o.DecidedBy = l.DecidedBySystem
		}
	}
	return o, nil
}

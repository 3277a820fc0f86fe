package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/route"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Routes registers the part's routes and pages on mux.
func (s *Part) Routes(mux *host.Mux) {
	h := func(f http.HandlerFunc) http.Handler { return s.Authed(f) }
	mux.Handle("POST /v1/flows/programs", h(s.handleFlowLoad))
	mux.Handle("GET /v1/flows/programs", h(s.handleFlowPrograms))
	mux.Handle("GET /v1/flows/programs/{fingerprint}", h(s.handleFlowProgram))
	mux.Handle("POST /v1/flows/programs/{fingerprint}/{decision}", h(s.handleFlowProgramDecide))
	mux.Handle("POST /v1/flows/instances", h(s.handleFlowStart))
	mux.Handle("GET /v1/flows/instances", h(s.handleFlowInstances))
	mux.Handle("GET /v1/flows/instances/{id}", h(s.handleFlowInspect))
	mux.Handle("POST /v1/flows/instances/{id}/prescribe", h(s.handleFlowPrescribe))
	mux.Handle("POST /v1/flows/prescriptions/{id}/apply", h(s.handleFlowApply))
	mux.Handle("GET /v1/flows/approvals", h(s.handleFlowApprovals))
	mux.Handle("GET /v1/flows/approvals/{id}", h(s.handleFlowApproval))
	mux.Handle("POST /v1/flows/approvals/{id}/{decision}", h(s.handleFlowDecide))
	s.routesFlowsWeb(mux)
}

// programView summarizes a stored program.
type programView = api.ProgramView

func viewProgram(p *flow.Program) programView {
	v := programView{ProgramID: p.ID(), ProgramVersion: p.Version(), RequiresRuntime: p.RequiresRuntime(),
		Fingerprint: p.Fingerprint(), Transitions: p.Len(), Objectives: []string{}}
	for _, c := range p.Manifest().ObjectiveContracts {
		v.Objectives = append(v.Objectives, c.Objective)
	}
	return v
}

// viewLoadedProgram is viewProgram with the program's load status.
func (s *Part) viewLoadedProgram(ctx context.Context, p *flow.Program) programView {
	v := s.summaries.get(p)
	if l, err := s.flows.ProgramLoad(ctx, p.Fingerprint()); err == nil {
		v.Status, v.LoadedBy = string(l.Status), l.LoadedBy
		if l.LoaderKind == flow.LoaderOperator {
			v.LoadedBy = flow.LoaderOperator
		}
	}
	return v
}

// flowPrograms returns every stored program, by program id then
// fingerprint.
func (s *Part) flowPrograms(ctx context.Context) ([]*flow.Program, error) {
	fps, err := s.flows.Programs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*flow.Program, 0, len(fps))
	for _, fp := range fps {
		p, err := s.flows.Program(ctx, fp)
		if err != nil {
			s.Log.Warn("stored flow program does not load", "fingerprint", fp, "err", err)
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *flow.Program) int {
		if a.ID() != b.ID() {
			if a.ID() < b.ID() {
				return -1
			}
			return 1
		}
		if a.Fingerprint() < b.Fingerprint() {
			return -1
		}
		return 1
	})
	return out, nil
}

// findProgram resolves a program reference: a fingerprint, or a program id.
// A program id names the active program with that id that a person or the
// operator loaded (or a person approved) last; programs only proposed, by
// an agent for example, are never chosen by id.
func (s *Part) findProgram(ctx context.Context, ref string) (*flow.Program, error) {
	if ref == "" {
		return nil, tool.Errorf("invalid_request", "name the program by fingerprint (sha256:…) or program id")
	}
	if p, err := s.flows.Program(ctx, ref); err == nil {
		return p, nil
	}
	if p, err := s.flows.ActiveProgram(ctx, ref); err == nil {
		return p, nil
	} else if flow.ErrorCode(err) != flow.CodeNotFound {
		return nil, err
	}
	return nil, tool.Errorf("not_found", "no active program %q is loaded; a person or the operator loads it (assent flow load FILE), or approves it in the web inbox", ref)
}

// StartRequest is what starting an instance takes (see Start): the body of
// POST /v1/flows/instances and the arguments of flows_start.
type StartRequest = api.StartRequest

// instanceIDPattern bounds the instance ids a caller may choose.
var instanceIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Start starts an instance owned by p, with the checks an agent's
// flows_start passes: the program must be active, the instance id free,
// and the program's start check (RegisterStartCheck) must accept the
// facts. A Go application starts instances as its agent through it.
func (s *Part) Start(ctx context.Context, p store.Principal, req StartRequest) (flow.Instance, error) {
	if req.ID != "" && !instanceIDPattern.MatchString(req.ID) {
		return flow.Instance{}, tool.Errorf("invalid_request", "instance id %q must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", req.ID)
	}
	prog, err := s.findProgram(ctx, req.Program)
	if err != nil {
		return flow.Instance{}, err
	}
	// What the kernel refuses as malformed is refused as such first.
	shape := flow.Instance{Phase: req.Phase, Facts: req.Facts, Objective: req.Objective}
	if err := shape.Validate(); err != nil {
		return flow.Instance{}, flowError(err)
	}
	if err := s.checkStart(ctx, p, prog, &req); err != nil {
		return flow.Instance{}, err
	}
	if req.ID != "" {
		if _, err := s.flows.Instance(ctx, req.ID); err == nil {
			return flow.Instance{}, tool.Errorf("already_exists", "an instance %q exists; choose another id or leave it out", req.ID)
		}
	}
	inst, err := s.flows.Start(ctx, flow.Instance{ID: req.ID, Program: prog.Fingerprint(), Owner: p.ID, Phase: req.Phase, Facts: req.Facts, Objective: req.Objective})
	if err != nil {
		return flow.Instance{}, flowError(err)
	}
	s.publishFlow("flow.instance", p.ID, map[string]any{"instance": inst.ID, "revision": inst.Revision})
	return inst, nil
}

// instanceView is everything about an instance its viewer may see.
type instanceView = api.InstanceView

// flowInspect returns an instance with its journal, receipts and pending
// approvals; approval, when set, names one more approval to include.
func (s *Part) flowInspect(ctx context.Context, p store.Principal, id, approval string) (instanceView, error) {
	inst, err := s.visibleInstance(ctx, p, id)
	if err != nil {
		return instanceView{}, err
	}
	v := instanceView{Instance: inst}
	v.Instance.ClearPending()
	if prog, err := s.flows.Program(ctx, inst.Program); err == nil {
		v.Program = viewProgram(prog)
	} else {
		v.Program = programView{Fingerprint: inst.Program, Objectives: []string{}}
	}
	if v.Journal, err = s.flows.Journal(ctx, id); err != nil {
		return instanceView{}, err
	}
	if v.Journal == nil {
		v.Journal = []flow.JournalEntry{}
	}
	if v.Receipts, err = s.instanceReceipts(ctx, id); err != nil {
		return instanceView{}, err
	}
	if v.Approvals, err = s.visibleApprovals(ctx, p, id); err != nil {
		return instanceView{}, err
	}
	all, err := s.flows.InstanceApprovals(ctx, id)
	if err != nil {
		return instanceView{}, err
	}
	v.Closed = []flow.Approval{}
	for _, a := range all {
		if a.Status != flow.ApprovalPending && (p.Kind == store.KindHuman || a.Requester == p.ID) {
			v.Closed = append(v.Closed, a)
		}
	}
	if approval != "" {
		a, err := s.VisibleApproval(ctx, p, approval)
		if err != nil || a.Instance != id {
			return instanceView{}, errFlowNotFound("approval", approval)
		}
		v.Approval = &a
		notes, err := host.ReadNotes(ctx, s.Store.Settings, ApprovalNoteID(a))
		if err != nil {
			return instanceView{}, err
		}
		for _, n := range notes {
			v.ApprovalNotes = append(v.ApprovalNotes, api.DecisionNote{By: n.By, Decision: n.Decision, Text: n.Text, At: n.At})
		}
	}
	return v, nil
}

// PrescribeResult is the answer to a prescribe request: the kernel's
// decision and, when it waits for a person, the approval request filed
// for them.
type PrescribeResult = api.Prescription

// Prescribe resolves the next step of an instance for its owner p and
// stores the prescription. A decision awaiting a person files an approval
// request that appears in the people's inbox.
func (s *Part) Prescribe(ctx context.Context, p store.Principal, id string, req flow.Request) (PrescribeResult, error) {
	inst, err := s.ownedInstance(ctx, p, id)
	if err != nil {
		return PrescribeResult{}, err
	}
	fp := flowPrincipal(p)
	d, err := s.flows.PrescribeInstance(ctx, inst, fp, req)
	if err != nil {
		return PrescribeResult{}, flowError(err)
	}
	res := PrescribeResult{Decision: d}
	switch d.Kind {
	case flow.Prescribed:
		res.Next = "apply prescription " + d.Prescription.ID + " (flows_apply, or assent flow apply) before it expires at " + d.Prescription.ExpiresAt.Format("15:04:05Z07:00")
	case flow.Marked:
		res.Next = "the objective is met; nothing more to do"
	case flow.Blocked:
		res.Next = "no transition applies now; see reasons, and wait for the facts to change"
	case flow.Refused, flow.Unresolved:
		res.Next = "fix the request: " + d.Message
	case flow.Frontier:
		switch d.Awaiting {
		case flow.AuthorityHuman:
			if err := s.checkApprovalRoom(ctx, p, id, d.Transition); err != nil {
				return PrescribeResult{}, err
			}
			a, err := s.flows.RequestApproval(ctx, id, fp, req)
			if err != nil {
				res.Next = "a person must approve this, but the request could not be filed: " + flowError(err).Error()
				break
			}
			res.Approval = &a
			res.Next = "a person must approve " + d.Transition + " in the web inbox; follow approval " + a.ID + " by inspecting the instance with it (flows_inspect {instance, approval}, or assent flow inspect INSTANCE --approval ID)"
			s.publishFlow("flow.approval", p.ID, map[string]any{"approval": a.ID, "instance": a.Instance, "status": a.Status})
		case flow.AwaitingParameters:
			res.Next = "prescribe again with the parameters " + host.JoinOr(d.Missing, "")
		case flow.AwaitingChoice:
			res.Next = "prescribe again naming one transition of " + host.JoinOr(d.Candidates, "")
		default:
			res.Next = "this transition needs " + d.Awaiting + " authority, which your token does not carry"
		}
	}
	return res, nil
}

// Apply applies a prescription issued to p. Parameters, when given,
// must be the ones the prescription binds.
func (s *Part) Apply(ctx context.Context, p store.Principal, prx string, params map[string]string) (flow.Receipt, error) {
	fp := flowPrincipal(p)
	if params != nil {
		rx, err := s.flows.Prescription(ctx, prx)
		if err != nil {
			if flow.ErrorCode(err) == flow.CodeNotFound {
				return flow.Receipt{}, errFlowNotFound("prescription", prx)
			}
			return flow.Receipt{}, err
		}
		if _, err := s.ownedInstance(ctx, p, rx.Instance); err != nil {
			return flow.Receipt{}, errFlowNotFound("prescription", prx)
		}
		d, err := s.flows.Resolve(ctx, rx.Instance, fp, flow.Request{Transition: rx.Transition, Objective: rx.Objective, Parameters: params})
		if err == nil && d.Kind == flow.Prescribed && !maps.Equal(d.Prescription.Parameters, rx.Parameters) {
			return flow.Receipt{}, tool.Errorf("invalid_request", "the parameters differ from those prescription %s binds; prescribe again with the new ones", prx)
		}
	}
	// Who owns the instance is read with the prescription, in the kernel's
	// first read: a prescription of another's instance is not found.
	instance := ""
	owned := func(rx flow.Prescription, inst flow.Instance) error {
		if inst.ID == "" || inst.Owner != p.ID {
			return errFlowNotFound("prescription", prx)
		}
		instance = rx.Instance
		return nil
	}
	r, err := s.flows.ApplyChecked(ctx, prx, fp, owned)
	if err != nil {
		if instance == "" {
			// Refused before the check passed: the prescription is not
			// there, or not the caller's.
			if flow.ErrorCode(err) == flow.CodeNotFound {
				return flow.Receipt{}, errFlowNotFound("prescription", prx)
			}
			return flow.Receipt{}, flowError(err)
		}
		s.publishFlow("flow.instance", p.ID, map[string]any{"instance": instance})
		return flow.Receipt{}, flowError(err)
	}
	s.publishFlow("flow.instance", p.ID, map[string]any{"instance": r.Instance, "revision": r.Revision, "receipt": r.ID})
	return r, nil
}

// Decide approves or declines an approval for a person.
func (s *Part) Decide(ctx context.Context, person store.Principal, id, decision, reason string) (any, flow.Approval, error) {
	a, err := s.VisibleApproval(ctx, person, id)
	if err != nil {
		return nil, flow.Approval{}, err
	}
	if person.Kind != store.KindHuman {
		return nil, a, tool.Errorf("forbidden", "only a person decides an approval, in the web inbox")
	}
	if err := s.Routed(ctx, person, a.Requester, route.FlowApprovalGroup(a)); err != nil {
		return nil, a, err
	}
	inst, _ := s.flows.Instance(ctx, a.Instance)
	defer s.publishFlow("flow.approval", inst.Owner, map[string]any{"approval": id, "instance": a.Instance})
	out, err := s.decide(ctx, person, id, decision, reason)
	if flow.ErrorCode(err) == flow.CodeApprovalClosed || flowCode(err) == flow.CodeApprovalClosed {
		if now, rerr := s.flows.Approval(ctx, id); rerr == nil {
			err = s.alreadyDecided(ctx, now, err)
		}
	}
	return out, a, err
}

// flowCode is the code of a tool error made from a kernel error.
func flowCode(err error) string {
	var te *tool.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

// alreadyDecided turns the refusal of a decision on an approval someone
// else decided first into already_decided, saying who decided, how and
// when, with the receipt of an approval or the reason of a decline. A
// stale approval keeps closed, the kernel's answer.
func (s *Part) alreadyDecided(ctx context.Context, a flow.Approval, closed error) error {
	if a.Decider == "" || a.Status == flow.ApprovalStale || a.Status == flow.ApprovalPending {
		return closed
	}
	by := host.NameOr(s.PrincipalNames(ctx), a.Decider)
	data := map[string]any{"approval": a.ID, "status": string(a.Status), "decided_by": a.Decider, "decided_by_name": by}
	if !a.DecidedAt.IsZero() {
		data["decided_at"] = a.DecidedAt
	}
	if a.Receipt != "" {
		data["receipt"] = a.Receipt
	}
	if a.Reason != "" {
		data["reason"] = a.Reason
	}
	msg := fmt.Sprintf("approval %s was already %s by %s; nothing more was done. Reload the inbox to see it", a.ID, a.Status, by)
	if a.Status == flow.ApprovalApproving {
		msg = fmt.Sprintf("approval %s is being approved by %s; nothing more was done. Reload the inbox to see the outcome", a.ID, by)
	}
	return &tool.Error{Code: "already_decided", Message: msg, Data: data}
}

// decide carries out one decision on an approval.
func (s *Part) decide(ctx context.Context, person store.Principal, id, decision, reason string) (any, error) {
	switch decision {
	case "approve":
		r, err := s.flows.Approve(ctx, id, flowPrincipal(person))
		if flow.ErrorCode(err) == flow.CodeMorePeopleNeeded {
			// Recorded, not yet applied: the answer is the approval,
			// showing who has approved and how many more it needs.
			a, aerr := s.flows.Approval(ctx, id)
			if aerr != nil {
				return nil, flowError(aerr)
			}
			return a, nil
		}
		if flow.ErrorCode(err) == flow.CodeCapabilityDenied {
			return nil, tool.Errorf(flow.CodeCapabilityDenied, "%s; approving adds only human.approve, so the approver's own token must grant the rest (assent token create --kind human --grant …); the request stays open", flowError(err).(*tool.Error).Message)
		}
		if err != nil {
			return nil, flowError(err)
		}
		return r, nil
	case "decline":
		if reason == "" {
			reason = "declined by " + person.Name
		}
		out, err := s.flows.Decline(ctx, id, flowPrincipal(person), reason)
		if err != nil {
			return nil, flowError(err)
		}
		return out, nil
	}
	return nil, tool.Errorf("not_found", "an approval can be approved or declined")
}

func (s *Part) handleFlowLoad(w http.ResponseWriter, r *http.Request) {
	src, err := io.ReadAll(http.MaxBytesReader(w, r.Body, flow.MaxDocumentSize))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			host.WriteError(w, wire.TooLarge, fmt.Sprintf("a program is at most %d bytes", flow.MaxDocumentSize))
			return
		}
		host.WriteError(w, wire.InvalidRequest, "the program could not be read: "+err.Error())
		return
	}
	why, rerr := tool.CheckReason(r.URL.Query().Get("reason"))
	if rerr != nil {
		host.WriteToolError(w, rerr)
		return
	}
	seconds, derr := programDeadlineSeconds(r.URL.Query())
	if derr != nil {
		writeFlowError(w, derr)
		return
	}
	l, err := s.loadProgram(r.Context(), host.PrincipalOf(r), src, why, seconds)
	if err != nil {
		writeFlowError(w, err)
		return
	}
	if l.proposed {
		host.WriteJSON(w, http.StatusAccepted, api.ProgramProposal{
			Deadline: l.due,
			Status:   "pending_approval",
			Program:  l.view,
			URL:      s.programsInboxURL(),
			Next:     "Loading a program is a person's act: a person must approve " + l.prog.ID() + " in the web inbox before it starts anything. Follow it with GET /v1/flows/programs/" + l.prog.Fingerprint(),
		})
		return
	}
	host.WriteJSON(w, http.StatusCreated, l.view)
}

func (s *Part) handleFlowPrograms(w http.ResponseWriter, r *http.Request) {
	progs, err := s.flowPrograms(r.Context())
	if err != nil {
		writeFlowError(w, err)
		return
	}
	out := make([]programView, 0, len(progs))
	for _, p := range progs {
		out = append(out, s.viewLoadedProgram(r.Context(), p))
	}
	host.WriteJSON(w, http.StatusOK, api.ProgramList{Programs: out})
}

func (s *Part) handleFlowProgram(w http.ResponseWriter, r *http.Request) {
	p, err := s.findProgram(r.Context(), r.PathValue("fingerprint"))
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, api.ProgramDocument{Program: s.viewLoadedProgram(r.Context(), p), Canonical: json.RawMessage(p.Canonical())})
}

// flowDecideProgram approves or declines a proposed program for a person.
func (s *Part) flowDecideProgram(ctx context.Context, person store.Principal, fingerprint, decision, reason string) (flow.ProgramLoad, error) {
	if person.Kind != store.KindHuman {
		return flow.ProgramLoad{}, tool.Errorf("forbidden", "only a person decides on a proposed program, in the web inbox")
	}
	if _, err := s.flows.Program(ctx, fingerprint); err != nil {
		return flow.ProgramLoad{}, tool.Errorf("not_found", "no program %q is stored", fingerprint)
	}
	// A proposed program is decided by the people it was routed to, on
	// its page's buttons as in the inbox.
	if filed, err := s.flows.ProgramLoad(ctx, fingerprint); err == nil && filed.Status == flow.ProgramProposed {
		if err := s.Routed(ctx, person, filed.LoadedBy, ""); err != nil {
			return flow.ProgramLoad{}, err
		}
	}
	var l flow.ProgramLoad
	var err error
	switch decision {
	case "approve":
		l, err = s.flows.ApproveProgram(ctx, fingerprint, flowPrincipal(person))
	case "decline":
		if reason == "" {
			reason = "declined by " + person.Name
		}
		l, err = s.flows.DeclineProgram(ctx, fingerprint, flowPrincipal(person), reason)
	default:
		return flow.ProgramLoad{}, tool.Errorf("not_found", "a proposed program can be approved or declined")
	}
	if err != nil {
		return flow.ProgramLoad{}, flowError(err)
	}
	s.dropProgramDeadline(ctx, fingerprint)
	s.publishFlow("flow.approval", l.LoadedBy, map[string]any{"program": fingerprint, "status": l.Status})
	return l, nil
}

// handleFlowProgramDecide is a person's Approve or Decline of a proposed
// program from the web UI's own script; like approvals, never with a token.
func (s *Part) handleFlowProgramDecide(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	if !host.FromWeb(r) || p.Kind != store.KindHuman {
		host.WriteError(w, wire.HumanConfirmationRequired, "a proposed program is approved by a person in the web inbox (/inbox), never with a token")
		return
	}
	var body api.DecisionRequest
	if r.ContentLength != 0 && !host.DecodeJSON(w, r, 4096, &body) {
		return
	}
	l, err := s.flowDecideProgram(r.Context(), p, r.PathValue("fingerprint"), r.PathValue("decision"), body.Reason)
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, l)
}

func (s *Part) handleFlowStart(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if !host.DecodeJSON(w, r, 0, &req) {
		return
	}
	inst, err := s.Start(r.Context(), host.PrincipalOf(r), req)
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusCreated, inst)
}

func (s *Part) handleFlowInstances(w http.ResponseWriter, r *http.Request) {
	list, err := s.instanceRows(r.Context(), host.PrincipalOf(r))
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, api.InstanceList{Instances: list})
}

// instanceRow is an instance in a list.
type instanceRow = api.InstanceRow

// instanceRows lists the instances p may see with their owners' names.
func (s *Part) instanceRows(ctx context.Context, p store.Principal) ([]instanceRow, error) {
	list, err := s.visibleInstances(ctx, p)
	if err != nil {
		return nil, err
	}
	names := s.PrincipalNames(ctx)
	out := make([]instanceRow, 0, len(list))
	for _, inst := range list {
		inst.ClearPending()
		row := instanceRow{Instance: inst}
		if inst.Owner != "" {
			row.OwnerName = host.NameOr(names, inst.Owner)
		}
		out = append(out, row)
	}
	return out, nil
}

func (s *Part) handleFlowInspect(w http.ResponseWriter, r *http.Request) {
	v, err := s.flowInspect(r.Context(), host.PrincipalOf(r), r.PathValue("id"), r.URL.Query().Get("approval"))
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, v)
}

func (s *Part) handleFlowPrescribe(w http.ResponseWriter, r *http.Request) {
	var req struct {
		flow.Request
		AskAgain bool `json:"ask_again,omitempty"`
	}
	if r.ContentLength != 0 && !host.DecodeJSON(w, r, 0, &req) {
		return
	}
	res, err := s.Prescribe(r.Context(), host.PrincipalOf(r), r.PathValue("id"), req.Request)
	if err != nil {
		writeFlowError(w, err)
		return
	}
	s.afterDecline(r.Context(), host.PrincipalOf(r), r.PathValue("id"), req.Request, req.AskAgain, &res)
	host.WriteJSON(w, http.StatusOK, res)
}

func (s *Part) handleFlowApply(w http.ResponseWriter, r *http.Request) {
	var body api.ApplyRequest
	if r.ContentLength != 0 && !host.DecodeJSON(w, r, 0, &body) {
		return
	}
	rc, err := s.Apply(r.Context(), host.PrincipalOf(r), r.PathValue("id"), body.Parameters)
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, rc)
}

func (s *Part) handleFlowApprovals(w http.ResponseWriter, r *http.Request) {
	list, err := s.visibleApprovals(r.Context(), host.PrincipalOf(r), r.URL.Query().Get("instance"))
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, api.ApprovalList{Approvals: list})
}

func (s *Part) handleFlowApproval(w http.ResponseWriter, r *http.Request) {
	a, err := s.VisibleApproval(r.Context(), host.PrincipalOf(r), r.PathValue("id"))
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, a)
}

// handleFlowDecide is a person's Approve or Decline from the web UI's own
// script. A bearer token never decides: only the web UI carries a person's
// assent.
func (s *Part) handleFlowDecide(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	if !host.FromWeb(r) || p.Kind != store.KindHuman {
		host.WriteError(w, wire.HumanConfirmationRequired, "approvals are decided by a person in the web inbox (/inbox), never with a token")
		return
	}
	var body api.ApprovalDecisionRequest
	if r.ContentLength != 0 && !host.DecodeJSON(w, r, 16<<10, &body) {
		return
	}
	var out any
	var err error
	if len(body.Values) > 0 {
		out, err = s.approveEditedJSON(r.Context(), p, r.PathValue("id"), r.PathValue("decision"), body)
	} else {
		out, _, err = s.Decide(r.Context(), p, r.PathValue("id"), r.PathValue("decision"), body.Reason)
	}
	if err != nil {
		writeFlowError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, out)
}

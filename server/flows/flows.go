package flows

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/route"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// grantPolicy is the token grant that gives a principal the "policy"
// authority class of Flow transitions.
const grantPolicy = "policy"

// Part is the Flows part of the server: the kernel, its inventory and the
// effects that reach controls and Runs. It serves /v1/flows, the flows_* tools, the Flow pages and the
// inbox's approvals.
type Part struct {
	Deps
	controls Controls
	runs     Runs

	flows    *flow.Kernel
	flowInv  *flow.Inventory
	flowRuns *flowRunWatch
	// flowSummaries are the approval summaries apps register per program.
	flowSummaries perProgram[ApprovalSummaryFunc]
	// startChecks are the checks apps register per program on the
	// instances started of it.
	startChecks perProgram[StartCheckFunc]
	// paramInputs are how apps show, and bound, the parameters of each
	// program's transitions.
	paramInputs perProgram[map[string]ParameterInput]

	// limits bound the programs and approvals an agent puts before
	// people; New sets DefaultLimits. limitsMu guards it.
	limitsMu sync.Mutex
	limits   Limits
	// proposeMu serializes proposed loads, so the bound on waiting
	// proposals holds.
	proposeMu sync.Mutex
	// summaries are what lists show of each program.
	summaries programSummaries

	// stopSweeps ends the sweeps of approvals past their deadline and
	// of other nodes' interrupted applies, and waits for them.
	stopSweeps func()
}

// New builds the Flows part on h: the kernel on the store's Flows part,
// with effects that command ctl's controls and start Runs on runs. It
// settles applies cut short by a crash, and registers the flows_*
// tools.
func New(ctx context.Context, d Deps) (*Part, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	s := &Part{Deps: d, controls: d.Controls, runs: d.Runs, limits: DefaultLimits}
	if err := s.Web.AddPages(templateFS, "templates/*.html"); err != nil {
		return nil, err
	}
	s.flowInv = flow.NewInventory(assent.Version)
	if err := s.registerFlowEffects(); err != nil {
		return nil, err
	}
	opts := []flow.Option{flow.WithClock(s.Now), flow.WithSummarizer(flow.SummarizerFunc(s.summarizeApproval)),
		flow.WithNode(s.Config.Node), flow.WithInterruptedAfter(s.Config.InterruptedAfter),
		flow.WithParameterCheck(flow.ParameterCheckFunc(s.checkParameters))}
	if d.Groups != nil {
		opts = append(opts, flow.WithGroups(d.Groups))
	}
	s.flows = flow.NewKernel(s.Store.Flows, s.flowInv, opts...)
	n, err := s.flows.RecoverInterrupted(ctx)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("flows: recovering interrupted applies: %w", err)
	}
	if n > 0 {
		s.Log.Warn("flow instances put in recovery mode after an interrupted apply", "count", n)
	}
	for _, t := range s.flowTools() {
		if err := s.Tools.Register(t); err != nil {
			s.Close()
			return nil, err
		}
	}
	stopApprovals, stopPrograms := s.sweep(), s.sweepProgramDeadlines()
	s.stopSweeps = func() { stopApprovals(); stopPrograms() }
	return s, nil
}

//go:embed templates/*.html
var templateFS embed.FS

// Name names the part.
func (s *Part) Name() string { return "flows" }

// CountOpen counts the approvals and proposed programs waiting for p (the
// inbox cards routed to p), or, for an agent or service, those it filed
// that wait for a person.
func (s *Part) CountOpen(ctx context.Context, p store.Principal) map[string]int {
	const kind = "flow_approvals"
	person := p.Kind == store.KindHuman
	list, err := s.flows.PendingApprovals(ctx)
	if err != nil {
		return map[string]int{kind: 0}
	}
	n := 0
	var filed []host.Filed
	for _, a := range list {
		switch {
		case person:
			filed = append(filed, host.Filed{By: a.Requester, Group: route.FlowApprovalGroup(a)})
		case a.Requester == p.ID:
			n++
		}
	}
	loads, _ := s.flows.ProgramLoads(ctx)
	for _, l := range loads {
		if l.Status != flow.ProgramProposed {
			continue
		}
		switch {
		case person:
			// The inbox shows a proposed program it can read.
			if _, err := s.flows.Program(ctx, l.Fingerprint); err == nil {
				filed = append(filed, host.Filed{By: l.LoadedBy})
			}
		case l.LoadedBy == p.ID:
			n++
		}
	}
	if person {
		n = s.CountRouted(ctx, p, filed)
	}
	return map[string]int{kind: n}
}

// Close stops the sweeps of interrupted applies and of approvals past
// their deadline, and stops watching the Runs that Flow transitions
// started.
func (s *Part) Close() {
	if s.stopSweeps != nil {
		s.stopSweeps()
		s.stopSweeps = nil
	}
	if s.flowRuns != nil {
		s.flowRuns.close()
	}
}

// Kernel returns the Flow kernel, so an embedding Go application can load
// programs and start instances in process.
func (s *Part) Kernel() *flow.Kernel { return s.flows }

// Inventory returns the runtime inventory of the Flow kernel, so an
// embedding application can register its own effects, verifiers and
// capabilities before loading programs that use them.
func (s *Part) Inventory() *flow.Inventory { return s.flowInv }

// capabilityID is the grammar of a capability id. Token grants that are not
// capability ids (for example run-scoped grants) are not Flow grants.
var capabilityID = regexp.MustCompile(`^[a-z][a-z0-9]*(?:[.-][a-z0-9]+)*$`)

// flowPrincipal maps a store principal to the kernel's: its id, its kind as
// authority class, the capability grants of its token, and the policy class
// when the token carries the grant "policy".
func flowPrincipal(p store.Principal) flow.Principal {
	fp := flow.Principal{ID: p.ID, Kind: p.Kind, Grants: []string{}}
	for _, g := range p.Grants {
		switch {
		case g == grantPolicy:
			fp.Policy = true
		case len(g) <= 128 && capabilityID.MatchString(g):
			fp.Grants = append(fp.Grants, g)
		}
	}
	slices.Sort(fp.Grants)
	fp.Grants = slices.Compact(fp.Grants)
	return fp
}

// errFlowNotFound is the answer for an instance, prescription or approval
// that does not exist or belongs to someone else; the two are the same.
func errFlowNotFound(what, id string) *tool.Error {
	return tool.Errorf("not_found", "no %s %q is visible to you; list your instances with flows_list (or GET /v1/flows/instances)", what, id)
}

// visibleInstance returns the instance if p may see it: its owner and the
// people who supervise the owner always; any other person while it waits
// for a person's approval or once they have acted on it. Anyone else gets
// not_found, as for an instance that does not exist.
func (s *Part) visibleInstance(ctx context.Context, p store.Principal, id string) (flow.Instance, error) {
	inst, err := s.flows.Instance(ctx, id)
	if err != nil {
		if flow.ErrorCode(err) == flow.CodeNotFound {
			return flow.Instance{}, errFlowNotFound("flow instance", id)
		}
		return flow.Instance{}, err
	}
	if s.canSeeInstance(ctx, p, inst) {
		return inst, nil
	}
	return flow.Instance{}, errFlowNotFound("flow instance", id)
}

// ownedInstance returns the instance only to its owner: prescribing and
// applying are the starter's.
func (s *Part) ownedInstance(ctx context.Context, p store.Principal, id string) (flow.Instance, error) {
	inst, err := s.flows.Instance(ctx, id)
	if err != nil || inst.Owner != p.ID {
		if err != nil && flow.ErrorCode(err) != flow.CodeNotFound {
			return flow.Instance{}, err
		}
		return flow.Instance{}, errFlowNotFound("flow instance", id)
	}
	return inst, nil
}

// canSeeInstance reports whether p may see inst (see visibleInstance).
func (s *Part) canSeeInstance(ctx context.Context, p store.Principal, inst flow.Instance) bool {
	if inst.Owner != "" && s.Oversees(ctx, p, inst.Owner) {
		return true
	}
	if p.Kind != store.KindHuman {
		return false
	}
	waiting, err := s.waitingInstances(ctx)
	return err == nil && s.personMaySee(ctx, p, inst, waiting)
}

// waitingInstances returns the ids of the instances with a pending
// approval.
func (s *Part) waitingInstances(ctx context.Context) (map[string]bool, error) {
	pending, err := s.flows.PendingApprovals(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(pending))
	for _, a := range pending {
		out[a.Instance] = true
	}
	return out, nil
}

// personMaySee reports whether a person may see another's instance: while
// it waits for a person, or once they have applied a transition on it or
// decided one of its approvals.
func (s *Part) personMaySee(ctx context.Context, p store.Principal, inst flow.Instance, waiting map[string]bool) bool {
	if waiting[inst.ID] {
		return true
	}
	receipts, _ := s.instanceReceipts(ctx, inst.ID)
	for _, r := range receipts {
		if r.Principal == p.ID {
			return true
		}
	}
	approvals, _ := s.flows.InstanceApprovals(ctx, inst.ID)
	for _, a := range approvals {
		if a.Decider == p.ID {
			return true
		}
	}
	return false
}

// instanceReceipts returns the receipts of an instance's committed
// transitions, oldest first.
func (s *Part) instanceReceipts(ctx context.Context, id string) ([]flow.Receipt, error) {
	journal, err := s.flows.Journal(ctx, id)
	if err != nil {
		return nil, err
	}
	out := []flow.Receipt{}
	for _, e := range journal {
		if e.Status != flow.JournalCommitted {
			continue
		}
		r, err := s.flows.Receipt(ctx, e.Prescription)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// visibleInstances lists the instances p may see, by id.
func (s *Part) visibleInstances(ctx context.Context, p store.Principal) ([]flow.Instance, error) {
	all, err := s.flows.Instances(ctx)
	if err != nil {
		return nil, err
	}
	var waiting map[string]bool
	if p.Kind == store.KindHuman {
		if waiting, err = s.waitingInstances(ctx); err != nil {
			return nil, err
		}
	}
	out := []flow.Instance{}
	for _, inst := range all {
		if inst.Owner != "" && s.Oversees(ctx, p, inst.Owner) || p.Kind == store.KindHuman && s.personMaySee(ctx, p, inst, waiting) {
			out = append(out, inst)
		}
	}
	return out, nil
}

// visibleApprovals lists the pending approvals p may see: every one for a
// person, the ones it asked for otherwise.
func (s *Part) visibleApprovals(ctx context.Context, p store.Principal, instance string) ([]flow.Approval, error) {
	all, err := s.flows.PendingApprovals(ctx)
	if err != nil {
		return nil, err
	}
	out := []flow.Approval{}
	for _, a := range all {
		if instance != "" && a.Instance != instance {
			continue
		}
		if p.Kind == store.KindHuman || a.Requester == p.ID {
			out = append(out, a)
		}
	}
	return out, nil
}

// visibleApproval returns one approval to its requester or to a person.
func (s *Part) VisibleApproval(ctx context.Context, p store.Principal, id string) (flow.Approval, error) {
	a, err := s.flows.Approval(ctx, id)
	if err != nil {
		if flow.ErrorCode(err) == flow.CodeNotFound {
			return flow.Approval{}, errFlowNotFound("approval", id)
		}
		return flow.Approval{}, err
	}
	if a.Requester != p.ID && p.Kind != store.KindHuman {
		return flow.Approval{}, errFlowNotFound("approval", id)
	}
	return a, nil
}

// flowError turns a kernel error into a tool error that keeps the kernel's
// code (UPPER_CASE), except absence, which every surface reports as
// not_found. Errors that are not the kernel's pass through unchanged.
func flowError(err error) error {
	var te *tool.Error
	if err == nil || errors.As(err, &te) {
		return err
	}
	var fe *flow.Error
	var list flow.ErrorList
	switch {
	case errors.As(err, &list) && len(list) > 0:
		data := map[string]any{"errors": []*flow.Error(list)}
		return &tool.Error{Code: list[0].Code, Message: list[0].Message + pathSuffix(list[0].Path), Data: data}
	case errors.As(err, &fe):
		if fe.Code == flow.CodeNotFound {
			return tool.Errorf("not_found", "%s", fe.Message)
		}
		return &tool.Error{Code: fe.Code, Message: fe.Message + pathSuffix(fe.Path)}
	}
	return err
}

func pathSuffix(path string) string {
	if path == "" {
		return ""
	}
	return " (at " + path + ")"
}

// writeFlowError writes err with the status of its code in the wire
// table (a kernel code keeps the kernel's spelling).
func writeFlowError(w http.ResponseWriter, err error) {
	var te *tool.Error
	if errors.As(flowError(err), &te) {
		host.WriteAPIError(w, host.FromToolError(te))
		return
	}
	host.WriteToolError(w, err)
}

// publishFlow tells the owner of an instance and the people who oversee
// it that the instance changed, so live views refresh. An event about an
// approval reaches every person too, since any person may decide one.
func (s *Part) publishFlow(typ string, owner string, data map[string]any) {
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	e := s.OwnedEvent(typ, owner, b)
	if typ == "flow.approval" {
		e.People = true
	}
	s.Bus.Publish(e)
}

// Inbox lists what waits for a person in the Flows part: the programs
// agents proposed, and the approval requests with what they would apply
// (secret values hidden), each with Approve and Decline.
func (s *Part) Inbox(ctx context.Context, p store.Principal) ([]host.InboxSection, error) {
	if p.Kind != store.KindHuman {
		return nil, nil
	}
	names := s.PrincipalNames(ctx)
	var out []host.InboxSection
	if sec, err := s.inboxProgramProposals(ctx, names); err != nil {
		return nil, err
	} else if len(sec.Items) > 0 {
		out = append(out, sec)
	}
	pending, err := s.flows.PendingApprovals(ctx)
	if err != nil {
		return nil, err
	}
	if len(pending) == 0 {
		return out, nil
	}
	sec := host.InboxSection{ID: "flow-approvals", Title: "Flow approvals", Empty: "No Flow transition waits for your approval."}
	for _, a := range pending {
		sec.Items = append(sec.Items, s.approvalItem(ctx, a, names, p))
	}
	return append(out, sec), nil
}

// inboxProgramProposals lists the programs that principals other than a
// person or the operator loaded: each waits for a person before it starts
// anything.
func (s *Part) inboxProgramProposals(ctx context.Context, names map[string]string) (host.InboxSection, error) {
	sec := host.InboxSection{ID: "flow-programs", Title: "Flow programs to load", Empty: "No program waits for your approval."}
	loads, err := s.flows.ProgramLoads(ctx)
	if err != nil {
		return sec, err
	}
	for _, l := range loads {
		if l.Status != flow.ProgramProposed {
			continue
		}
		p, err := s.flows.Program(ctx, l.Fingerprint)
		if err != nil {
			continue
		}
		item := host.InboxItem{
			Title: fmt.Sprintf("Load program %s (version %s)?", p.ID(), p.Version()),
			Fields: []host.InboxField{
				{Label: "Process", Value: p.ID()},
				{Label: "Proposed by", Value: host.NameOr(names, l.LoadedBy)},
				{Label: "Steps", Value: fmt.Sprint(p.Len())},
			},
			Details: []host.InboxField{
				{Label: "Fingerprint", Value: p.Fingerprint()},
			},
			Note: "Approving puts this version of the process in use under its name: it can be started, and its steps can call the tools it names. Read it on the Flows page first.",
			Actions: []host.InboxAction{
				{Label: "Approve", URL: "/web/flows/programs/" + p.Fingerprint() + "/approve", Primary: true},
				{Label: "Decline", URL: "/web/flows/programs/" + p.Fingerprint() + "/decline", Danger: true, Input: "reason", InputLabel: "Reason for declining (optional)"},
			},
		}
		if due := s.ProgramProposalDeadline(ctx, l.Fingerprint); !due.IsZero() {
			item.Fields = append(item.Fields, host.InboxTime("Decide by", due))
		}
		item.Why = l.Why
		item.Decision = s.programDecision(p.ID(), p.Fingerprint(), l.LoadedBy)
		if cur, err := s.flows.ActiveProgram(ctx, p.ID()); err == nil {
			item.Warn = "It replaces the active program " + p.ID() + " (" + cur.Fingerprint() + ") for everyone who starts " + p.ID() + " by id."
		}
		for _, t := range p.Transitions() {
			what := t.Effect
			if ps := t.Prescription; ps != nil && len(ps.Arguments) > 0 {
				what += " " + host.JoinOr(ps.Arguments, "")
			}
			if what == "" {
				what = "observed"
			}
			item.Fields = append(item.Fields, host.InboxField{Label: "Transition " + flow.LocalID(t.ID), Value: what + "; authority " + host.JoinOr(t.Authority, "")})
		}
		sec.Items = append(sec.Items, item)
	}
	return sec, nil
}

// approvalItem is how one approval request shows to person in the inbox
// and on the instance page: its summary first, a link to the instance
// (see decorateApprovalCard), then what it will apply, as recorded when it was filed (staged values next to the
// current ones, the tool, the Recipe, key facts), and its parameters with
// secret values hidden.
func (s *Part) approvalItem(ctx context.Context, a flow.Approval, names map[string]string, person store.Principal) host.InboxItem {
	programID := "?"
	if p, err := s.flows.Program(ctx, a.Program); err == nil {
		programID = p.ID()
	}
	item := host.InboxItem{
		Title: fmt.Sprintf("Step “%s” of %s waits for your approval", host.PlainValue(flow.LocalID(a.Transition)), a.Instance),
		Fields: []host.InboxField{
			{Label: "What approving achieves", Value: a.ExpectedPostcondition},
			{Label: "Asked by", Value: host.NameOr(names, a.Requester)},
			{Label: "Process", Value: programID},
		},
		Details: []host.InboxField{
			{Label: "Transition", Value: a.Transition},
			{Label: "Operation", Value: a.Operation},
			{Label: "Capabilities", Value: host.JoinOr(a.RequiredCapabilities, "none")},
			{Label: "Approval adds", Value: flow.CapabilityHumanApprove + ", for this one admission"},
			{Label: "Program fingerprint", Value: a.Program},
			{Label: "Instance revision", Value: fmt.Sprint(a.Revision)},
		},
		Note: "Approving lets this step run once, with your permissions, and applies exactly what is shown here. If any of it has changed since it was asked, nothing is applied.",
		Actions: []host.InboxAction{
			{Label: "Approve", URL: "/web/flows/approvals/" + a.ID + "/approve", Primary: true},
			{Label: "Decline", URL: "/web/flows/approvals/" + a.ID + "/decline", Danger: true, Input: "reason", InputLabel: "Reason for declining (optional)"},
		},
	}
	if !a.Deadline.IsZero() {
		item.Fields = append(item.Fields, host.InboxTime("Decide by", a.Deadline),
			host.InboxField{Label: "If nobody decides by then", Value: deadlineWords(a)})
	}
	if a.Escalated() {
		from := "the requester's supervisors"
		if a.EscalatedFrom != "" {
			from = "group " + a.EscalatedFrom
		}
		item.Fields = append(item.Fields, host.InboxField{Label: "Escalated", Value: fmt.Sprintf("escalated to group %s: nobody of %s decided before the first deadline", a.Group, from)},
			host.InboxTime("Escalated at", a.EscalatedAt))
	}
	decorateApprovalCard(&item, a, person)
	decorateQuorum(&item, a, names, person)
	item.Decision = s.approvalDecision(a, programID)
	item.Decision.AlreadyApproved = a.ApprovedBy(person.ID)
	if len(a.Arguments) > 0 {
		item.Details = append(item.Details, host.InboxField{Label: "Arguments", Value: host.JoinOr(a.Arguments, "")})
	}
	if a.Objective != "" {
		item.Fields = append(item.Fields, host.InboxField{Label: "Goal", Value: host.PlainValue(a.Objective)})
		item.Details = append(item.Details, host.InboxField{Label: "Objective", Value: a.Objective})
	}
	for _, b := range a.Bindings {
		item.Fields = append(item.Fields, bindingField(b))
		if b.Kind == flow.BindingFact {
			item.Details = append(item.Details, host.InboxField{Label: "Fact " + b.Name, Value: b.Value})
		}
		if b.Kind == "control" {
			item.Details = append(item.Details, host.InboxField{Label: "Control " + b.Name, Value: fmt.Sprintf("proposal revision %d", b.Revision)})
		}
	}
	inputs := s.paramInputs.get(programID)
	for _, prm := range a.Parameters {
		in := inputs[prm.Name]
		v := in.shown(prm.Value)
		if prm.Secret {
			v = "(secret, hidden)"
		}
		item.Fields = append(item.Fields, host.InboxField{Label: in.label(prm.Name), Value: v})
		item.Details = append(item.Details, host.InboxField{Label: "Parameter", Value: prm.Name})
	}
	if w := changedWords(a, names, inputs); w != "" {
		item.Fields = append(item.Fields, host.InboxField{Label: "Changed before approving", Value: w})
		if a.People() > 1 {
			item.Warn = "The values were changed after the agent asked, so approvals given before the change no longer count: " + morePeople(a.Needs()) + " must approve what is shown now."
		}
	}
	return item
}

// deadlineWords says what a's deadline does.
func deadlineWords(a flow.Approval) string {
	if a.EscalateTo != "" && !a.Escalated() {
		return fmt.Sprintf("It is escalated to group %s, which has as long again to decide; then it is declined with the reason %q", a.EscalateTo, flow.NoDecision)
	}
	return fmt.Sprintf("It is declined with the reason %q, and nothing is applied", flow.NoDecision)
}

// approvalDecision makes an approval's card decidable: approving admits
// the transition at the instance revision the card shows, declining sends
// the note to the requester as the reason.
func (s *Part) approvalDecision(a flow.Approval, programID string) *host.Decision {
	rev := strconv.FormatInt(a.Revision, 10)
	inputs := s.paramInputs.get(programID)
	bound := map[string]string{"approval": a.ID, "instance": a.Instance, "instance_revision": rev,
		"transition": a.Transition, "program": programID}
	for _, b := range a.Bindings {
		f := bindingField(b)
		bound[f.Label] = f.Value
	}
	for _, prm := range a.Parameters {
		v := inputs[prm.Name].shown(prm.Value)
		if prm.Secret {
			v = "(secret, hidden)"
		}
		bound["Parameter "+prm.Name] = v
	}
	for _, c := range a.ChangedParameters() {
		bound["Asked for "+c.Name] = inputs[c.Name].shown(c.Was)
	}
	if !a.Deadline.IsZero() {
		bound["deadline"] = a.Deadline.UTC().Format("2006-01-02T15:04:05Z")
		bound["fallback"] = a.Fallback
	}
	if a.Escalated() {
		bound["escalated_to"] = a.Group
	}
	return &host.Decision{
		Key: "flow_approval:" + a.ID, Binding: approvalBinding(a), Kind: "flow_approval",
		Bound: bound, ProposedBy: a.Requester, Group: route.FlowApprovalGroup(a), DeclineNote: true, Needs: a.Needs(),
		Edits: s.approvalEdits(a, programID),
		Decide: func(ctx context.Context, p store.Principal, d host.DecideArgs) (string, error) {
			decision := "decline"
			if d.Approve {
				decision = "approve"
			}
			var out any
			var err error
			if d.Approve && len(d.Values) > 0 {
				values, verr := editedValues(d.Values)
				if verr != nil {
					return "", verr
				}
				out, _, err = s.ApproveEdited(ctx, p, a.ID, sameNumbers(a, values), a.Edition())
			} else {
				out, _, err = s.Decide(ctx, p, a.ID, decision, d.Note)
			}
			if err != nil {
				return "", flowError(err)
			}
			if rc, ok := out.(flow.Receipt); ok {
				if now, err := s.flows.Approval(ctx, a.ID); err == nil && now.Edition() > a.Edition() {
					return fmt.Sprintf("Approved with your changes and applied %s: receipt %s, revision %d. The agent is told what you changed.", a.Transition, rc.ID, rc.Revision), nil
				}
				return fmt.Sprintf("Approved and applied %s: receipt %s, revision %d.", a.Transition, rc.ID, rc.Revision), nil
			}
			if now, ok := out.(flow.Approval); ok && now.Status == flow.ApprovalPending {
				if now.Edition() > a.Edition() {
					return fmt.Sprintf("Your changes and your approval of %s are recorded; approvals given before your change no longer count, so it needs %s before it runs.", a.Transition, morePeople(now.Needs())), nil
				}
				return fmt.Sprintf("Your approval of %s is recorded; it needs %s before it runs.", a.Transition, morePeople(now.Needs())), nil
			}
			return "Declined " + a.Transition + ".", nil
		},
	}
}

// programDecision makes a proposed program's card decidable.
func (s *Part) programDecision(id, fingerprint, by string) *host.Decision {
	return &host.Decision{
		Key: "flow_program:" + fingerprint, Binding: "proposed", Kind: "flow_program",
		Bound: map[string]string{"program": id, "fingerprint": fingerprint}, ProposedBy: by, DeclineNote: true,
		Decide: func(ctx context.Context, p store.Principal, d host.DecideArgs) (string, error) {
			decision := "decline"
			if d.Approve {
				decision = "approve"
			}
			l, err := s.flowDecideProgram(ctx, p, fingerprint, decision, d.Note)
			if err != nil {
				return "", flowError(err)
			}
			return fmt.Sprintf("Program %s (%s) is now %s.", l.ProgramID, l.Fingerprint, l.Status), nil
		},
	}
}

// bindingField shows one binding of an approval in a person's words; the
// runtime's names and revisions go to the card's technical details.
func bindingField(b flow.Binding) host.InboxField {
	switch b.Kind {
	case "control":
		if b.Secret {
			return host.InboxField{Label: b.Name, Value: "changes to a hidden value"}
		}
		return host.InboxField{Label: b.Name, Value: fmt.Sprintf("changes from %q to %q", b.Current, b.Value)}
	case "tool":
		return host.InboxField{Label: "Tool", Value: b.Value}
	case "recipe":
		if b.Value == "" {
			return host.InboxField{Label: "Command " + b.Name, Value: "(no values)"}
		}
		return host.InboxField{Label: "Command " + b.Name, Value: b.Value}
	case flow.BindingFact:
		if strings.HasSuffix(b.Name, "iban") && !strings.HasPrefix(b.Value, "(") {
			return host.InboxField{Label: host.PlainName(b.Name), Value: ShowIBAN(b.Value)}
		}
		return host.InboxField{Label: host.PlainName(b.Name), Value: host.PlainValue(b.Value)}
	}
	v := b.Value
	if b.Secret {
		v = "(secret, hidden)"
	}
	return host.InboxField{Label: host.PlainName(b.Kind + " " + b.Name), Value: v}
}

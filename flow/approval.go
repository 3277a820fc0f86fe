package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent/flow/jcs"
)

// ApprovalStatus is the state of an approval request.
type ApprovalStatus string

// Approval statuses.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalDeclined ApprovalStatus = "declined"
	// ApprovalStale: the instance moved on before a person decided.
	ApprovalStale ApprovalStatus = "stale"
	// ApprovalApproving: a person approved and the transition is being
	// applied. It was claimed in the transaction that marked the instance
	// as applying, so no one else can decide it meanwhile; it becomes
	// approved in the transaction that commits the transition, or pending
	// again when the transition is not applied.
	ApprovalApproving ApprovalStatus = "approving"
)

// Approval is a request for a person to assent to a transition that an
// agent (or another principal) may not take alone. It shows what a person
// needs to decide: the transition, what it will do, the capabilities it
// needs, its parameters with secret values hidden, and the program
// fingerprint that pins the control law.
type Approval struct {
	ID                    string              `json:"id"`
	Instance              string              `json:"instance_id"`
	Revision              int64               `json:"revision"`
	Program               string              `json:"program_fingerprint"`
	Transition            string              `json:"transition"`
	Objective             string              `json:"objective,omitempty"`
	Requester             string              `json:"requester"`
	Awaiting              string              `json:"awaiting"`
	Operation             string              `json:"operation"`
	Arguments             []string            `json:"arguments,omitempty"`
	ExpectedPostcondition string              `json:"expected_postcondition"`
	RequiredCapabilities  []string            `json:"required_capabilities"`
	Parameters            []ApprovalParameter `json:"parameters,omitempty"`
	// Bindings is what approving will act on, recorded when the request
	// was filed: key facts, and what the transition's effect names (staged
	// control values and their revisions, the tool, the Recipe).
	Bindings []Binding `json:"bindings,omitempty"`
	// Summary is the decision in one sentence, written when the request
	// was filed by the kernel's Summarizer from what it records (secret
	// values hidden); SummaryLines add detail, such as each control's
	// current and proposed value or what the step after this one does.
	Summary      string         `json:"summary,omitempty"`
	SummaryLines []string       `json:"summary_lines,omitempty"`
	Status       ApprovalStatus `json:"status"`
	// Quorum is how many distinct people must approve before the
	// transition is applied (one when zero); Group, when set, is the group
	// they must belong to. Both come from the transition's approval rule.
	Quorum int    `json:"quorum,omitempty"`
	Group  string `json:"group,omitempty"`
	// Approvers are the people who have approved so far, in order; the
	// last one of a quorum is the one whose approval applied it.
	Approvers []Approver `json:"approvers,omitempty"`
	// Deadline, when set, is when a pending approval stops waiting for
	// people and takes its Fallback (FallbackDecline): it comes from the
	// transition's approval rule, counted from when it was filed.
	Deadline time.Time `json:"deadline,omitzero"`
	Fallback string    `json:"fallback,omitempty"`
	// EscalateTo, when set, is the group the approval is routed to at its
	// first deadline, instead of taking the fallback; a second deadline
	// of the same length then starts. EscalatedFrom (the group it was
	// routed to before, empty for the requester's supervisors) and
	// EscalatedAt record that it happened.
	EscalateTo    string    `json:"escalate_to,omitempty"`
	EscalatedFrom string    `json:"escalated_from,omitempty"`
	EscalatedAt   time.Time `json:"escalated_at,omitzero"`
	// Edits are the changes people made to the parameters before
	// approving, oldest first: each says who changed what, from which
	// value to which. Parameters and Bindings are those of the newest
	// version, which is what approving applies; a change resets
	// Approvers, since the earlier approvals were of other values.
	Edits []ApprovalEdit `json:"edits,omitempty"`
	// Changed says, for a stale approval, what moved since it was filed.
	Changed   []string  `json:"changed,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Decider   string    `json:"decider,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Receipt   string    `json:"receipt,omitempty"`
}

// Approver is one person's approval of an approval request.
type Approver struct {
	Person string    `json:"person"`
	At     time.Time `json:"at"`
}

// People returns how many distinct people must approve a: its quorum, at
// least 1.
func (a *Approval) People() int { return max(a.Quorum, 1) }

// Needs returns how many more people must approve a pending approval
// before it is applied; 0 once it is no longer pending.
func (a *Approval) Needs() int {
	if a.Status != ApprovalPending {
		return 0
	}
	return max(a.People()-len(a.Approvers), 0)
}

// ApprovedBy reports whether person is among a's approvers.
func (a *Approval) ApprovedBy(person string) bool {
	return slices.ContainsFunc(a.Approvers, func(v Approver) bool { return v.Person == person })
}

// Groups tells whether a person is a member of a named group of
// approvers, for approvals whose transition asks for people of a group.
type Groups interface {
	IsMember(ctx context.Context, group, person string) (bool, error)
}

// AnyPerson is the Groups that counts every person who may decide an
// approval as a member of every group: it is the kernel's default until a
// deployment says who belongs to which group.
type AnyPerson struct{}

// IsMember implements Groups: it is always true.
func (AnyPerson) IsMember(context.Context, string, string) (bool, error) { return true, nil }

// WithGroups sets who belongs to the groups that approval rules name. The
// default is AnyPerson.
func WithGroups(g Groups) Option { return func(k *Kernel) { k.groups = g } }

// ApprovalParameter is one parameter as a person sees it; a secret one has
// no value, only a salted digest that detects a change.
type ApprovalParameter struct {
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
	Secret bool   `json:"secret,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// RequestApproval records a request for a person to approve what requester
// asked for. The decision for requester must be FRONTIER awaiting human;
// parameters must be complete. The approval records what approving would
// act on (its bindings: key facts, and what the effect's Binder reports),
// the parameters with secret values replaced by digests, and is addressed
// by all of it: asking twice for the same thing at the same revision
// returns the same approval, and asking after something moved files a new
// one. Secret parameter values are held in memory until a person decides.
func (k *Kernel) RequestApproval(ctx context.Context, instance string, requester Principal, req Request) (Approval, error) {
	return k.requestApproval(ctx, instance, requester, req, false)
}

// RequestApprovalAgain is RequestApproval for a requester who asks a person
// again after a decline: when the same request was declined, it files a
// new approval for it instead of returning the declined one. Each new
// approval follows the declined one it replaces, so RequestApproval then
// returns the newest.
func (k *Kernel) RequestApprovalAgain(ctx context.Context, instance string, requester Principal, req Request) (Approval, error) {
	return k.requestApproval(ctx, instance, requester, req, true)
}

// maxAskAgain bounds how many times one request may be asked again.
const maxAskAgain = 1000

// askedAgainID is the id of the approval that asks again for what the
// declined approval id asked.
func askedAgainID(id string) string {
	return contentID("apr-", []byte(id+"\x00asked-again"))
}

func (k *Kernel) requestApproval(ctx context.Context, instance string, requester Principal, req Request, again bool) (Approval, error) {
	if err := requester.Validate(); err != nil {
		return Approval{}, err
	}
	inst, err := k.Instance(ctx, instance)
	if err != nil {
		return Approval{}, err
	}
	p, err := k.Program(ctx, inst.Program)
	if err != nil {
		return Approval{}, err
	}
	d := Resolve(p, k.inv, &inst, &requester, req, k.now())
	if d.Kind != Frontier || d.Awaiting != AuthorityHuman {
		msg := d.Message
		if msg == "" {
			msg = "the decision is " + string(d.Kind)
		}
		return Approval{}, errorf(CodeNotPrescribed, "nothing awaits a person's approval: %s", msg)
	}
	t := p.lookup(d.Transition)
	objective := inst.Objective
	if objective == "" {
		objective = req.Objective
	}
	a := Approval{
		Instance:             inst.ID,
		Revision:             inst.Revision,
		Program:              p.Fingerprint(),
		Transition:           t.ID,
		Objective:            objective,
		Requester:            requester.ID,
		Awaiting:             d.Awaiting,
		RequiredCapabilities: requiredCapabilities(t, k.inv),
		Status:               ApprovalPending,
		CreatedAt:            k.now().UTC(),
	}
	if r := t.Approval; r != nil {
		a.Quorum, a.Group = r.People(), r.Group
		if d := r.Deadline(); d > 0 {
			a.Deadline, a.Fallback, a.EscalateTo = a.CreatedAt.Add(d), FallbackDecline, r.EscalateTo
		}
	}
	if ps := t.Prescription; ps != nil {
		a.Operation, a.Arguments, a.ExpectedPostcondition = ps.Operation, slices.Clone(ps.Arguments), ps.ExpectedPostcondition
	}
	public, secrets := map[string]string{}, map[string]string{}
	for name := range req.Parameters {
		if !slices.ContainsFunc(t.Parameters, func(prm Parameter) bool { return prm.Name == name }) {
			return Approval{}, errorf(CodeParameterUnknown, "transition %s has no parameter %q", t.ID, name)
		}
	}
	var missing []string
	for _, prm := range t.Parameters {
		v, ok := req.Parameters[prm.Name]
		if !ok {
			if prm.Required {
				missing = append(missing, prm.Name)
			}
			continue
		}
		ap := ApprovalParameter{Name: prm.Name, Value: v, Secret: prm.Secret}
		if prm.Secret {
			ap.Value, ap.Digest = "", parameterDigest(inst.ID, prm.Name, v)
			secrets[prm.Name] = v
		} else {
			public[prm.Name] = v
		}
		a.Parameters = append(a.Parameters, ap)
	}
	if len(missing) > 0 {
		return Approval{}, errorf(CodeNotPrescribed, "transition %s needs parameters %v before a person can approve it", t.ID, missing)
	}
	if err := k.checkParameters(ctx, p, t, req.Parameters); err != nil {
		return Approval{}, err
	}
	if a.Bindings, err = k.bind(ctx, t, &inst, requester, req.Parameters); err != nil {
		return Approval{}, err
	}
	a.ID = approvalID(&a, t, req.Parameters)
	if k.summarize != nil {
		sum := k.summarize.Summarize(ctx, &SummaryRequest{
			Program: p, Instance: inst.Clone(), Transition: t.clone(),
			Parameters: slices.Clone(a.Parameters), Bindings: slices.Clone(a.Bindings),
		})
		a.Summary = summaryText(sum.Text)
		for i, l := range sum.Lines {
			if i == maxSummaryLines {
				break
			}
			a.SummaryLines = append(a.SummaryLines, summaryText(l))
		}
	}
	if len(public) == 0 {
		public = nil
	}
	rec := ApprovalRecord{Approval: a, Parameters: public}
	err = k.store.Update(ctx, func(tx Tx) error {
		// The same request again is the same approval, unless that one
		// went stale without anything moving (its secret values were lost
		// in a restart): then it is filed afresh.
		// A declined request is followed by the one that asked again, if
		// any; the newest is the answer.
		id := a.ID
		for n := 0; ; n++ {
			old, err := tx.Approval(id)
			if err != nil || old.Approval.Status == ApprovalStale {
				break
			}
			if n == maxAskAgain {
				return errorf(CodeNotPrescribed, "a person declined this request %d times; request another transition", n)
			}
			if old.Approval.Status != ApprovalDeclined {
				a = old.Approval
				return nil
			}
			next := askedAgainID(id)
			if _, err := tx.Approval(next); err != nil && !again {
				a = old.Approval
				return nil
			}
			id = next
		}
		a.ID, rec.Approval.ID = id, id
		return tx.PutApproval(rec)
	})
	if err == nil && a.Status == ApprovalPending && len(secrets) > 0 {
		k.vault.put(a.ID, secrets)
	}
	return a, err
}

// Bounds of an approval's summary.
const (
	maxSummaryBytes = 1024
	maxSummaryLines = 64
)

// summaryText bounds one line of a summary and keeps it valid UTF-8.
func summaryText(s string) string {
	return strings.ToValidUTF8(truncate(s, maxSummaryBytes), "")
}

// Summary is an approval in a person's words: Text is the one sentence
// read first ("Approve 1,250.00 EUR for …"), Lines add detail.
type Summary struct {
	Text  string
	Lines []string
}

// SummaryRequest is what a Summarizer reads when an approval is filed: the
// program, the instance at that revision, the transition, the approval's
// parameters (secret values already hidden) and its bindings.
type SummaryRequest struct {
	Program    *Program
	Instance   Instance
	Transition Transition
	Parameters []ApprovalParameter
	Bindings   []Binding
}

// Summarizer writes the summary recorded on an approval when it is filed.
// It must not reveal secret values; it never sees them.
type Summarizer interface {
	Summarize(ctx context.Context, req *SummaryRequest) Summary
}

// SummarizerFunc adapts a function to Summarizer.
type SummarizerFunc func(ctx context.Context, req *SummaryRequest) Summary

// Summarize calls f.
func (f SummarizerFunc) Summarize(ctx context.Context, req *SummaryRequest) Summary {
	return f(ctx, req)
}

// WithSummarizer sets how approvals are summarized for the person who
// decides them. Without one, approvals carry no summary.
func WithSummarizer(s Summarizer) Option { return func(k *Kernel) { k.summarize = s } }

// bind records what applying t now would act on: the key facts (the facets
// of its source conditions) and what its effect's Binder reports.
func (k *Kernel) bind(ctx context.Context, t *Transition, inst *Instance, pr Principal, params map[string]string) ([]Binding, error) {
	var out []Binding
	for _, c := range t.SourceConditions {
		if c.Facet == PhaseFacet || slices.ContainsFunc(out, func(b Binding) bool { return b.Name == c.Facet }) {
			continue
		}
		f := inst.Fact(c.Facet)
		v := f.Value
		if f.Status != StatusKnown || v == "" {
			v = "(" + f.Status + ")"
		}
		out = append(out, Binding{Kind: BindingFact, Name: c.Facet, Value: v})
	}
	def, ok := k.inv.effect(t.Effect)
	if !ok || def.binder == nil {
		return out, nil
	}
	req := &EffectRequest{Instance: inst.Clone(), Transition: t.clone(), Parameters: cloneMap(params), Principal: pr}
	if t.Prescription != nil {
		req.Arguments = slices.Clone(t.Prescription.Arguments)
	}
	bs, err := def.binder.Bind(ctx, req)
	if err != nil {
		code := ErrorCode(err)
		if code == "" {
			code = CodeNotPrescribed
		}
		return nil, &Error{Code: code, Message: fmt.Sprintf("what %s would act on cannot be recorded for a person to approve: %v", t.ID, err)}
	}
	return append(out, bs...), nil
}

// BindingFact is the kind of a binding that records a key fact.
const BindingFact = "fact"

// diffBindings describes what moved between the bindings a person saw
// (was) and those now; nothing when they are equal.
func diffBindings(was, now []Binding) []string {
	key := func(b Binding) string { return b.Kind + "\x00" + b.Name }
	cur := make(map[string]Binding, len(now))
	for _, b := range now {
		cur[key(b)] = b
	}
	var out []string
	seen := map[string]bool{}
	for _, b := range was {
		seen[key(b)] = true
		n, ok := cur[key(b)]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s %s: no longer there", b.Kind, b.Name))
		case n != b:
			cur := n.Current != b.Current
			out = append(out, fmt.Sprintf("%s %s: was %s, now %s", b.Kind, b.Name, describeBinding(b, cur), describeBinding(n, cur)))
		}
	}
	for _, b := range now {
		if !seen[key(b)] {
			out = append(out, fmt.Sprintf("%s %s: new, %s", b.Kind, b.Name, describeBinding(b, true)))
		}
	}
	return out
}

// describeBinding says what b binds, with the value in effect now when
// current is set.
func describeBinding(b Binding, current bool) string {
	v := fmt.Sprintf("%q", b.Value)
	if b.Secret {
		v = "a secret value"
	}
	if b.Revision != 0 {
		v += fmt.Sprintf(" (revision %d)", b.Revision)
	}
	if current && b.Current != "" {
		v += fmt.Sprintf(" replacing %q", b.Current)
	}
	return v
}

// secretVault holds the secret parameter values of pending approvals in
// memory only: they are never stored with the approval. A restart forgets
// them; such an approval can no longer be approved, and the requester asks
// again.
type secretVault struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

func (v *secretVault) put(id string, values map[string]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = make(map[string]map[string]string)
	}
	v.m[id] = cloneMap(values)
}

func (v *secretVault) get(id string) map[string]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return cloneMap(v.m[id])
}

func (v *secretVault) forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, id)
}

// approvalID content-addresses what is asked: bindings, instance,
// revision, program, transition, objective, requester and parameters
// (secret ones digested).
func approvalID(a *Approval, t *Transition, params map[string]string) string {
	b := append([]byte(nil), `{"bindings":[`...)
	for i, bd := range a.Bindings {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"current":`...)
		b = jcs.AppendString(b, bd.Current)
		b = append(b, `,"digest":`...)
		b = jcs.AppendString(b, bd.Digest)
		b = append(b, `,"kind":`...)
		b = jcs.AppendString(b, bd.Kind)
		b = append(b, `,"name":`...)
		b = jcs.AppendString(b, bd.Name)
		b = append(b, `,"revision":`...)
		b = jcs.AppendInt(b, bd.Revision)
		b = append(b, `,"secret":`...)
		b = strconv.AppendBool(b, bd.Secret)
		b = append(b, `,"value":`...)
		b = jcs.AppendString(b, bd.Value)
		b = append(b, '}')
	}
	b = append(b, `],"instance_id":`...)
	b = jcs.AppendString(b, a.Instance)
	b = append(b, `,"objective":`...)
	b = jcs.AppendString(b, a.Objective)
	b = append(b, `,"parameters":{`...)
	for i, prm := range t.Parameters {
		v, ok := params[prm.Name]
		if !ok {
			continue
		}
		if prm.Secret {
			v = parameterDigest(a.Instance, prm.Name, v)
		}
		if i > 0 && b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = jcs.AppendString(b, prm.Name)
		b = append(b, ':')
		b = jcs.AppendString(b, v)
	}
	b = append(b, `},"program_fingerprint":`...)
	b = jcs.AppendString(b, a.Program)
	b = append(b, `,"requester":`...)
	b = jcs.AppendString(b, a.Requester)
	b = append(b, `,"revision":`...)
	b = jcs.AppendInt(b, a.Revision)
	b = append(b, `,"transition":`...)
	b = jcs.AppendString(b, a.Transition)
	b = append(b, '}')
	return contentID("apr-", b)
}

// Approval returns an approval request; the requester polls it to learn
// the outcome.
func (k *Kernel) Approval(ctx context.Context, id string) (Approval, error) {
	var rec ApprovalRecord
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		rec, err = tx.Approval(id)
		return err
	})
	return rec.Approval, notFound(err, "approval", id)
}

// InstanceApprovals lists every approval of an instance, oldest first: the
// pending ones, and the decided or stale ones with who decided, the reason
// of a decline and what changed for a stale one.
func (k *Kernel) InstanceApprovals(ctx context.Context, instance string) ([]Approval, error) {
	var out []Approval
	err := k.store.View(ctx, func(tx Tx) error {
		recs, err := tx.InstanceApprovals(instance)
		for _, r := range recs {
			out = append(out, r.Approval)
		}
		return err
	})
	return out, err
}

// PendingApprovals lists the approvals waiting for a person.
func (k *Kernel) PendingApprovals(ctx context.Context) ([]Approval, error) {
	var out []Approval
	err := k.store.View(ctx, func(tx Tx) error {
		recs, err := tx.PendingApprovals()
		for _, r := range recs {
			out = append(out, r.Approval)
		}
		return err
	})
	return out, err
}

// Approve admits and applies the approved transition with the person's
// grants plus human.approve, for this one admission, and returns the
// receipt. person must be a human. An approval whose instance has moved on
// becomes stale (APPROVAL_CLOSED). Approving applies exactly what the
// approval recorded: the effect's bindings are taken again and compared
// with those the person saw, and the effect receives the recorded ones. If
// anything moved (a staged value or its revision, a tool, a Recipe, a key
// fact) or a secret parameter value is no longer held (after a restart),
// the approval becomes stale, Changed says what moved, nothing is applied
// and the error is STALE_PRESCRIPTION.
//
// An approval whose transition asks for several people (Quorum) counts
// each person once: a person who already approved is refused with
// ALREADY_APPROVED. Each approval before the last is checked the same way
// and recorded among Approvers, and Approve then returns
// MORE_PEOPLE_NEEDED with nothing applied; the transition is applied when
// the last person needed approves, and that person's approval is recorded
// in the transaction that claims the approval for the apply. When Group
// is set, only members of the group (see WithGroups) may approve or
// decline.
func (k *Kernel) Approve(ctx context.Context, id string, person Principal) (Receipt, error) {
	rec, err := k.openApproval(ctx, id, person)
	if err != nil {
		return Receipt{}, err
	}
	a := rec.Approval
	if a.ApprovedBy(person.ID) {
		return Receipt{}, alreadyApproved(&a)
	}
	admitted := person
	admitted.Grants = append(slices.Clone(person.Grants), CapabilityHumanApprove)
	// Only the approval's claim admits a transition with an approval
	// rule; the claim checks that the rule is met.
	admitted.quorate = true
	params := cloneMap(rec.Parameters)
	if params == nil {
		params = map[string]string{}
	}
	held := k.vault.get(id)
	var changed []string
	for _, prm := range a.Parameters {
		if !prm.Secret {
			continue
		}
		v, ok := held[prm.Name]
		if !ok || parameterDigest(a.Instance, prm.Name, v) != prm.Digest {
			changed = append(changed, fmt.Sprintf("parameter %s: its secret value is no longer held (the runtime restarted)", prm.Name))
			continue
		}
		params[prm.Name] = v
	}
	if len(changed) == 0 {
		changed, err = k.rebind(ctx, &a, admitted, params)
		if err != nil {
			return Receipt{}, err
		}
	}
	if len(changed) > 0 {
		if err := k.markStale(ctx, id, person.ID, changed); err != nil {
			return Receipt{}, err
		}
		return Receipt{}, errorf(CodeStalePrescription, "approval %s is stale and nothing was applied: what it would apply changed since it was filed (%s); the requester must ask again so that a person sees the new values",
			id, strings.Join(changed, "; "))
	}
	if a.People() > 1 {
		needs, err := k.recordApprover(ctx, id, person.ID)
		if err != nil {
			return Receipt{}, err
		}
		if needs > 0 {
			return Receipt{}, errorf(CodeMorePeopleNeeded, "your approval of %s is recorded; it needs %s before it is applied, and nothing was applied yet", id, morePeople(needs))
		}
	}
	d, err := k.Prescribe(ctx, a.Instance, admitted, Request{Transition: a.Transition, Objective: a.Objective, Parameters: params})
	if err != nil {
		return Receipt{}, err
	}
	if d.Kind != Prescribed {
		code := d.Code
		if code == "" {
			code = CodeNotPrescribed
		}
		return Receipt{}, errorf(code, "approval %s cannot be admitted for %s: %s", id, person.ID, d.Message)
	}
	receipt, err := k.apply(ctx, d.Prescription.ID, admitted, a.Bindings, &approvalClaim{id: id, person: person.ID}, nil)
	if err != nil {
		return Receipt{}, err
	}
	k.vault.forget(id)
	return receipt, nil
}

// recordApprover records person's approval of the pending approval id
// when it is not the last one needed, and returns how many more people
// are needed after it; when person would be the last one, it records
// nothing and returns 0: the apply's claim records that approval.
func (k *Kernel) recordApprover(ctx context.Context, id, person string) (int, error) {
	needs := 0
	err := k.store.Update(ctx, func(tx Tx) error {
		// A store may run fn again when its transaction fails to
		// serialize: start from nothing each time.
		needs = 0
		rec, err := tx.Approval(id)
		if err != nil {
			return notFound(err, "approval", id)
		}
		a := &rec.Approval
		if a.Status != ApprovalPending {
			return closedError(a)
		}
		if a.ApprovedBy(person) {
			return alreadyApproved(a)
		}
		if len(a.Approvers)+1 >= a.People() {
			return nil
		}
		a.Approvers = append(a.Approvers, Approver{Person: person, At: k.now().UTC()})
		needs = a.Needs()
		return tx.PutApproval(rec)
	})
	return needs, err
}

// alreadyApproved is the ALREADY_APPROVED error of a person who approved
// a before.
func alreadyApproved(a *Approval) error {
	return errorf(CodeAlreadyApproved, "you already approved %s; one person counts once, so it needs %s", a.ID, morePeople(a.Needs()))
}

// morePeople is "1 more person" or "n more people".
func morePeople(n int) string {
	if n == 1 {
		return "1 more person"
	}
	return strconv.Itoa(n) + " more people"
}

// approvalClaim names the approval an apply carries out and the person who
// approved it. The apply claims the approval (pending → approving) in the
// transaction that marks the instance as applying, records it approved in
// the transaction that commits, and hands it back (approving → pending)
// when the transition is not applied. A decline races the claim in the
// store: exactly one of them finds the approval pending.
type approvalClaim struct {
	id, person string
}

// claim moves the approval from pending to approving for c.person in tx.
// An approval that is no longer pending is APPROVAL_CLOSED, naming who
// decided it.
func (c *approvalClaim) claim(tx Tx, now time.Time) error {
	rec, err := tx.Approval(c.id)
	if err != nil {
		return notFound(err, "approval", c.id)
	}
	a := &rec.Approval
	if a.Status != ApprovalPending {
		return closedError(a)
	}
	if a.ApprovedBy(c.person) {
		return alreadyApproved(a)
	}
	if len(a.Approvers)+1 < a.People() {
		return errorf(CodeMorePeopleNeeded, "approval %s needs %s; approve it again to be counted", a.ID, morePeople(a.Needs()))
	}
	a.Approvers = append(a.Approvers, Approver{Person: c.person, At: now})
	a.Status, a.Decider, a.DecidedAt = ApprovalApproving, c.person, now
	return tx.PutApproval(rec)
}

// approve records the claimed approval approved with its receipt in tx,
// the transaction that commits the transition.
func (c *approvalClaim) approve(tx Tx, receipt string, now time.Time) error {
	rec, err := tx.Approval(c.id)
	if err != nil {
		return err
	}
	if rec.Approval.Status != ApprovalApproving || rec.Approval.Decider != c.person {
		return closedError(&rec.Approval)
	}
	rec.Approval.Status, rec.Approval.Receipt, rec.Approval.DecidedAt = ApprovalApproved, receipt, now
	rec.Parameters = nil
	return tx.PutApproval(rec)
}

// releaseClaims hands every approval of instance that an apply claimed
// back to pending, in tx: the transition was not applied, so the person's
// approval did not take effect and the request can be decided again.
func releaseClaims(tx Tx, instance string) error {
	recs, err := tx.InstanceApprovals(instance)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Approval.Status != ApprovalApproving {
			continue
		}
		// The claimer's approval did not take effect: it no longer
		// counts, and that person may approve again.
		a := &rec.Approval
		if n := len(a.Approvers); n > 0 && a.Approvers[n-1].Person == a.Decider {
			a.Approvers = a.Approvers[:n-1]
		}
		a.Status, a.Decider, a.DecidedAt = ApprovalPending, "", time.Time{}
		if err := tx.PutApproval(rec); err != nil {
			return err
		}
	}
	return nil
}

// closedError is the APPROVAL_CLOSED error for an approval that is no
// longer pending; it says who decided it and how.
func closedError(a *Approval) error {
	switch a.Status {
	case ApprovalApproving:
		return errorf(CodeApprovalClosed, "approval %s is already being approved by %s", a.ID, a.Decider)
	case ApprovalStale:
		return errorf(CodeApprovalClosed, "approval %s is already stale", a.ID)
	}
	if a.Decider != "" {
		return errorf(CodeApprovalClosed, "approval %s is already %s by %s", a.ID, a.Status, a.Decider)
	}
	return errorf(CodeApprovalClosed, "approval %s is already %s", a.ID, a.Status)
}

// rebind takes the bindings of a's transition again and says what moved.
func (k *Kernel) rebind(ctx context.Context, a *Approval, pr Principal, params map[string]string) ([]string, error) {
	inst, err := k.Instance(ctx, a.Instance)
	if err != nil {
		return nil, err
	}
	p, err := k.Program(ctx, a.Program)
	if err != nil {
		return nil, err
	}
	t := p.lookup(a.Transition)
	if t == nil {
		return []string{"transition " + a.Transition + " is gone"}, nil
	}
	now, err := k.bind(ctx, t, &inst, pr, params)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return []string{fe.Message}, nil
		}
		return nil, err
	}
	return diffBindings(a.Bindings, now), nil
}

// markStale closes a pending approval as stale when person tried to
// approve it, recording what changed.
func (k *Kernel) markStale(ctx context.Context, id, person string, changed []string) error {
	return k.decide(ctx, id, func(a *Approval) {
		a.Status, a.Decider, a.Changed = ApprovalStale, person, changed
	})
}

// Decline refuses an approval request; the requester sees status declined
// and the reason.
func (k *Kernel) Decline(ctx context.Context, id string, person Principal, reason string) (Approval, error) {
	if _, err := k.openApproval(ctx, id, person); err != nil {
		return Approval{}, err
	}
	var out Approval
	err := k.decide(ctx, id, func(a *Approval) {
		a.Status, a.Decider, a.Reason = ApprovalDeclined, person.ID, truncate(reason, 1024)
		out = *a
	})
	return out, err
}

// openApproval checks that person may decide approval id now.
func (k *Kernel) openApproval(ctx context.Context, id string, person Principal) (ApprovalRecord, error) {
	if err := person.Validate(); err != nil {
		return ApprovalRecord{}, err
	}
	if person.Kind != AuthorityHuman {
		return ApprovalRecord{}, errorf(CodeCapabilityDenied, "only a person can decide an approval; %s is %s", person.ID, person.Kind)
	}
	var rec ApprovalRecord
	stale := false
	err := k.store.Update(ctx, func(tx Tx) error {
		var err error
		if rec, err = tx.Approval(id); err != nil {
			return notFound(err, "approval", id)
		}
		if rec.Approval.Status != ApprovalPending {
			return closedError(&rec.Approval)
		}
		if rec.Approval.Overdue(k.now()) {
			// The sweep settles it shortly; nobody decides it meanwhile.
			return errorf(CodeApprovalClosed, "approval %s passed its deadline at %s; it is being settled as its rule says (declined, or escalated to another group)", id, rec.Approval.Deadline.Format(time.RFC3339))
		}
		inst, err := tx.Instance(rec.Approval.Instance)
		if err != nil {
			return notFound(err, "instance", rec.Approval.Instance)
		}
		if inst.Revision != rec.Approval.Revision || inst.Program != rec.Approval.Program {
			rec.Approval.Status = ApprovalStale
			rec.Approval.DecidedAt = k.now().UTC()
			rec.Approval.Changed = []string{fmt.Sprintf("instance %s: was at revision %d, now at %d", inst.ID, rec.Approval.Revision, inst.Revision)}
			rec.Parameters = nil
			stale = true
			return tx.PutApproval(rec)
		}
		return nil
	})
	if err == nil && stale {
		k.vault.forget(id)
		return rec, errorf(CodeApprovalClosed, "approval %s is stale: instance %s moved on since it was requested", id, rec.Approval.Instance)
	}
	if err != nil {
		return rec, err
	}
	if g := rec.Approval.Group; g != "" {
		ok, err := k.groups.IsMember(ctx, g, person.ID)
		if err != nil {
			return rec, fmt.Errorf("flow: checking whether %s is in group %s: %w", person.ID, g, err)
		}
		if !ok {
			return rec, errorf(CodeNotInGroup, "approval %s asks for people of group %s, and %s is not a member; ask a member of %s to decide it", id, g, person.ID, g)
		}
	}
	return rec, nil
}

// Overdue reports whether a is pending past its deadline at now.
func (a *Approval) Overdue(now time.Time) bool {
	return a.Status == ApprovalPending && !a.Deadline.IsZero() && !now.Before(a.Deadline)
}

// Escalated reports whether a was routed to its EscalateTo group at its
// first deadline.
func (a *Approval) Escalated() bool { return !a.EscalatedAt.IsZero() }

// SettleOverdue settles every pending approval whose deadline has passed,
// and returns those it changed. An approval with a group to escalate to,
// not yet escalated, is routed to that group (Group becomes EscalateTo)
// and given a second deadline as long as the first, counted from now; any
// other is declined with the reason NoDecision and no decider. Each change
// is the same compare-and-set in the store as a person's decline: an
// approval that a person decided meanwhile, or that another kernel on the
// same store settled first, is left as it is and not returned, so each
// deadline acts once across nodes and after a restart.
func (k *Kernel) SettleOverdue(ctx context.Context) ([]Approval, error) {
	due, err := k.dueApprovals(ctx, k.now())
	if err != nil {
		return nil, fmt.Errorf("flow: listing approvals past their deadline: %w", err)
	}
	var out []Approval
	for _, a := range due {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if !a.Overdue(k.now()) {
			continue
		}
		var got Approval
		err := k.decideIf(ctx, a.ID, func(a *Approval) bool {
			// Read again in the transaction: the deadline is checked
			// on the record the write replaces.
			now := k.now().UTC()
			if !a.Overdue(now) {
				return false
			}
			if a.EscalateTo != "" && !a.Escalated() {
				length := a.Deadline.Sub(a.CreatedAt)
				a.EscalatedFrom, a.Group, a.EscalatedAt = a.Group, a.EscalateTo, now
				a.Deadline = now.Add(length)
			} else {
				a.Status, a.Decider, a.Reason = ApprovalDeclined, "", NoDecision
			}
			got = *a
			return true
		})
		switch {
		case ErrorCode(err) == CodeApprovalClosed || errors.Is(err, errNotOverdue):
			continue
		case err != nil:
			return out, err
		}
		out = append(out, got)
	}
	return out, nil
}

// errNotOverdue ends a deadline's decline of an approval whose deadline
// moved or has not come.
var errNotOverdue = errors.New("flow: the approval is not past its deadline")

// decide updates a pending approval. A stale write (already decided) is
// reported as APPROVAL_CLOSED.
func (k *Kernel) decide(ctx context.Context, id string, fn func(*Approval)) error {
	return k.decideIf(ctx, id, func(a *Approval) bool { fn(a); return true })
}

// decideIf is decide where fn may leave the approval as it is, by
// returning false (decideIf then returns errNotOverdue), or change it and
// leave it pending (an escalation).
func (k *Kernel) decideIf(ctx context.Context, id string, fn func(*Approval) bool) error {
	stillPending := false
	err := k.store.Update(context.WithoutCancel(ctx), func(tx Tx) error {
		rec, err := tx.Approval(id)
		if err != nil {
			return err
		}
		if rec.Approval.Status != ApprovalPending {
			return closedError(&rec.Approval)
		}
		if !fn(&rec.Approval) {
			return errNotOverdue
		}
		if rec.Approval.Status == ApprovalPending {
			// Escalated, not decided: the parameters are still needed.
			stillPending = true
			return tx.PutApproval(rec)
		}
		rec.Approval.DecidedAt = k.now().UTC()
		// Decided: the raw parameter values are no longer needed.
		rec.Parameters = nil
		return tx.PutApproval(rec)
	})
	if errors.Is(err, errNotOverdue) || (err == nil && stillPending) {
		// Still pending: its secret values are still needed.
		return err
	}
	k.vault.forget(id)
	if err != nil {
		return fmt.Errorf("flow: recording the decision on %s: %w", id, err)
	}
	return nil
}

package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ApprovalEdit is one person's change to the parameters of a pending
// approval, made when approving it.
type ApprovalEdit struct {
	Person  string            `json:"person"`
	At      time.Time         `json:"at"`
	Changes []ParameterChange `json:"changes"`
}

// ParameterChange is one parameter's value before (Was) and after (Now) a
// person changed it.
type ParameterChange struct {
	Name string `json:"name"`
	Was  string `json:"was"`
	Now  string `json:"now"`
}

// Edition is how many times people changed a's parameters: a decision is
// made on the edition its card showed.
func (a *Approval) Edition() int { return len(a.Edits) }

// ChangedParameters is every parameter people changed on a, each with the
// value the requester asked for and the one approving applies, in the
// order the parameters were first changed.
func (a *Approval) ChangedParameters() []ParameterChange {
	var out []ParameterChange
	for _, e := range a.Edits {
		for _, c := range e.Changes {
			i := slices.IndexFunc(out, func(o ParameterChange) bool { return o.Name == c.Name })
			if i < 0 {
				out = append(out, c)
				continue
			}
			out[i].Now = c.Now
		}
	}
	return slices.DeleteFunc(out, func(c ParameterChange) bool { return c.Was == c.Now })
}

// String is the change as a person reads it: name: "was" → "now".
func (c ParameterChange) String() string {
	return fmt.Sprintf("%s: %q → %q", c.Name, c.Was, c.Now)
}

// ParameterCheck is the application's rule on the parameter values of a
// program's transitions (a bound on an amount, a payee that must be
// known). The kernel asks it whenever parameters are put before a person
// or admitted: an agent's request, a person's change before approving,
// the admission of an approved transition. An error refuses the values;
// best a *Error, whose code is kept, and otherwise PARAMETER_INVALID.
type ParameterCheck interface {
	CheckParameters(ctx context.Context, p *Program, t *Transition, params map[string]string) error
}

// ParameterCheckFunc adapts a function to ParameterCheck.
type ParameterCheckFunc func(ctx context.Context, p *Program, t *Transition, params map[string]string) error

// CheckParameters calls f.
func (f ParameterCheckFunc) CheckParameters(ctx context.Context, p *Program, t *Transition, params map[string]string) error {
	return f(ctx, p, t, params)
}

// WithParameterCheck sets the application's rule on parameter values.
// Without one, any value is accepted.
func WithParameterCheck(c ParameterCheck) Option { return func(k *Kernel) { k.check = c } }

// checkParameters runs the application's ParameterCheck on params of t,
// and returns its refusal as an *Error.
func (k *Kernel) checkParameters(ctx context.Context, p *Program, t *Transition, params map[string]string) error {
	if k.check == nil {
		return nil
	}
	tc := t.clone()
	err := k.check.CheckParameters(ctx, p, &tc, cloneMap(params))
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	return errorf(CodeParameterInvalid, "%s", truncate(err.Error(), 1024))
}

// Edit is a person's change to the parameters of a pending approval,
// made with their approval (see ApproveEdited).
type Edit struct {
	// Values are the parameter values the person sets, by name; a value
	// equal to the current one changes nothing.
	Values map[string]string
	// Edition is the approval's Edition on the card the person decided
	// on: when someone changed the values since, the decision is refused
	// APPROVAL_CHANGED and nothing changes.
	Edition int
	// Requester is the principal that filed the approval, as it is now:
	// the changed request is resolved for it, as its own request was.
	Requester Principal
}

// maxEditedValue bounds one parameter value a person sets.
const maxEditedValue = 4096

// ApproveEdited is Approve after person changes some parameters of the
// pending approval id. The changed values are checked by the rules of the
// requester's own request: the transition must still be what awaits a
// person for the requester with them (its admission, guards and
// parameters), the application's ParameterCheck must accept them, the
// effect must be able to record what it would act on, and person must be
// able to apply them. A refused change is an error (PARAMETER_UNKNOWN,
// PARAMETER_NOT_EDITABLE for a secret parameter, PARAMETER_INVALID,
// EDIT_REFUSED, APPROVAL_CHANGED) and changes nothing.
//
// An accepted change is recorded on the approval (Edits: who, when, each
// parameter's old and new value), with the parameters, bindings and
// summary of the new values, and earlier approvals no longer count
// towards the quorum. Then person's approval is given as Approve gives
// it, on the new values: what is applied is what the person approved.
// Values equal to the current ones make this Approve.
func (k *Kernel) ApproveEdited(ctx context.Context, id string, person Principal, e Edit) (Receipt, error) {
	rec, err := k.openApproval(ctx, id, person)
	if err != nil {
		return Receipt{}, err
	}
	a := rec.Approval
	if a.Edition() != e.Edition {
		return Receipt{}, approvalChanged(&a)
	}
	if a.ApprovedBy(person.ID) {
		return Receipt{}, alreadyApproved(&a)
	}
	if e.Requester.ID != a.Requester {
		return Receipt{}, errorf(CodeEditRefused, "approval %s was requested by %s, not %s", id, a.Requester, e.Requester.ID)
	}
	if err := e.Requester.Validate(); err != nil {
		return Receipt{}, err
	}
	inst, err := k.Instance(ctx, a.Instance)
	if err != nil {
		return Receipt{}, err
	}
	p, err := k.Program(ctx, a.Program)
	if err != nil {
		return Receipt{}, err
	}
	t := p.lookup(a.Transition)
	if t == nil {
		return Receipt{}, errorf(CodeEditRefused, "transition %s is no longer in the program", a.Transition)
	}
	current := cloneMap(rec.Parameters)
	if current == nil {
		current = map[string]string{}
	}
	var changes []ParameterChange
	for _, name := range sortedKeys(e.Values) {
		v := e.Values[name]
		i := slices.IndexFunc(t.Parameters, func(prm Parameter) bool { return prm.Name == name })
		switch {
		case i < 0:
			return Receipt{}, errorf(CodeParameterUnknown, "transition %s has no parameter %q to change", t.ID, name)
		case t.Parameters[i].Secret:
			return Receipt{}, errorf(CodeParameterNotEditable, "parameter %s is secret: it is never shown, so it cannot be changed before approving; decline and ask the requester to send the right value", name)
		case len(v) > maxEditedValue:
			return Receipt{}, errorf(CodeParameterInvalid, "the value of %s is over %d bytes; shorten it", name, maxEditedValue)
		case strings.ContainsRune(v, 0) || !utf8.ValidString(v):
			return Receipt{}, errorf(CodeParameterInvalid, "the value of %s is not text", name)
		}
		was, had := current[name]
		if had && was == v {
			continue
		}
		changes = append(changes, ParameterChange{Name: name, Was: was, Now: v})
	}
	if len(changes) == 0 {
		return k.Approve(ctx, id, person)
	}
	params := cloneMap(current)
	for _, c := range changes {
		params[c.Name] = c.Now
	}
	held := k.vault.get(id)
	for _, prm := range a.Parameters {
		if prm.Secret {
			v, ok := held[prm.Name]
			if !ok {
				return Receipt{}, errorf(CodeEditRefused, "the secret value of %s is no longer held (the runtime restarted); the requester must ask again", prm.Name)
			}
			params[prm.Name] = v
		}
	}
	// The requester's own request, with the person's values.
	req := Request{Transition: a.Transition, Objective: a.Objective, Parameters: params}
	d := Resolve(p, k.inv, &inst, &e.Requester, req, k.now())
	if d.Kind != Frontier || d.Awaiting != AuthorityHuman || d.Transition != a.Transition {
		msg := d.Message
		if msg == "" {
			msg = "the decision would be " + string(d.Kind)
		}
		return Receipt{}, errorf(CodeEditRefused, "with your values the request is refused as the requester's would be: %s; nothing changed", msg)
	}
	if err := k.checkParameters(ctx, p, t, params); err != nil {
		return Receipt{}, err
	}
	// The person's own admission, as approving would make it.
	admitted := person
	admitted.Grants = append(slices.Clone(person.Grants), CapabilityHumanApprove)
	admitted.quorate = true
	if d := Resolve(p, k.inv, &inst, &admitted, req, k.now()); d.Kind != Prescribed {
		return Receipt{}, errorf(CodeEditRefused, "with your values the step cannot be admitted for you: %s; nothing changed", d.Message)
	}
	bindings, err := k.bind(ctx, t, &inst, e.Requester, params)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return Receipt{}, errorf(CodeEditRefused, "%s; nothing changed", fe.Message)
		}
		return Receipt{}, err
	}
	var shown []ApprovalParameter
	for _, prm := range a.Parameters {
		if !prm.Secret {
			prm.Value = params[prm.Name]
		}
		shown = append(shown, prm)
	}
	for _, c := range changes {
		if c.Was == "" && !slices.ContainsFunc(shown, func(s ApprovalParameter) bool { return s.Name == c.Name }) {
			shown = append(shown, ApprovalParameter{Name: c.Name, Value: c.Now})
		}
	}
	// Keep the transition's order of parameters.
	slices.SortStableFunc(shown, func(x, y ApprovalParameter) int {
		return slices.IndexFunc(t.Parameters, func(prm Parameter) bool { return prm.Name == x.Name }) -
			slices.IndexFunc(t.Parameters, func(prm Parameter) bool { return prm.Name == y.Name })
	})
	var sum Summary
	if k.summarize != nil {
		sum = k.summarize.Summarize(ctx, &SummaryRequest{
			Program: p, Instance: inst.Clone(), Transition: t.clone(),
			Parameters: slices.Clone(shown), Bindings: slices.Clone(bindings),
		})
	}
	public := map[string]string{}
	for _, prm := range shown {
		if !prm.Secret {
			public[prm.Name] = prm.Value
		}
	}
	err = k.store.Update(ctx, func(tx Tx) error {
		cur, err := tx.Approval(id)
		if err != nil {
			return notFound(err, "approval", id)
		}
		ca := &cur.Approval
		switch {
		case ca.Status != ApprovalPending:
			return closedError(ca)
		case ca.Edition() != e.Edition:
			return approvalChanged(ca)
		case ca.Revision != inst.Revision:
			return errorf(CodeApprovalClosed, "approval %s is stale: instance %s moved on since it was requested", id, ca.Instance)
		}
		ca.Parameters, ca.Bindings = shown, bindings
		if k.summarize != nil {
			ca.Summary, ca.SummaryLines = summaryText(sum.Text), nil
			for i, l := range sum.Lines {
				if i == maxSummaryLines {
					break
				}
				ca.SummaryLines = append(ca.SummaryLines, summaryText(l))
			}
		}
		ca.Edits = append(ca.Edits, ApprovalEdit{Person: person.ID, At: k.now().UTC(), Changes: changes})
		// The earlier approvals were of other values.
		ca.Approvers = nil
		cur.Parameters = public
		if len(public) == 0 {
			cur.Parameters = nil
		}
		return tx.PutApproval(cur)
	})
	if err != nil {
		return Receipt{}, err
	}
	return k.Approve(ctx, id, person)
}

// approvalChanged is the APPROVAL_CHANGED error of a decision made on an
// older edition of a.
func approvalChanged(a *Approval) error {
	if len(a.Edits) == 0 {
		return errorf(CodeApprovalChanged, "approval %s does not have the values your card showed; nothing was done: read it again and decide on what it shows now", a.ID)
	}
	last := a.Edits[len(a.Edits)-1]
	return errorf(CodeApprovalChanged, "%s changed the values of approval %s after your card was read; nothing was done: read it again and decide on what it shows now", last.Person, a.ID)
}

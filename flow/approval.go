package flow

import (
	"context"
	"fmt"
	"slices"
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
	Status                ApprovalStatus      `json:"status"`
	CreatedAt             time.Time           `json:"created_at"`
	DecidedAt             time.Time           `json:"decided_at,omitzero"`
	Decider               string              `json:"decider,omitempty"`
	Reason                string              `json:"reason,omitempty"`
	Receipt               string              `json:"receipt,omitempty"`
}

// ApprovalParameter is one parameter as a person sees it; a secret one has
// no value.
type ApprovalParameter struct {
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
	Secret bool   `json:"secret,omitempty"`
}

// RequestApproval records a request for a person to approve what requester
// asked for. The decision for requester must be FRONTIER awaiting human;
// parameters must be complete. Asking twice for the same thing at the same
// revision returns the same approval.
func (k *Kernel) RequestApproval(ctx context.Context, instance string, requester Principal, req Request) (Approval, error) {
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
	if ps := t.Prescription; ps != nil {
		a.Operation, a.Arguments, a.ExpectedPostcondition = ps.Operation, slices.Clone(ps.Arguments), ps.ExpectedPostcondition
	}
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
			ap.Value = ""
		}
		a.Parameters = append(a.Parameters, ap)
	}
	if len(missing) > 0 {
		return Approval{}, errorf(CodeNotPrescribed, "transition %s needs parameters %v before a person can approve it", t.ID, missing)
	}
	a.ID = approvalID(&a, t, req.Parameters)
	rec := ApprovalRecord{Approval: a, Parameters: cloneMap(req.Parameters)}
	err = k.store.Update(ctx, func(tx Tx) error {
		if old, err := tx.Approval(a.ID); err == nil {
			a = old.Approval
			return nil
		}
		return tx.PutApproval(rec)
	})
	return a, err
}

// approvalID content-addresses what is asked: instance, revision, program,
// transition, objective, requester and parameters (secret ones digested).
func approvalID(a *Approval, t *Transition, params map[string]string) string {
	b := append([]byte(nil), `{"instance_id":`...)
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
// becomes stale (APPROVAL_CLOSED).
func (k *Kernel) Approve(ctx context.Context, id string, person Principal) (Receipt, error) {
	rec, err := k.openApproval(ctx, id, person)
	if err != nil {
		return Receipt{}, err
	}
	a := rec.Approval
	admitted := person
	admitted.Grants = append(slices.Clone(person.Grants), CapabilityHumanApprove)
	d, err := k.Prescribe(ctx, a.Instance, admitted, Request{Transition: a.Transition, Objective: a.Objective, Parameters: rec.Parameters})
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
	receipt, err := k.Apply(ctx, d.Prescription.ID, admitted)
	if err != nil {
		return Receipt{}, err
	}
	err = k.decide(ctx, id, func(a *Approval) {
		a.Status, a.Decider, a.Receipt = ApprovalApproved, person.ID, receipt.ID
	})
	return receipt, err
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
			return errorf(CodeApprovalClosed, "approval %s is already %s", id, rec.Approval.Status)
		}
		inst, err := tx.Instance(rec.Approval.Instance)
		if err != nil {
			return notFound(err, "instance", rec.Approval.Instance)
		}
		if inst.Revision != rec.Approval.Revision || inst.Program != rec.Approval.Program {
			rec.Approval.Status = ApprovalStale
			rec.Approval.DecidedAt = k.now().UTC()
			stale = true
			return tx.PutApproval(rec)
		}
		return nil
	})
	if err == nil && stale {
		return rec, errorf(CodeApprovalClosed, "approval %s is stale: instance %s moved on since it was requested", id, rec.Approval.Instance)
	}
	return rec, err
}

// decide updates a pending approval. A stale write (already decided) is
// reported as APPROVAL_CLOSED.
func (k *Kernel) decide(ctx context.Context, id string, fn func(*Approval)) error {
	err := k.store.Update(context.WithoutCancel(ctx), func(tx Tx) error {
		rec, err := tx.Approval(id)
		if err != nil {
			return err
		}
		if rec.Approval.Status != ApprovalPending {
			return errorf(CodeApprovalClosed, "approval %s is already %s", id, rec.Approval.Status)
		}
		fn(&rec.Approval)
		rec.Approval.DecidedAt = k.now().UTC()
		return tx.PutApproval(rec)
	})
	if err != nil {
		return fmt.Errorf("flow: recording the decision on %s: %w", id, err)
	}
	return nil
}

package flows

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/route"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// ParameterInput is how a person reads and changes one parameter of a
// program's transitions on an approval card, and the application's rule
// on its value. The rule holds for every value put before a person or
// admitted: the requester's own, and a person's change before approving.
type ParameterInput struct {
	// Label names the parameter in the person's words ("Amount"); the
	// parameter's name when empty.
	Label string
	// Kind is how the card asks for it: "text" (the default), "number"
	// (a decimal number) or "select" (one of Options).
	Kind string
	// Unit, when set, is shown beside the value ("EUR").
	Unit string
	// Options are the values of a select, with their labels.
	Options []ParameterOption
	// Check, when set, refuses a value with a sentence saying why.
	Check func(value string) error
}

// ParameterOption is one value of a select ParameterInput and its label.
type ParameterOption struct{ Value, Label string }

// RegisterParameterInputs sets how the parameters of the program
// programID's transitions are shown and changed on approval cards, and
// the rules on their values, by parameter name. Registering again for
// the same program replaces them.
func (s *Part) RegisterParameterInputs(programID string, inputs map[string]ParameterInput) {
	c := make(map[string]ParameterInput, len(inputs))
	for k, v := range inputs {
		v.Options = slices.Clone(v.Options)
		c[k] = v
	}
	s.paramInputs.set(programID, c)
}

// checkParameters is the kernel's ParameterCheck: each value with a
// registered input must be of its kind and pass its Check.
func (s *Part) checkParameters(_ context.Context, p *flow.Program, _ *flow.Transition, params map[string]string) error {
	inputs := s.paramInputs.get(p.ID())
	for _, name := range slices.Sorted(mapKeys(params)) {
		in, ok := inputs[name]
		if !ok {
			continue
		}
		v := params[name]
		label := in.label(name)
		switch in.Kind {
		case "number":
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return &flow.Error{Code: flow.CodeParameterInvalid, Message: fmt.Sprintf("%s must be a number, not %q", label, v)}
			}
		case "select":
			if !slices.ContainsFunc(in.Options, func(o ParameterOption) bool { return o.Value == v }) {
				var labels []string
				for _, o := range in.Options {
					labels = append(labels, o.Label)
				}
				return &flow.Error{Code: flow.CodeParameterInvalid, Message: fmt.Sprintf("%s must be one of %s", label, host.JoinOr(labels, "none"))}
			}
		}
		if in.Check != nil {
			if err := in.Check(v); err != nil {
				return &flow.Error{Code: flow.CodeParameterInvalid, Message: label + ": " + err.Error()}
			}
		}
	}
	return nil
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (in ParameterInput) label(name string) string {
	if in.Label != "" {
		return in.Label
	}
	return host.PlainName(name)
}

// shown is a parameter value as the card shows it: a select's label, or
// the value and its unit.
func (in ParameterInput) shown(v string) string {
	for _, o := range in.Options {
		if o.Value == v && o.Label != "" {
			return o.Label
		}
	}
	if in.Unit != "" && v != "" {
		return v + " " + in.Unit
	}
	return v
}

// approvalEdits are the card's edit fields of a: every parameter that is
// not secret, prefilled with the value approving now applies.
func (s *Part) approvalEdits(a flow.Approval, programID string) []host.EditField {
	inputs := s.paramInputs.get(programID)
	var out []host.EditField
	for _, prm := range a.Parameters {
		if prm.Secret {
			continue
		}
		in := inputs[prm.Name]
		e := host.EditField{Name: prm.Name, Label: in.label(prm.Name), Kind: "text", Value: prm.Value, Unit: in.Unit}
		switch in.Kind {
		case "number", "select":
			e.Kind = in.Kind
		}
		for _, o := range in.Options {
			e.Options = append(e.Options, host.EditOption{Value: o.Value, Label: o.Label})
		}
		out = append(out, e)
	}
	return out
}

// editedValues turns a person's edits, as JSON values, into parameter
// values: a string as it is, a number as written, a boolean as true or
// false.
func editedValues(values map[string]json.RawMessage) (map[string]string, error) {
	out := make(map[string]string, len(values))
	for name, raw := range values {
		raw = bytes.TrimSpace(raw)
		var str string
		switch {
		case json.Unmarshal(raw, &str) == nil:
			out[name] = str
		case len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')):
			var n json.Number
			if err := json.Unmarshal(raw, &n); err != nil {
				return nil, tool.Errorf("invalid_request", "%s is not a number, a text or yes/no", name)
			}
			out[name] = n.String()
		case string(raw) == "true" || string(raw) == "false":
			out[name] = string(raw)
		default:
			return nil, tool.Errorf("invalid_request", "the value of %s must be a text, a number or true/false", name)
		}
	}
	return out, nil
}

// ApproveEdited is person's approval of the approval id after changing
// some of its parameters (values), on the card of edition edition: the
// change is checked by the rules of the requester's request, recorded
// (and audited with both values), and what is applied is what the person
// approved. Like Decide, it answers the receipt, or the approval when it
// needs more people.
func (s *Part) ApproveEdited(ctx context.Context, person store.Principal, id string, values map[string]string, edition int) (any, flow.Approval, error) {
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
	req, err := s.Store.Principal(ctx, a.Requester)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, a, tool.Errorf(flow.CodeEditRefused, "the requester of %s is no longer known, so a change cannot be checked as its request; decline it instead", id)
		}
		return nil, a, err
	}
	inst, _ := s.flows.Instance(ctx, a.Instance)
	defer s.publishFlow("flow.approval", inst.Owner, map[string]any{"approval": id, "instance": a.Instance})
	rc, err := s.flows.ApproveEdited(ctx, id, flowPrincipal(person), flow.Edit{Values: values, Edition: edition, Requester: flowPrincipal(req)})
	now, rerr := s.flows.Approval(ctx, id)
	if rerr == nil && now.Edition() > a.Edition() {
		s.auditEdit(ctx, person, now)
	}
	switch code := flow.ErrorCode(err); {
	case code == flow.CodeMorePeopleNeeded && rerr == nil:
		return now, now, nil
	case code == flow.CodeApprovalClosed && rerr == nil:
		return nil, a, s.alreadyDecided(ctx, now, flowError(err))
	case code == flow.CodeCapabilityDenied:
		return nil, a, tool.Errorf(flow.CodeCapabilityDenied, "%s; approving adds only human.approve, so the approver's own token must grant the rest; the request stays open", flowError(err).(*tool.Error).Message)
	case err != nil:
		return nil, a, flowError(err)
	}
	return rc, now, nil
}

// auditEdit records the newest change to a's parameters: who changed
// which parameter from which value to which.
func (s *Part) auditEdit(ctx context.Context, person store.Principal, a flow.Approval) {
	if s.Store.Audit == nil || len(a.Edits) == 0 {
		return
	}
	e := a.Edits[len(a.Edits)-1]
	detail, _ := json.Marshal(map[string]any{"approval": a.ID, "instance": a.Instance, "transition": a.Transition, "requester": a.Requester, "changes": e.Changes})
	rec := store.AuditRecord{Time: s.Now().UTC(), PrincipalID: person.ID, Source: "user", Subject: "flow_approval:" + a.ID,
		Action: "flow.approval.edit", OK: true, Detail: string(detail)}
	if _, err := s.Store.Audit.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		s.Log.Error("audit the change of an approval", "approval", a.ID, "err", err)
	}
}

// ApprovalNoteID is the id under which people's notes on a's card are
// kept: the card's id as it was filed, whatever people changed since, so
// that a note written on a changed card reaches the requester with the
// others.
func ApprovalNoteID(a flow.Approval) string {
	return "flow_approval:" + a.ID + "@" + strconv.FormatInt(a.Revision, 10)
}

// NoteID is the id under which the notes on the inbox item itemID are
// kept: a Flow approval's card id without the edition its binding names
// (see ApprovalNoteID); any other id as it is.
func NoteID(itemID string) string {
	if !strings.HasPrefix(itemID, "flow_approval:") {
		return itemID
	}
	at := strings.LastIndex(itemID, "@")
	if at < 0 {
		return itemID
	}
	if dot := strings.Index(itemID[at:], ".e"); dot > 0 {
		return itemID[:at+dot]
	}
	return itemID
}

// approvalBinding names what a's card shows: the instance revision, and
// how many times people changed its values.
func approvalBinding(a flow.Approval) string {
	b := strconv.FormatInt(a.Revision, 10)
	if n := a.Edition(); n > 0 {
		b += ".e" + strconv.Itoa(n)
	}
	return b
}

// changedWords says what people changed on a, for its card and for the
// requester: each parameter's old and new value.
func changedWords(a flow.Approval, names map[string]string, inputs map[string]ParameterInput) string {
	var parts []string
	for _, c := range a.ChangedParameters() {
		in := inputs[c.Name]
		parts = append(parts, fmt.Sprintf("%s %s → %s", in.label(c.Name), in.shown(c.Was), in.shown(c.Now)))
	}
	if len(parts) == 0 {
		return ""
	}
	var who []string
	for _, e := range a.Edits {
		if n := host.NameOr(names, e.Person); !slices.Contains(who, n) {
			who = append(who, n)
		}
	}
	return "Changed by " + strings.Join(who, ", ") + ": " + strings.Join(parts, "; ")
}

// sameNumbers keeps a's own text of each number a person left as it was:
// a form sends 1200.00 back as 1200, which is no change.
func sameNumbers(a flow.Approval, values map[string]string) map[string]string {
	for _, prm := range a.Parameters {
		v, ok := values[prm.Name]
		if !ok || prm.Secret || v == prm.Value {
			continue
		}
		x, err1 := strconv.ParseFloat(strings.TrimSpace(v), 64)
		y, err2 := strconv.ParseFloat(strings.TrimSpace(prm.Value), 64)
		if err1 == nil && err2 == nil && x == y {
			values[prm.Name] = prm.Value
		}
	}
	return values
}

// approveEditedJSON is a decision with values on the approval's own route:
// only approve takes values.
func (s *Part) approveEditedJSON(ctx context.Context, p store.Principal, id, decision string, body api.ApprovalDecisionRequest) (any, error) {
	if decision != "approve" {
		return nil, tool.Errorf("invalid_request", "values go with approve: they are your changes to the parameters approving applies")
	}
	values, err := editedValues(body.Values)
	if err != nil {
		return nil, err
	}
	a, err := s.VisibleApproval(ctx, p, id)
	if err != nil {
		return nil, err
	}
	out, _, err := s.ApproveEdited(ctx, p, id, sameNumbers(a, values), body.Edition)
	return out, err
}

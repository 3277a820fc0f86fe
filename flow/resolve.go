package flow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/assent-run/assent/flow/jcs"
)

// Kind is the kind of a decision.
type Kind string

// Decision kinds.
const (
	// Prescribed: one transition is chosen and admitted; the decision
	// carries its prescription.
	Prescribed Kind = "PRESCRIBED"
	// Marked: the instance's objective contract is satisfied.
	Marked Kind = "MARKED"
	// Frontier: the next step needs an outside decision: a choice between
	// tied candidates, an authority the principal lacks (Awaiting names
	// it), or parameters (Awaiting is "parameters").
	Frontier Kind = "FRONTIER"
	// Blocked: no transition can be taken; Reasons says why for each.
	Blocked Kind = "BLOCKED"
	// Refused: the request cannot be honoured (unknown objective or
	// transition, a transition that does not apply, failed admission).
	Refused Kind = "REFUSED"
	// Unresolved: the instance does not run this program.
	Unresolved Kind = "UNRESOLVED"
)

// Awaiting values of a FRONTIER decision besides authority classes.
const (
	AwaitingChoice     = "choice"
	AwaitingParameters = "parameters"
)

// PrescriptionLifetime is how long a prescription may be applied after it
// is issued.
const PrescriptionLifetime = 2 * time.Minute

// Reason codes explain why a transition was not chosen.
const (
	ReasonNotRequested     = "NOT_REQUESTED"
	ReasonObservedOnly     = "OBSERVED_ONLY"
	ReasonRecoveryMode     = "RECOVERY_MODE"
	ReasonSourcePhase      = "SOURCE_PHASE"
	ReasonSourceCondition  = "SOURCE_CONDITION"
	ReasonObjectiveScope   = "OBJECTIVE_SCOPE"
	ReasonExplicitOnly     = "EXPLICIT_ONLY"
	ReasonAlreadySatisfied = "ALREADY_SATISFIED"
	ReasonOutranked        = "OUTRANKED"
	ReasonObjectiveMet     = "OBJECTIVE_MET"
)

// Decision codes of REFUSED and UNRESOLVED decisions, besides the
// capability codes.
const (
	CodeProgramDrift           = "PROGRAM_DRIFT"
	CodeObjectiveUnknown       = "OBJECTIVE_UNKNOWN"
	CodeObjectiveConflict      = "OBJECTIVE_CONFLICT"
	CodeTransitionUnknown      = "TRANSITION_UNKNOWN"
	CodeTransitionObserved     = "TRANSITION_OBSERVED_ONLY"
	CodeTransitionInapplicable = "TRANSITION_NOT_APPLICABLE"
	CodeParameterUnknown       = "PARAMETER_UNKNOWN"
)

// Request is what a principal asks of the kernel. All fields are optional:
// an empty request asks for the next step.
type Request struct {
	// Transition requests a specific transition (qualified or local id).
	Transition string `json:"transition,omitempty"`
	// Objective binds an objective when the instance has none.
	Objective string `json:"objective,omitempty"`
	// Parameters are the transition's parameter values.
	Parameters map[string]string `json:"parameters,omitempty"`
}

// Reason says why one transition was not chosen.
type Reason struct {
	Transition string `json:"transition"`
	Code       string `json:"code"`
	Message    string `json:"message"`
}

// Decision is the kernel's answer to Resolve.
type Decision struct {
	Kind Kind `json:"kind"`
	// Transition is the qualified id of the chosen (PRESCRIBED) or awaited
	// (FRONTIER with one candidate) transition.
	Transition string `json:"transition,omitempty"`
	// Candidates are the selectable transitions, in registry order; for a
	// tie, the tied ones.
	Candidates []string `json:"candidates"`
	// Reasons cover every transition not chosen, in registry order.
	Reasons []Reason `json:"reasons"`
	// Awaiting names what a FRONTIER decision waits for: an authority
	// class, "choice" or "parameters".
	Awaiting string `json:"awaiting,omitempty"`
	// Missing lists required parameters not supplied.
	Missing []string `json:"missing,omitempty"`
	// Code and Message explain a REFUSED or UNRESOLVED decision.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Prescription is set for PRESCRIBED.
	Prescription *Prescription `json:"prescription,omitempty"`
}

// Prescription is the kernel's content-addressed instruction to apply one
// transition to one state of one instance. Its id is "prx-" and the hex
// SHA-256 of its RFC 8785 form without the id. It grants nothing by itself:
// applying re-resolves and must reproduce it.
type Prescription struct {
	ID                    string   `json:"id"`
	Instance              string   `json:"instance_id"`
	Revision              int64    `json:"revision"`
	Transition            string   `json:"transition"`
	Program               string   `json:"program_fingerprint"`
	Snapshot              string   `json:"snapshot_fingerprint"`
	Authority             string   `json:"authority_fingerprint"`
	RequiredCapabilities  []string `json:"required_capabilities"`
	EffectiveCapabilities []string `json:"effective_capabilities"`
	// Parameters bind the parameter values; a secret value appears only as
	// a salted digest.
	Parameters map[string]string `json:"parameters,omitempty"`
	Objective  string            `json:"objective,omitempty"`
	IssuedAt   time.Time         `json:"issued_at"`
	ExpiresAt  time.Time         `json:"expires_at"`
}

// appendBinding writes the prescription's JCS form without the id; with
// times false it also leaves out issued_at and expires_at, giving the
// binding that re-resolution must reproduce.
func (p *Prescription) appendBinding(b []byte, times bool) []byte {
	b = append(b, `{"authority_fingerprint":`...)
	b = jcs.AppendString(b, p.Authority)
	b = append(b, `,"effective_capabilities":`...)
	b = appendStrings(b, p.EffectiveCapabilities)
	if times {
		b = append(b, `,"expires_at":`...)
		b = jcs.AppendString(b, p.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	b = append(b, `,"instance_id":`...)
	b = jcs.AppendString(b, p.Instance)
	if times {
		b = append(b, `,"issued_at":`...)
		b = jcs.AppendString(b, p.IssuedAt.UTC().Format(time.RFC3339Nano))
	}
	if p.Objective != "" {
		b = append(b, `,"objective":`...)
		b = jcs.AppendString(b, p.Objective)
	}
	if len(p.Parameters) > 0 {
		b = append(b, `,"parameters":{`...)
		for i, k := range sortedKeys(p.Parameters) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jcs.AppendString(b, k)
			b = append(b, ':')
			b = jcs.AppendString(b, p.Parameters[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"program_fingerprint":`...)
	b = jcs.AppendString(b, p.Program)
	b = append(b, `,"required_capabilities":`...)
	b = appendStrings(b, p.RequiredCapabilities)
	b = append(b, `,"revision":`...)
	b = jcs.AppendInt(b, p.Revision)
	b = append(b, `,"snapshot_fingerprint":`...)
	b = jcs.AppendString(b, p.Snapshot)
	b = append(b, `,"transition":`...)
	b = jcs.AppendString(b, p.Transition)
	return append(b, '}')
}

// ComputeID returns the content address of p: "prx-" and the hex SHA-256 of
// its canonical form without the id.
func (p *Prescription) ComputeID() string { return contentID("prx-", p.appendBinding(nil, true)) }

// sameBinding reports whether p and q prescribe the same thing, whenever
// they were issued.
func (p *Prescription) sameBinding(q *Prescription) bool {
	return string(p.appendBinding(nil, false)) == string(q.appendBinding(nil, false))
}

func contentID(prefix string, b []byte) string {
	sum := sha256.Sum256(b)
	return prefix + hex.EncodeToString(sum[:])
}

// parameterDigest binds a secret parameter value without revealing it; the
// instance id and name salt it.
func parameterDigest(instance, name, value string) string {
	h := sha256.New()
	h.Write([]byte(instance))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(value))
	return FingerprintPrefix + hex.EncodeToString(h.Sum(nil))
}

// Resolve decides what principal may do next on inst under program p. It
// is a pure function of its arguments; now stamps the prescription.
//
// The law, in order: an instance running another program → UNRESOLVED; an
// unknown objective → REFUSED; a satisfied objective contract with nothing
// requested → MARKED; a requested transition that is unknown or
// OBSERVED_EXTERNAL → REFUSED; candidates are transitions whose source
// phase and conditions hold and whose objectives admit the instance's
// objective, and, unless requested, that are implicitly selectable (rank
// 1–3) and not already satisfied (in recovery mode only RECOVERY
// transitions); none → BLOCKED (a requested one that does not apply →
// REFUSED); a tie at the top (rank, priority) → FRONTIER; the top
// candidate's authority not held → FRONTIER awaiting it (human when the
// transition needs human.approve that the principal lacks, or applies
// staged control values through control.apply and the principal is not a
// person); missing
// required parameters → FRONTIER awaiting "parameters"; admission
// (required = required_capabilities ∪ the effect's kernel minimum ⊆
// capability_surface, else CAPABILITY_NOT_DECLARED; ⊆ the principal's
// grants, else CAPABILITY_DENIED) → REFUSED on failure; otherwise
// PRESCRIBED with effective = required.
func Resolve(p *Program, inv *Inventory, inst *Instance, pr *Principal, req Request, now time.Time) Decision {
	d := Decision{Candidates: []string{}, Reasons: []Reason{}}
	if inv == nil {
		d.Kind, d.Code, d.Message = Unresolved, CodeStateInvalid, "no runtime inventory; pass the one the program was loaded with"
		return d
	}
	if inst.Program != p.Fingerprint() {
		d.Kind, d.Code = Unresolved, CodeProgramDrift
		d.Message = fmt.Sprintf("the instance runs program %s, not %s; load that program or migrate the instance", inst.Program, p.Fingerprint())
		return d
	}
	objective := inst.Objective
	if req.Objective != "" {
		if objective != "" && objective != req.Objective {
			return refuse(d, CodeObjectiveConflict, "the instance pursues objective %q; it cannot also pursue %q", objective, req.Objective)
		}
		objective = req.Objective
	}
	contract := p.contracts[objective]
	if objective != "" && contract == nil {
		return refuse(d, CodeObjectiveUnknown, "the program has no objective contract %q", objective)
	}
	marked := contract != nil && inst.firstFailing(contract.Conditions) < 0

	var requested *Transition
	if req.Transition != "" {
		requested = p.lookup(req.Transition)
		switch {
		case requested == nil:
			return refuse(d, CodeTransitionUnknown, "the program has no transition %q", req.Transition)
		case !requested.Controllable():
			return refuse(d, CodeTransitionObserved, "transition %s is OBSERVED_EXTERNAL: it records what happens outside and cannot be applied", requested.ID)
		}
	}

	// Evaluate every transition in registry order. reasons[i] explains why
	// registry[i] is not chosen; candidates get theirs once the decision is
	// known.
	reasons := make([]*Reason, len(p.registry))
	var cands []int
	for i, t := range p.registry {
		if reasons[i] = evaluate(t, inst, objective, requested); reasons[i] == nil {
			cands = append(cands, i)
		}
	}
	collect := func() {
		for _, r := range reasons {
			if r != nil {
				d.Reasons = append(d.Reasons, *r)
			}
		}
	}
	if requested != nil {
		if i := slices.Index(p.registry, requested); reasons[i] != nil {
			d.Kind, d.Code, d.Message, d.Transition = Refused, CodeTransitionInapplicable, reasons[i].Message, requested.ID
			collect()
			return d
		}
	}
	if marked && requested == nil {
		d.Kind = Marked
		for _, i := range cands {
			reasons[i] = &Reason{Transition: p.registry[i].ID, Code: ReasonObjectiveMet, Message: fmt.Sprintf("objective %q is met", objective)}
		}
		collect()
		return d
	}
	if len(cands) == 0 {
		d.Kind = Blocked
		d.Message = "no transition applies in phase " + inst.Phase
		collect()
		return d
	}
	for _, i := range cands {
		d.Candidates = append(d.Candidates, p.registry[i].ID)
	}
	top := p.registry[cands[0]]
	tied := 1
	for tied < len(cands) && Rank(p.registry[cands[tied]].SelectionClass) == Rank(top.SelectionClass) && p.registry[cands[tied]].Priority == top.Priority {
		tied++
	}
	for _, i := range cands[tied:] {
		reasons[i] = &Reason{Transition: p.registry[i].ID, Code: ReasonOutranked, Message: "outranked by " + top.ID}
	}
	collect()
	if tied > 1 {
		d.Kind, d.Awaiting = Frontier, AwaitingChoice
		d.Candidates = d.Candidates[:tied]
		d.Message = "several transitions tie at the top; request one explicitly"
		return d
	}
	d.Transition = top.ID
	if class := missingAuthority(top, pr); class != "" {
		d.Kind, d.Awaiting = Frontier, class
		d.Message = fmt.Sprintf("transition %s needs %s authority", top.ID, class)
		return d
	}
	if top.Effect == EffectControlApply && pr.Kind != AuthorityHuman {
		d.Kind, d.Awaiting = Frontier, AuthorityHuman
		d.Message = fmt.Sprintf("transition %s applies staged control values, which only a person may do", top.ID)
		return d
	}
	if slices.Contains(top.RequiredCapabilities, CapabilityHumanApprove) && !pr.granted(CapabilityHumanApprove) {
		d.Kind, d.Awaiting = Frontier, AuthorityHuman
		d.Message = fmt.Sprintf("transition %s needs a person's approval", top.ID)
		return d
	}
	for name := range req.Parameters {
		if !slices.ContainsFunc(top.Parameters, func(prm Parameter) bool { return prm.Name == name }) {
			return refuse(d, CodeParameterUnknown, "transition %s has no parameter %q", top.ID, name)
		}
	}
	for _, prm := range top.Parameters {
		if _, ok := req.Parameters[prm.Name]; prm.Required && !ok {
			d.Missing = append(d.Missing, prm.Name)
		}
	}
	if len(d.Missing) > 0 {
		d.Kind, d.Awaiting = Frontier, AwaitingParameters
		d.Message = fmt.Sprintf("transition %s needs parameters %s", top.ID, strings.Join(d.Missing, ", "))
		return d
	}

	// Admission.
	required := requiredCapabilities(top, inv)
	for _, c := range required {
		if !contains(p.m.Capabilities.CapabilitySurface, c) {
			return refuse(d, CodeCapabilityNotDeclared, "transition %s needs capability %q, which the program's capability_surface does not declare", top.ID, c)
		}
	}
	for _, c := range required {
		if !pr.granted(c) {
			return refuse(d, CodeCapabilityDenied, "principal %s was not granted capability %q, which transition %s needs", pr.ID, c, top.ID)
		}
	}
	rx := &Prescription{
		Instance:              inst.ID,
		Revision:              inst.Revision,
		Transition:            top.ID,
		Program:               p.Fingerprint(),
		Snapshot:              inst.SnapshotFingerprint(),
		Authority:             pr.AuthorityFingerprint(),
		RequiredCapabilities:  required,
		EffectiveCapabilities: slices.Clone(required),
		Objective:             objective,
		IssuedAt:              now.UTC(),
		ExpiresAt:             now.UTC().Add(PrescriptionLifetime),
	}
	if len(req.Parameters) > 0 {
		rx.Parameters = make(map[string]string, len(req.Parameters))
		for _, prm := range top.Parameters {
			v, ok := req.Parameters[prm.Name]
			if !ok {
				continue
			}
			if prm.Secret {
				v = parameterDigest(inst.ID, prm.Name, v)
			}
			rx.Parameters[prm.Name] = v
		}
	}
	rx.ID = rx.ComputeID()
	d.Kind, d.Prescription = Prescribed, rx
	return d
}

func refuse(d Decision, code, format string, args ...any) Decision {
	d.Kind, d.Code, d.Message = Refused, code, fmt.Sprintf(format, args...)
	return d
}

// evaluate returns why t is not a candidate, or nil when it is.
func evaluate(t *Transition, inst *Instance, objective string, requested *Transition) *Reason {
	r := func(code, format string, args ...any) *Reason {
		return &Reason{Transition: t.ID, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case requested != nil && t != requested:
		return r(ReasonNotRequested, "another transition was requested")
	case !t.Controllable():
		return r(ReasonObservedOnly, "OBSERVED_EXTERNAL transitions record outside events and are never applied")
	case inst.Recovery != nil && t.SelectionClass != Recovery:
		return r(ReasonRecoveryMode, "the instance needs recovery after %s; only RECOVERY transitions are selectable", inst.Recovery.Transition)
	case !contains(t.SourcePhases, inst.Phase):
		return r(ReasonSourcePhase, "phase %s is not among its source phases %s", inst.Phase, strings.Join(t.SourcePhases, ", "))
	}
	if i := inst.firstFailing(t.SourceConditions); i >= 0 {
		c := &t.SourceConditions[i]
		f := inst.Fact(c.Facet)
		return r(ReasonSourceCondition, "source condition on %s does not hold (fact is %s%s)", c.Facet, f.Status, valueSuffix(f))
	}
	if len(t.Objectives) > 0 && !contains(t.Objectives, objective) {
		if objective == "" {
			return r(ReasonObjectiveScope, "it serves objectives %s and the instance has none", strings.Join(t.Objectives, ", "))
		}
		return r(ReasonObjectiveScope, "it does not serve objective %q", objective)
	}
	if requested == nil {
		if Rank(t.SelectionClass) > 3 {
			return r(ReasonExplicitOnly, "%s transitions are taken only when requested", t.SelectionClass)
		}
		if contains(t.TargetPhases, inst.Phase) && inst.firstFailing(t.TargetConditions) < 0 {
			return r(ReasonAlreadySatisfied, "its target phase and conditions already hold")
		}
	}
	return nil
}

func valueSuffix(f Fact) string {
	if f.Value == "" {
		return ""
	}
	return fmt.Sprintf(" %q", f.Value)
}

// missingAuthority returns the authority class the principal lacks for t,
// or "" when it has enough. For the any-of set, human is named first when
// listed, since a person can always be asked.
func missingAuthority(t *Transition, pr *Principal) string {
	for _, c := range t.AuthorityAll {
		if c != AuthorityNone && !pr.hasClass(c) {
			return c
		}
	}
	if contains(t.Authority, AuthorityNone) {
		return ""
	}
	for _, c := range t.Authority {
		if pr.hasClass(c) {
			return ""
		}
	}
	if contains(t.Authority, AuthorityHuman) {
		return AuthorityHuman
	}
	return t.Authority[0]
}

// requiredCapabilities returns required_capabilities ∪ the effect's kernel
// minimum, sorted.
func requiredCapabilities(t *Transition, inv *Inventory) []string {
	out := slices.Clone(t.RequiredCapabilities)
	if min, ok := inv.Minimum(t.Effect); ok && !contains(out, min) {
		out = append(out, min)
		slices.Sort(out)
	}
	return out
}

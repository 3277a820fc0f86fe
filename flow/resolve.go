package flow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
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

	// Evaluate every transition in registry order. book.entries[i] says
	// why registry[i] is not chosen; candidates get theirs once the
	// decision is known.
	book := newReasonBook(len(p.registry))
	defer book.free()
	var cands []int
	buf := book.buf
	for i, t := range p.registry {
		start := len(buf)
		var e reasonEntry
		e.code, e.fixed, buf = evaluate(buf, t, inst, objective, requested)
		if e.code == codeNone {
			cands = append(cands, i)
			continue
		}
		e.start, e.end = int32(start), int32(len(buf))
		book.entries[i] = e
		book.n++
	}
	book.buf = buf
	if requested != nil {
		if i := slices.Index(p.registry, requested); book.failed(i) {
			d.Kind, d.Code, d.Transition = Refused, CodeTransitionInapplicable, requested.ID
			d.Reasons = book.reasons(p.registry)
			d.Message = d.Reasons[book.position(i)].Message
			return d
		}
	}
	if marked && requested == nil {
		d.Kind = Marked
		h := book.fix("objective " + strconv.Quote(objective) + " is met")
		for _, i := range cands {
			book.set(i, codeObjectiveMet, h)
		}
		d.Reasons = book.reasons(p.registry)
		return d
	}
	if len(cands) == 0 {
		d.Kind = Blocked
		d.Message = "no transition applies in phase " + inst.Phase
		d.Reasons = book.reasons(p.registry)
		return d
	}
	d.Candidates = make([]string, 0, len(cands))
	for _, i := range cands {
		d.Candidates = append(d.Candidates, p.registry[i].ID)
	}
	top := p.registry[cands[0]]
	tied := 1
	for tied < len(cands) && Rank(p.registry[cands[tied]].SelectionClass) == Rank(top.SelectionClass) && p.registry[cands[tied]].Priority == top.Priority {
		tied++
	}
	if len(cands) > tied {
		h := book.fix("outranked by " + top.ID)
		for _, i := range cands[tied:] {
			book.set(i, codeOutranked, h)
		}
	}
	d.Reasons = book.reasons(p.registry)
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
	if top.Approval != nil && !pr.quorate {
		d.Kind, d.Awaiting = Frontier, AuthorityHuman
		d.Message = fmt.Sprintf("transition %s needs the approval of %s", top.ID, describeRule(top.Approval))
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

// reasonBook collects the reasons of one decision. Messages are written
// into one buffer that becomes one string, each message a substring of it,
// so that explaining n transitions costs a few allocations rather than
// several per transition; the texts are the same as if each were formatted
// alone. Entries hold no pointers, which keeps them out of the collector's
// way, and books are reused.
type reasonBook struct {
	entries []reasonEntry // by registry index
	fixed   []string      // messages set whole; entries refer to them by handle
	buf     []byte
	n       int // entries with a code
}

// reasonEntry is one transition's reason: its code (an index into
// reasonCodes; codeNone for a candidate) and either a fixed message (fixed
// > 0, a handle into reasonBook.fixed) or the span of its message in the
// buffer.
type reasonEntry struct {
	code       uint8
	fixed      uint8
	start, end int32
}

// reasonCodes are the codes an entry refers to, by index.
var reasonCodes = [...]string{
	codeNone:             "",
	codeNotRequested:     ReasonNotRequested,
	codeObservedOnly:     ReasonObservedOnly,
	codeRecoveryMode:     ReasonRecoveryMode,
	codeSourcePhase:      ReasonSourcePhase,
	codeSourceCondition:  ReasonSourceCondition,
	codeObjectiveScope:   ReasonObjectiveScope,
	codeExplicitOnly:     ReasonExplicitOnly,
	codeAlreadySatisfied: ReasonAlreadySatisfied,
	codeOutranked:        ReasonOutranked,
	codeObjectiveMet:     ReasonObjectiveMet,
}

// Indexes into reasonCodes.
const (
	codeNone uint8 = iota
	codeNotRequested
	codeObservedOnly
	codeRecoveryMode
	codeSourcePhase
	codeSourceCondition
	codeObjectiveScope
	codeExplicitOnly
	codeAlreadySatisfied
	codeOutranked
	codeObjectiveMet
)

// Handles of the fixed messages every book starts with, in the order of
// fixedMessages; those of MARKED and OUTRANKED reasons are added per
// decision.
const (
	fixedNone uint8 = iota
	fixedNotRequested
	fixedObservedOnly
	fixedAlreadySatisfied
)

var fixedMessages = [...]string{
	"another transition was requested",
	"OBSERVED_EXTERNAL transitions record outside events and are never applied",
	"its target phase and conditions already hold",
}

// maxPooledBook bounds the buffer of a book kept for reuse.
const maxPooledBook = 1 << 20

var reasonBooks = sync.Pool{New: func() any { return new(reasonBook) }}

// newReasonBook returns an empty book for n transitions.
func newReasonBook(n int) *reasonBook {
	b := reasonBooks.Get().(*reasonBook)
	if cap(b.entries) < n {
		b.entries = make([]reasonEntry, n)
	} else {
		b.entries = b.entries[:n]
		clear(b.entries)
	}
	b.fixed = append(b.fixed[:0], fixedMessages[:]...)
	b.buf = b.buf[:0]
	b.n = 0
	return b
}

// free returns b for reuse; no string may refer to its buffer, which
// reasons guarantees by copying it.
func (b *reasonBook) free() {
	if cap(b.buf) > maxPooledBook || cap(b.entries) > maxPooledBook {
		return
	}
	clear(b.fixed)
	reasonBooks.Put(b)
}

// fix adds a fixed message and returns its handle.
func (b *reasonBook) fix(msg string) uint8 {
	b.fixed = append(b.fixed, msg)
	return uint8(len(b.fixed))
}

// set gives entry i a code and the fixed message with handle h.
func (b *reasonBook) set(i int, code, h uint8) {
	if b.entries[i].code == codeNone {
		b.n++
	}
	b.entries[i] = reasonEntry{code: code, fixed: h}
}

// failed reports whether entry i has a reason, that is, is no candidate.
func (b *reasonBook) failed(i int) bool { return b.entries[i].code != codeNone }

// position returns where entry i lands in the slice reasons returns.
func (b *reasonBook) position(i int) int {
	n := 0
	for _, e := range b.entries[:i] {
		if e.code != codeNone {
			n++
		}
	}
	return n
}

// reasons returns the reasons in registry order.
func (b *reasonBook) reasons(registry []*Transition) []Reason {
	out := make([]Reason, b.n)
	text := string(b.buf)
	k := 0
	for i, e := range b.entries {
		if e.code == codeNone {
			continue
		}
		r := &out[k]
		k++
		r.Transition = registry[i].ID
		r.Code = reasonCodes[e.code]
		if e.fixed != fixedNone {
			r.Message = b.fixed[e.fixed-1]
		} else {
			r.Message = text[e.start:e.end]
		}
	}
	return out
}

// evaluate returns why t is not a candidate: a reason code with either a
// fixed message or the message appended to buf. The code is codeNone when
// t is a candidate.
func evaluate(buf []byte, t *Transition, inst *Instance, objective string, requested *Transition) (code, fixed uint8, _ []byte) {
	switch {
	case requested != nil && t != requested:
		return codeNotRequested, fixedNotRequested, buf
	case !t.Controllable():
		return codeObservedOnly, fixedObservedOnly, buf
	case inst.Recovery != nil && t.SelectionClass != Recovery:
		buf = append(buf, "the instance needs recovery after "...)
		buf = append(buf, inst.Recovery.Transition...)
		buf = append(buf, "; only RECOVERY transitions are selectable"...)
		return codeRecoveryMode, fixedNone, buf
	case !contains(t.SourcePhases, inst.Phase):
		buf = append(buf, "phase "...)
		buf = append(buf, inst.Phase...)
		buf = append(buf, " is not among its source phases "...)
		buf = appendJoined(buf, t.SourcePhases)
		return codeSourcePhase, fixedNone, buf
	}
	if k := inst.firstFailing(t.SourceConditions); k >= 0 {
		c := &t.SourceConditions[k]
		f := inst.Fact(c.Facet)
		buf = append(buf, "source condition on "...)
		buf = append(buf, c.Facet...)
		buf = append(buf, " does not hold (fact is "...)
		buf = append(buf, f.Status...)
		if f.Value != "" {
			buf = append(buf, ' ')
			buf = strconv.AppendQuote(buf, f.Value)
		}
		buf = append(buf, ')')
		return codeSourceCondition, fixedNone, buf
	}
	if len(t.Objectives) > 0 && !contains(t.Objectives, objective) {
		if objective == "" {
			buf = append(buf, "it serves objectives "...)
			buf = appendJoined(buf, t.Objectives)
			buf = append(buf, " and the instance has none"...)
		} else {
			buf = append(buf, "it does not serve objective "...)
			buf = strconv.AppendQuote(buf, objective)
		}
		return codeObjectiveScope, fixedNone, buf
	}
	if requested == nil {
		if Rank(t.SelectionClass) > 3 {
			buf = append(buf, t.SelectionClass...)
			buf = append(buf, " transitions are taken only when requested"...)
			return codeExplicitOnly, fixedNone, buf
		}
		if contains(t.TargetPhases, inst.Phase) && inst.firstFailing(t.TargetConditions) < 0 {
			return codeAlreadySatisfied, fixedAlreadySatisfied, buf
		}
	}
	return codeNone, fixedNone, buf
}

// appendJoined appends ss separated by ", ", as strings.Join would.
func appendJoined(b []byte, ss []string) []byte {
	for i, s := range ss {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, s...)
	}
	return b
}

func valueSuffix(f Fact) string {
	if f.Value == "" {
		return ""
	}
	return " " + strconv.Quote(f.Value)
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

// describeRule says in words whose approval rule r asks for: "2 people",
// "1 person of group finance".
func describeRule(r *ApprovalRule) string {
	s := "1 person"
	if n := r.People(); n > 1 {
		s = strconv.Itoa(n) + " different people"
	}
	if r.Group != "" {
		s += " of group " + r.Group
	}
	return s
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

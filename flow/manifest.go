package flow

import "time"

// SchemaVersion is the manifest schema this package implements.
const SchemaVersion = 1

// Selection classes, in rank order. Rank 1–3 are implicitly selectable:
// the kernel may choose them without being asked.
const (
	Recovery          = "RECOVERY"           // rank 1
	ObjectiveRequired = "OBJECTIVE_REQUIRED" // rank 2
	Progress          = "PROGRESS"           // rank 3
	ExplicitOnly      = "EXPLICIT_ONLY"      // rank 4
	ObservedExternal  = "OBSERVED_EXTERNAL"  // rank 5
)

// Rank returns the rank of a selection class (1 for RECOVERY … 5 for
// OBSERVED_EXTERNAL), or 0 for an unknown class.
func Rank(class string) int {
	switch class {
	case Recovery:
		return 1
	case ObjectiveRequired:
		return 2
	case Progress:
		return 3
	case ExplicitOnly:
		return 4
	case ObservedExternal:
		return 5
	}
	return 0
}

// Authority classes.
const (
	AuthorityNone    = "none"
	AuthorityHuman   = "human"
	AuthorityAgent   = "agent"
	AuthorityService = "service"
	AuthorityPolicy  = "policy"
)

// Fact statuses.
const (
	StatusKnown       = "known"
	StatusAbsent      = "absent"
	StatusUnknown     = "unknown"
	StatusStale       = "stale"
	StatusAmbiguous   = "ambiguous"
	StatusConflicting = "conflicting"
)

// PhaseFacet is the fact name under which objective conditions see the
// instance's phase.
const PhaseFacet = "phase"

// Manifest is a Control Program document as written, after strict decoding.
// Lists are in source order; Load normalizes them.
type Manifest struct {
	SchemaVersion      int64
	ProgramID          string
	ProgramVersion     string
	RequiresRuntime    string
	Capabilities       Capabilities
	OwnedResources     []string
	ObjectiveContracts []ObjectiveContract
	Transitions        []Transition
}

// Capabilities are the program's declarations: the effects and verifiers it
// uses and the largest set of capabilities any of its transitions may need.
// Declaring a capability grants nothing.
type Capabilities struct {
	Effects           []string
	Verifiers         []string
	CapabilitySurface []string
}

// ObjectiveContract says when an objective is met: all conditions hold.
type ObjectiveContract struct {
	Objective  string
	Conditions []Condition
}

// Condition holds when the fact named Facet has one of Statuses and, if
// Values is not empty, a value among Values.
type Condition struct {
	Facet    string
	Statuses []string
	Values   []string
}

// Parameter is a named input of a transition. Secret values never appear in
// decisions, approvals or receipts.
type Parameter struct {
	Name     string
	Required bool
	Secret   bool
}

// Assignment sets a fact to a known value when the state.assign effect runs.
type Assignment struct {
	Facet string
	Value string
}

// PrescriptionSpec is what a transition tells its operator to do.
// Arguments keep their source order.
type PrescriptionSpec struct {
	Operation             string
	Arguments             []string
	ExpectedPostcondition string
}

// Interruption names where a transition can be interrupted and the RECOVERY
// transition that repairs it.
type Interruption struct {
	Points   []string
	Recovery string // local id in a Manifest; qualified in a Program
}

// MaxQuorum bounds how many distinct people an approval may require.
const MaxQuorum = 16

// MaxApprovalDeadline bounds, in seconds, how long an approval may wait
// for people before its deadline: 30 days.
const MaxApprovalDeadline = 30 * 24 * 60 * 60

// FallbackDecline is the fallback an approval takes when nobody decided it
// before its deadline: it is declined with the reason NoDecision. It is the
// only fallback, and the default.
const FallbackDecline = "decline"

// NoDecision is the reason of an approval declined at its deadline.
const NoDecision = "no decision before the deadline"

// ApprovalRule says who must approve a transition before the kernel applies
// it: Quorum distinct people (one when zero), each a member of Group when it
// names one. A transition with a rule is applied only through an approval
// that meets it, whoever asks.
//
// DeadlineSeconds, when positive, is how long an approval filed under the
// rule waits for people; when it passes with no decision, the approval
// takes its Fallback (FallbackDecline, the default). With EscalateTo, the
// first deadline instead routes the approval to that group and starts a
// second deadline of the same length; the fallback applies at the second.
type ApprovalRule struct {
	Quorum          int64
	Group           string
	DeadlineSeconds int64
	Fallback        string
	EscalateTo      string

	// deadlineSet records that the document named deadline_seconds, so
	// that an explicit 0 is refused rather than read as "no deadline".
	deadlineSet bool
}

// Deadline returns how long an approval under r waits before its
// fallback; 0 when it waits for ever.
func (r *ApprovalRule) Deadline() time.Duration {
	if r == nil || r.DeadlineSeconds <= 0 {
		return 0
	}
	return time.Duration(r.DeadlineSeconds) * time.Second
}

// People returns how many distinct people must approve: Quorum, at least 1.
func (r *ApprovalRule) People() int {
	if r == nil || r.Quorum < 1 {
		return 1
	}
	return int(r.Quorum)
}

// Policy carries the operations a transition manages.
type Policy struct {
	ManagedOperations []string
}

// Transition is one declared step of a program.
type Transition struct {
	// ID is the local id in a Manifest and the qualified id
	// "<program_id>/<id>" in a Program.
	ID                   string
	SelectionClass       string
	Priority             int64
	SourcePhases         []string
	TargetPhases         []string
	Objectives           []string
	Authority            []string
	AuthorityAll         []string
	RequiredIdentity     []string
	RequiredEvidence     []string
	OwnedResources       []string
	Parameters           []Parameter
	SourceConditions     []Condition
	TargetConditions     []Condition
	Assignments          []Assignment
	RequiredCapabilities []string
	Effect               string
	Verifier             string
	Prescription         *PrescriptionSpec
	Interruption         *Interruption
	Policy               *Policy
	// Approval, when set, requires the approval of several people, or of
	// people of a group, before the transition is applied.
	Approval *ApprovalRule
}

// Controllable reports whether the kernel may apply t (every class but
// OBSERVED_EXTERNAL).
func (t *Transition) Controllable() bool { return t.SelectionClass != ObservedExternal }

// LocalID returns the part of a qualified id after the program id.
func LocalID(qualified string) string {
	for i := 0; i < len(qualified); i++ {
		if qualified[i] == '/' {
			return qualified[i+1:]
		}
	}
	return qualified
}

func (t *Transition) clone() Transition {
	c := *t
	c.SourcePhases = cloneStrings(t.SourcePhases)
	c.TargetPhases = cloneStrings(t.TargetPhases)
	c.Objectives = cloneStrings(t.Objectives)
	c.Authority = cloneStrings(t.Authority)
	c.AuthorityAll = cloneStrings(t.AuthorityAll)
	c.RequiredIdentity = cloneStrings(t.RequiredIdentity)
	c.RequiredEvidence = cloneStrings(t.RequiredEvidence)
	c.OwnedResources = cloneStrings(t.OwnedResources)
	c.RequiredCapabilities = cloneStrings(t.RequiredCapabilities)
	c.Parameters = append([]Parameter(nil), t.Parameters...)
	c.Assignments = append([]Assignment(nil), t.Assignments...)
	c.SourceConditions = cloneConditions(t.SourceConditions)
	c.TargetConditions = cloneConditions(t.TargetConditions)
	if t.Prescription != nil {
		p := *t.Prescription
		p.Arguments = cloneStrings(p.Arguments)
		c.Prescription = &p
	}
	if t.Interruption != nil {
		i := *t.Interruption
		i.Points = cloneStrings(i.Points)
		c.Interruption = &i
	}
	if t.Policy != nil {
		p := Policy{ManagedOperations: cloneStrings(t.Policy.ManagedOperations)}
		c.Policy = &p
	}
	if t.Approval != nil {
		r := *t.Approval
		c.Approval = &r
	}
	return c
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func cloneConditions(cs []Condition) []Condition {
	if cs == nil {
		return nil
	}
	out := make([]Condition, len(cs))
	for i, c := range cs {
		out[i] = Condition{Facet: c.Facet, Statuses: cloneStrings(c.Statuses), Values: cloneStrings(c.Values)}
	}
	return out
}

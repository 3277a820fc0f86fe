package flow

import (
	"fmt"
	"slices"
	"time"

	"github.com/assent-run/assent/flow/jcs"
)

// Fact is what the runtime knows about one facet of an instance. A facet
// with no fact has status "absent".
type Fact struct {
	Status string `json:"status" enum:"known,unknown,absent,stale,ambiguous,conflicting"`
	Value  string `json:"value,omitempty"`
}

// Instance is one running copy of a program: its phase, its facts, the
// objective it pursues and a revision that grows by exactly one per
// committed transition.
type Instance struct {
	ID        string          `json:"instance_id"`
	Program   string          `json:"program_fingerprint"`
	Owner     string          `json:"owner,omitempty"`
	Phase     string          `json:"phase"`
	Facts     map[string]Fact `json:"facts"`
	Objective string          `json:"objective,omitempty"`
	Revision  int64           `json:"revision"`
	// Recovery is set when an effect's outcome was uncertain. Until a
	// RECOVERY transition commits, only RECOVERY transitions are
	// selectable.
	Recovery *RecoveryMark `json:"recovery,omitempty"`
	// Pending is the prescription being applied, if any. It keeps two
	// appliers from running effects against the same revision.
	Pending string `json:"pending,omitempty"`
	// PendingNode is the node that marked the instance Pending, and
	// PendingAt when: a mark left by a node that died mid-apply is
	// settled by another node once it is older than the kernel's
	// interrupted-apply bound (see Kernel.SweepInterrupted).
	PendingNode string    `json:"pending_node,omitempty"`
	PendingAt   time.Time `json:"pending_at,omitzero"`
}

// ClearPending removes the mark of an apply in progress, which only the
// kernel reads, from a copy of the instance that is shown to a caller.
func (in *Instance) ClearPending() {
	in.Pending, in.PendingNode, in.PendingAt = "", "", time.Time{}
}

// RecoveryMark records why an instance needs recovery.
type RecoveryMark struct {
	Transition   string `json:"transition"`
	Prescription string `json:"prescription"`
	Cause        string `json:"cause"`
}

// Fact returns the fact for facet, with status "absent" when there is none.
func (in *Instance) Fact(facet string) Fact {
	if f, ok := in.Facts[facet]; ok {
		return f
	}
	return Fact{Status: StatusAbsent}
}

// Clone returns a deep copy.
func (in Instance) Clone() Instance {
	c := in
	if in.Facts != nil {
		c.Facts = make(map[string]Fact, len(in.Facts))
		for k, v := range in.Facts {
			c.Facts[k] = v
		}
	}
	if in.Recovery != nil {
		r := *in.Recovery
		c.Recovery = &r
	}
	return c
}

// Validate checks the state's shape: a phase name, facet names, known
// statuses and a non-negative revision. Errors carry CodeStateInvalid.
func (in *Instance) Validate() error {
	if !isName(in.Phase) {
		return &Error{Code: CodeStateInvalid, Path: "phase", Message: fmt.Sprintf("%q is not a phase name: %s", in.Phase, nameRule)}
	}
	if in.Revision < 0 {
		return &Error{Code: CodeStateInvalid, Path: "revision", Message: "must be 0 or more"}
	}
	if in.Objective != "" && !isID(in.Objective) {
		return &Error{Code: CodeStateInvalid, Path: "objective", Message: fmt.Sprintf("%q is not an objective id", in.Objective)}
	}
	for _, facet := range sortedKeys(in.Facts) {
		f := in.Facts[facet]
		p := []pathElem{{key: "facts"}, {key: facet}}
		if !isName(facet) {
			return &Error{Code: CodeStateInvalid, Path: renderPath(p), Message: fmt.Sprintf("%q is not a facet name: %s", facet, nameRule)}
		}
		if _, ok := slices.BinarySearch(factStatuses, f.Status); !ok {
			return &Error{Code: CodeStateInvalid, Path: renderPath(append(p, pathElem{key: "status"})), Message: fmt.Sprintf("%q is not a fact status; use one of known, absent, unknown, stale, ambiguous, conflicting", f.Status)}
		}
	}
	return nil
}

// SnapshotFingerprint identifies the state a decision was made on: phase,
// facts, objective and recovery mark (not the revision or the id, which
// prescriptions bind separately).
func (in *Instance) SnapshotFingerprint() string {
	return Fingerprint(in.appendSnapshot(nil))
}

func (in *Instance) appendSnapshot(b []byte) []byte {
	b = append(b, `{"facts":{`...)
	for _, facet := range sortedKeys(in.Facts) {
		f := in.Facts[facet]
		if f.Status == StatusAbsent && f.Value == "" {
			continue // an absent fact is the same as no fact
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = jcs.AppendString(b, facet)
		b = append(b, `:{"status":`...)
		b = jcs.AppendString(b, f.Status)
		if f.Value != "" {
			b = append(b, `,"value":`...)
			b = jcs.AppendString(b, f.Value)
		}
		b = append(b, '}')
	}
	b = append(b, '}')
	if in.Objective != "" {
		b = append(b, `,"objective":`...)
		b = jcs.AppendString(b, in.Objective)
	}
	b = append(b, `,"phase":`...)
	b = jcs.AppendString(b, in.Phase)
	if r := in.Recovery; r != nil {
		b = append(b, `,"recovery":{"cause":`...)
		b = jcs.AppendString(b, r.Cause)
		b = append(b, `,"prescription":`...)
		b = jcs.AppendString(b, r.Prescription)
		b = append(b, `,"transition":`...)
		b = jcs.AppendString(b, r.Transition)
		b = append(b, '}')
	}
	return append(b, '}')
}

// Principal is who asks: a person, an agent or a service, with the
// capabilities its token grants. Policy is true when the token also carries
// policy authority.
type Principal struct {
	ID     string   `json:"id"`
	Kind   string   `json:"kind"`
	Grants []string `json:"grants"`
	Policy bool     `json:"policy,omitempty"`

	// quorate is set only by Kernel.Approve, for the person whose
	// approval completes an approval rule: a transition with a rule
	// resolves as PRESCRIBED for no one else.
	quorate bool
}

// Validate checks the principal's kind and grants.
func (pr *Principal) Validate() error {
	switch pr.Kind {
	case AuthorityHuman, AuthorityAgent, AuthorityService:
	default:
		return &Error{Code: CodeStateInvalid, Path: "kind", Message: fmt.Sprintf("%q is not a principal kind; use human, agent or service", pr.Kind)}
	}
	if pr.ID == "" {
		return &Error{Code: CodeStateInvalid, Path: "id", Message: "a principal needs an id"}
	}
	for i, g := range pr.Grants {
		if !isID(g) {
			return &Error{Code: CodeStateInvalid, Path: renderPath([]pathElem{{key: "grants"}, {index: i}}), Message: fmt.Sprintf("%q is not a capability id", g)}
		}
	}
	return nil
}

// Classes returns the principal's authority classes: its kind, plus policy
// when its token says so.
func (pr *Principal) Classes() []string {
	if pr.Policy {
		out := []string{pr.Kind, AuthorityPolicy}
		slices.Sort(out)
		return out
	}
	return []string{pr.Kind}
}

func (pr *Principal) hasClass(c string) bool {
	return c == pr.Kind || (c == AuthorityPolicy && pr.Policy)
}

func (pr *Principal) granted(capability string) bool {
	return slices.Contains(pr.Grants, capability)
}

// AuthorityFingerprint identifies the authority a prescription was issued
// to: the principal's id, kind, classes and grants.
func (pr *Principal) AuthorityFingerprint() string {
	grants := slices.Clone(pr.Grants)
	slices.Sort(grants)
	grants = slices.Compact(grants)
	b := append([]byte(nil), `{"classes":`...)
	b = appendStrings(b, pr.Classes())
	b = append(b, `,"grants":`...)
	b = appendStrings(b, grants)
	b = append(b, `,"id":`...)
	b = jcs.AppendString(b, pr.ID)
	b = append(b, `,"kind":`...)
	b = jcs.AppendString(b, pr.Kind)
	b = append(b, '}')
	return Fingerprint(b)
}

// holds reports whether c holds on the instance. The phase facet, allowed
// in objective conditions, is the instance's phase with status known.
func (in *Instance) holds(c *Condition) bool {
	var f Fact
	if c.Facet == PhaseFacet {
		f = Fact{Status: StatusKnown, Value: in.Phase}
	} else {
		f = in.Fact(c.Facet)
	}
	if !slices.Contains(c.Statuses, f.Status) {
		return false
	}
	return len(c.Values) == 0 || slices.Contains(c.Values, f.Value)
}

// firstFailing returns the index of the first condition that does not hold,
// or -1.
func (in *Instance) firstFailing(cs []Condition) int {
	for i := range cs {
		if !in.holds(&cs[i]) {
			return i
		}
	}
	return -1
}

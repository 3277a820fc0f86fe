package flow

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
)

// Program is a loaded Control Program: validated, normalized and
// fingerprinted. It is immutable and safe for concurrent use.
type Program struct {
	m           Manifest // normalized; transitions sorted by qualified id
	fingerprint string
	sizeHint    int
	registry    []*Transition // registry order
	byID        map[string]*Transition
	contracts   map[string]*ObjectiveContract
}

// Load decodes, validates, normalizes and fingerprints a Control Program.
//
// Checks run in a fixed order and the first stage that fails ends loading:
//
//  1. the strict decoder: size (16 MiB), JSON syntax, UTF-8, duplicate keys
//     at any depth, nesting depth (64), trailing data → PROGRAM_INVALID;
//  2. schema_version: not a positive integer → PROGRAM_INVALID; any
//     positive value other than 1 → PROGRAM_SCHEMA_UNSUPPORTED;
//  3. program_id, program_version and requires_runtime syntax, and the
//     runtime version itself → PROGRAM_INVALID;
//  4. requires_runtime above the runtime version → RUNTIME_TOO_OLD;
//  5. the rest of the document's shape: unknown or missing keys, wrong
//     types, non-integer numbers → PROGRAM_INVALID;
//  6. the manifest rules, in document order: top-level declarations
//     (grammar, duplicates, known to the inventory), objective contracts,
//     transition ids, then each transition key by key, then unused
//     declarations → PROGRAM_INVALID.
//
// The error is an ErrorList; stages 1–5 report one error (stage 5 up to 32),
// stage 6 every error it finds (up to 64). Nothing is built when loading
// fails.
func Load(data []byte, inv *Inventory) (*Program, error) {
	if inv == nil {
		return nil, ErrorList{{Code: CodeProgramInvalid, Path: "", Message: "no runtime inventory; pass flow.NewInventory(version)"}}
	}
	m, fatal, shape := decodeManifest(data)
	if fatal != nil {
		return nil, ErrorList{fatal}
	}
	for _, e := range shape {
		if e.Path == "schema_version" {
			return nil, ErrorList{e}
		}
	}
	if err := checkHeader(m, inv.Version()); err != nil {
		return nil, ErrorList{err}
	}
	if len(shape) > 0 {
		return nil, ErrorList(shape)
	}
	p, errs := compile(m, inv, len(data))
	if errs != nil {
		return nil, errs
	}
	return p, nil
}

// checkHeader runs stages 2–4: the checks that decide whether this runtime
// can read the document at all.
func checkHeader(m *Manifest, runtime string) *Error {
	switch {
	case m.SchemaVersion < 1:
		return &Error{Code: CodeProgramInvalid, Path: "schema_version", Message: "must be a positive integer; this runtime reads schema_version 1"}
	case m.SchemaVersion != SchemaVersion:
		return &Error{Code: CodeSchemaUnsupported, Path: "schema_version", Message: "schema " + strconv.FormatInt(m.SchemaVersion, 10) + " is not supported; this runtime reads schema_version 1"}
	case !isID(m.ProgramID):
		return &Error{Code: CodeProgramInvalid, Path: "program_id", Message: "must be an id without '/': " + idRule}
	case !isVersionToken(m.ProgramVersion):
		return &Error{Code: CodeProgramInvalid, Path: "program_version", Message: "must match ^[A-Za-z0-9][A-Za-z0-9._-]*$, for example \"1.0.0\""}
	}
	minimum, ok := parseMinimum(m.RequiresRuntime)
	if !ok {
		return &Error{Code: CodeProgramInvalid, Path: "requires_runtime", Message: "must be >=MAJOR.MINOR.PATCH without spaces or leading zeros, for example \">=0.1.0\""}
	}
	rt, ok := parseRuntimeVersion(runtime)
	if !ok {
		return &Error{Code: CodeProgramInvalid, Path: "runtime", Message: "the runtime version " + strconv.Quote(runtime) + " is not MAJOR.MINOR.PATCH"}
	}
	if rt.less(minimum) {
		return &Error{Code: CodeRuntimeTooOld, Path: "requires_runtime", Message: "runtime " + runtime + " does not satisfy " + m.RequiresRuntime + "; upgrade the runtime or lower requires_runtime"}
	}
	return nil
}

// newProgram indexes a normalized manifest and computes its fingerprint;
// sizeHint (the source length) bounds the canonical size in practice.
func newProgram(m *Manifest, sizeHint int) *Program {
	// compile emits the transitions sorted by qualified id.
	p := &Program{m: *m, byID: make(map[string]*Transition, len(m.Transitions)), contracts: make(map[string]*ObjectiveContract)}
	for i := range p.m.Transitions {
		t := &p.m.Transitions[i]
		p.byID[t.ID] = t
	}
	p.registry = registryOrder(p.m.Transitions)
	for i := range p.m.ObjectiveContracts {
		oc := &p.m.ObjectiveContracts[i]
		p.contracts[oc.Objective] = oc
	}
	p.sizeHint = sizeHint
	p.fingerprint = fingerprintOf(&p.m, sizeHint)
	return p
}

// registryOrder returns the transitions, given in qualified-id order,
// ordered by class rank, then priority, then qualified id. It ranks each
// transition once and breaks ties by position, which is the id order.
func registryOrder(ts []Transition) []*Transition {
	type key struct {
		rank     int
		priority int64
		pos      int
	}
	keys := make([]key, len(ts))
	for i := range ts {
		keys[i] = key{Rank(ts[i].SelectionClass), ts[i].Priority, i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.rank != b.rank {
			return cmp.Compare(a.rank, b.rank)
		}
		if a.priority != b.priority {
			return cmp.Compare(a.priority, b.priority)
		}
		return cmp.Compare(a.pos, b.pos)
	})
	reg := make([]*Transition, len(ts))
	for i, k := range keys {
		reg[i] = &ts[k.pos]
	}
	return reg
}

// ID returns the program id.
func (p *Program) ID() string { return p.m.ProgramID }

// Version returns program_version, which the fingerprint excludes.
func (p *Program) Version() string { return p.m.ProgramVersion }

// RequiresRuntime returns requires_runtime, which the fingerprint excludes.
func (p *Program) RequiresRuntime() string { return p.m.RequiresRuntime }

// Fingerprint returns "sha256:" and the hex SHA-256 of the canonical bytes.
func (p *Program) Fingerprint() string { return p.fingerprint }

// Canonical returns the canonical executable representation: the exact
// bytes the fingerprint hashes. They are written afresh on each call.
func (p *Program) Canonical() []byte {
	return appendCanonical(make([]byte, 0, p.sizeHint+p.sizeHint/8+256), &p.m, nil)
}

// Manifest returns a copy of the normalized manifest: sets sorted,
// transition ids and recovery references qualified, transitions sorted by
// id.
func (p *Program) Manifest() Manifest {
	m := p.m
	m.Transitions = make([]Transition, len(p.m.Transitions))
	for i := range p.m.Transitions {
		m.Transitions[i] = p.m.Transitions[i].clone()
	}
	m.OwnedResources = cloneStrings(p.m.OwnedResources)
	m.Capabilities = Capabilities{
		Effects:           cloneStrings(p.m.Capabilities.Effects),
		Verifiers:         cloneStrings(p.m.Capabilities.Verifiers),
		CapabilitySurface: cloneStrings(p.m.Capabilities.CapabilitySurface),
	}
	m.ObjectiveContracts = make([]ObjectiveContract, len(p.m.ObjectiveContracts))
	for i, oc := range p.m.ObjectiveContracts {
		m.ObjectiveContracts[i] = ObjectiveContract{Objective: oc.Objective, Conditions: cloneConditions(oc.Conditions)}
	}
	return m
}

// Transitions returns copies of the transitions in registry order: by
// selection-class rank, then priority, then qualified id.
func (p *Program) Transitions() []Transition {
	out := make([]Transition, len(p.registry))
	for i, t := range p.registry {
		out[i] = t.clone()
	}
	return out
}

// Transition returns a copy of the transition with the given qualified id
// ("<program_id>/<id>") or local id.
func (p *Program) Transition(id string) (Transition, bool) {
	t := p.lookup(id)
	if t == nil {
		return Transition{}, false
	}
	return t.clone(), true
}

func (p *Program) lookup(id string) *Transition {
	if t, ok := p.byID[id]; ok {
		return t
	}
	return p.byID[p.m.ProgramID+"/"+id]
}

// Len returns the number of transitions.
func (p *Program) Len() int { return len(p.registry) }

// EntryPhases returns the phases where the program's law begins: those
// some transition leaves and no transition leads into, sorted. A starter
// that is not trusted to say how far an instance has come starts it in one
// of them. A program whose every phase is some transition's target has
// none.
func (p *Program) EntryPhases() []string {
	targets := map[string]bool{}
	for _, t := range p.m.Transitions {
		for _, ph := range t.TargetPhases {
			targets[ph] = true
		}
	}
	var out []string
	for _, t := range p.m.Transitions {
		for _, ph := range t.SourcePhases {
			if !targets[ph] && !slices.Contains(out, ph) {
				out = append(out, ph)
			}
		}
	}
	slices.Sort(out)
	return out
}

// DerivedFacets returns the facets the program's transitions establish,
// sorted: those their assignments set and those their target conditions
// name. They record what the law decided (an approval, a payment's
// outcome), so an untrusted starter does not give them.
func (p *Program) DerivedFacets() []string {
	seen := map[string]bool{}
	for _, t := range p.m.Transitions {
		for _, a := range t.Assignments {
			seen[a.Facet] = true
		}
		for _, c := range t.TargetConditions {
			seen[c.Facet] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Phases returns every phase the program's transitions leave or lead
// into, sorted: the phases an instance of it can be in and move from.
func (p *Program) Phases() []string {
	var out []string
	for _, t := range p.m.Transitions {
		for _, ph := range slices.Concat(t.SourcePhases, t.TargetPhases) {
			if !slices.Contains(out, ph) {
				out = append(out, ph)
			}
		}
	}
	slices.Sort(out)
	return out
}

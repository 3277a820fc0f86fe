package flow

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// maxErrors bounds the semantic errors reported for one program.
const maxErrors = 64

const (
	idRule   = `use lowercase letters and digits in segments separated by "." or "-", starting with a letter, at most 128 bytes`
	nameRule = `use lowercase letters and digits in segments separated by ".", "_" or "-", starting with a letter, at most 128 bytes`
)

var (
	authorityClasses = []string{AuthorityAgent, AuthorityHuman, AuthorityNone, AuthorityPolicy, AuthorityService}
	factStatuses     = []string{StatusAbsent, StatusAmbiguous, StatusConflicting, StatusKnown, StatusStale, StatusUnknown}
	authorityRule    = "use one of " + strings.Join(authorityClasses, ", ")
	statusRule       = "use one of " + strings.Join(factStatuses, ", ")
)

// checker validates a decoded manifest. Its path is the location of the
// value being checked; errors extend it with the offending key or index.
type checker struct {
	errs ErrorList
	inv  inventoryView
	path pathStack

	// Storage for what the normalized program keeps, and scratch space
	// for sorting condition sets.
	text    stringArena
	conds   slab[Condition]
	params  slab[Parameter]
	assigns slab[Assignment]
	specs   slab[PrescriptionSpec]
	intrs   slab[Interruption]
	pols    slab[Policy]
	norm    []Condition
	keys    []conditionKey
	buf     []byte
}

// conditionKey is a condition's canonical bytes and its source index.
type conditionKey struct {
	key []byte
	src int
}

func (c *checker) add(extra []any, format string, args ...any) {
	if len(c.errs) < maxErrors {
		c.errs = append(c.errs, &Error{Code: CodeProgramInvalid, Path: c.path.with(extra...), Message: fmt.Sprintf(format, args...)})
	}
}

// at is shorthand for building the extra path elements of an error.
func at(elems ...any) []any { return elems }

// set checks that list, the value of key, is a duplicate-free set whose
// members satisfy valid, and returns it sorted (nil when empty). It sorts
// list in place: the decoded manifest is private to Load.
func (c *checker) set(key string, list []string, valid func(string) bool, what, rule string) []string {
	if len(list) == 0 {
		return nil
	}
	for i, s := range list {
		if valid != nil && !valid(s) {
			c.add(at(key, i), "%q is not a valid %s: %s", s, what, rule)
		}
	}
	if len(list) == 1 {
		return list
	}
	if slices.IsSorted(list) {
		if i := firstAdjacentDup(list); i >= 0 {
			c.add(at(key, i), "duplicate member %q; a set lists each member once", list[i])
			return slices.Compact(slices.Clone(list))
		}
		return list
	}
	// Find a duplicate in source order before sorting.
	if len(list) <= 16 {
		for i := 1; i < len(list); i++ {
			if slices.Contains(list[:i], list[i]) {
				c.add(at(key, i), "duplicate member %q; a set lists each member once", list[i])
				out := slices.Clone(list)
				slices.Sort(out)
				return slices.Compact(out)
			}
		}
		slices.Sort(list)
		return list
	}
	out := slices.Clone(list)
	slices.Sort(out)
	if i := firstAdjacentDup(out); i >= 0 {
		first := slices.Index(list, out[i])
		second := first + 1 + slices.Index(list[first+1:], out[i])
		c.add(at(key, second), "duplicate member %q; a set lists each member once", out[i])
		return slices.Compact(out)
	}
	return out
}

// firstAdjacentDup returns the index of the first element equal to its
// predecessor, or -1.
func firstAdjacentDup(sorted []string) int {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return i
		}
	}
	return -1
}

func isAuthority(s string) bool { return slices.Contains(authorityClasses, s) }
func isStatus(s string) bool    { return slices.Contains(factStatuses, s) }

// conditions validates the condition set under key and returns it
// normalized and sorted by canonical bytes. phaseAllowed is true for
// objective conditions.
func (c *checker) conditions(key string, list []Condition, phaseAllowed bool) []Condition {
	if len(list) == 0 {
		return nil
	}
	c.path.push(key)
	defer c.path.pop()
	norm := c.norm[:0]
	for i, cond := range list {
		c.path.pushIndex(i)
		switch {
		case !isName(cond.Facet):
			c.add(at("facet"), "%q is not a valid facet name: %s", cond.Facet, nameRule)
		case cond.Facet == PhaseFacet && !phaseAllowed:
			c.add(at("facet"), `the phase is not a fact here; use source_phases or target_phases`)
		}
		if len(cond.Statuses) == 0 {
			c.add(at("statuses"), "needs at least one status; %s", statusRule)
		}
		norm = append(norm, Condition{
			Facet:    cond.Facet,
			Statuses: c.set("statuses", cond.Statuses, isStatus, "status", statusRule),
			Values:   c.set("values", cond.Values, nil, "value", ""),
		})
		c.path.pop()
	}
	c.norm = norm
	defer clear(norm) // keep no references in the scratch space
	if len(norm) == 1 {
		return c.conds.one(norm[0])
	}
	keys, buf := c.keys[:0], c.buf[:0]
	for i := range norm {
		start := len(buf)
		buf = appendCondition(buf, &norm[i])
		keys = append(keys, conditionKey{src: i, key: buf[start:len(buf):len(buf)]})
	}
	c.keys, c.buf = keys, buf
	slices.SortStableFunc(keys, func(a, b conditionKey) int { return bytes.Compare(a.key, b.key) })
	c.conds.reserve(len(keys))
	start := len(c.conds.buf)
	for i, k := range keys {
		if i > 0 && bytes.Equal(k.key, keys[i-1].key) {
			c.add(at(max(k.src, keys[i-1].src)), "duplicate condition; a set lists each condition once")
			continue
		}
		c.conds.buf = append(c.conds.buf, norm[k.src])
	}
	clear(keys)
	return c.conds.buf[start:len(c.conds.buf):len(c.conds.buf)]
}

// compile validates a decoded manifest against the inventory and builds the
// normalized program, in the order documented on Load.
func compile(m *Manifest, inv *Inventory, sizeHint int) (*Program, ErrorList) {
	c := &checker{inv: inv.snapshot()}
	c.path.elems = make([]pathElem, 0, 8)
	n := &Manifest{
		SchemaVersion:   m.SchemaVersion,
		ProgramID:       m.ProgramID,
		ProgramVersion:  m.ProgramVersion,
		RequiresRuntime: m.RequiresRuntime,
	}

	// Top-level declarations. Sets are sorted in place below, so keep the
	// source order for the unused-declaration errors.
	srcEffects := slices.Clone(m.Capabilities.Effects)
	srcVerifiers := slices.Clone(m.Capabilities.Verifiers)
	srcResources := slices.Clone(m.OwnedResources)
	c.path.push("capabilities")
	for i, e := range m.Capabilities.Effects {
		if _, ok := c.inv.minimums[e]; isID(e) && !ok {
			c.add(at("effects", i), "the runtime has no effect %q; known effects are %s", e, strings.Join(sortedKeys(c.inv.minimums), ", "))
		}
	}
	for i, v := range m.Capabilities.Verifiers {
		if isID(v) && !c.inv.verifiers[v] {
			c.add(at("verifiers", i), "the runtime has no verifier %q; known verifiers are %s", v, strings.Join(sortedKeys(c.inv.verifiers), ", "))
		}
	}
	for i, k := range m.Capabilities.CapabilitySurface {
		if isID(k) && !c.inv.capabilities[k] {
			c.add(at("capability_surface", i), "unknown capability %q; the runtime knows %s (applications may register more)", k, strings.Join(sortedKeys(c.inv.capabilities), ", "))
		}
	}
	n.Capabilities.Effects = c.set("effects", m.Capabilities.Effects, isID, "effect id", idRule)
	n.Capabilities.Verifiers = c.set("verifiers", m.Capabilities.Verifiers, isID, "verifier id", idRule)
	n.Capabilities.CapabilitySurface = c.set("capability_surface", m.Capabilities.CapabilitySurface, isID, "capability", idRule)
	c.path.pop()
	n.OwnedResources = c.set("owned_resources", m.OwnedResources, isID, "resource id", idRule)

	// Objective contracts.
	if len(m.ObjectiveContracts) == 0 {
		c.add(at("objective_contracts"), "needs at least one objective contract {objective, conditions}")
	}
	contracts := make(map[string]bool, len(m.ObjectiveContracts))
	c.path.push("objective_contracts")
	for i, oc := range m.ObjectiveContracts {
		c.path.pushIndex(i)
		switch {
		case !isID(oc.Objective):
			c.add(at("objective"), "%q is not a valid objective id: %s", oc.Objective, idRule)
		case contracts[oc.Objective]:
			c.add(at("objective"), "duplicate objective %q; each objective has one contract", oc.Objective)
		}
		contracts[oc.Objective] = true
		if len(oc.Conditions) == 0 {
			c.add(at("conditions"), "needs at least one condition")
		}
		n.ObjectiveContracts = append(n.ObjectiveContracts, ObjectiveContract{
			Objective:  oc.Objective,
			Conditions: c.conditions("conditions", oc.Conditions, true),
		})
		c.path.pop()
	}
	c.path.pop()
	slices.SortStableFunc(n.ObjectiveContracts, func(a, b ObjectiveContract) int { return strings.Compare(a.Objective, b.Objective) })

	// Transitions: ids first, so that recovery references resolve.
	if len(m.Transitions) == 0 {
		c.add(at("transitions"), "needs at least one transition")
	}
	classOf := make(map[string]string, len(m.Transitions))
	for i := range m.Transitions {
		t := &m.Transitions[i]
		_, dup := classOf[t.ID]
		switch {
		case !isID(t.ID):
			c.add(at("transitions", i, "id"), "%q is not a valid transition id: %s", t.ID, idRule)
		case dup:
			c.add(at("transitions", i, "id"), "duplicate transition id %q; ids are unique within a program", t.ID)
		}
		if !dup {
			classOf[t.ID] = t.SelectionClass
		}
	}
	usedEffects := make(map[string]bool, len(srcEffects))
	usedVerifiers := make(map[string]bool, len(srcVerifiers))
	usedResources := make(map[string]bool, len(srcResources))
	// Normalized transitions are written directly in qualified-id order
	// (the local ids sort the same way), moving indexes rather than
	// structs.
	order := make([]int, len(m.Transitions))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(m.Transitions[a].ID, m.Transitions[b].ID) })
	rank := make([]int, len(order))
	for k, i := range order {
		rank[i] = k
	}
	n.Transitions = make([]Transition, len(m.Transitions))
	c.path.push("transitions")
	for i := range m.Transitions {
		c.path.pushIndex(i)
		t := &n.Transitions[rank[i]]
		c.transition(t, &m.Transitions[i], n, contracts, classOf)
		c.path.pop()
		usedEffects[t.Effect] = true
		usedVerifiers[t.Verifier] = true
		for _, r := range t.OwnedResources {
			usedResources[r] = true
		}
	}
	c.path.pop()

	// Every declaration is used.
	for i, e := range srcEffects {
		if isID(e) && !usedEffects[e] {
			c.add(at("capabilities", "effects", i), "effect %q is declared but no transition uses it; remove it", e)
		}
	}
	for i, v := range srcVerifiers {
		if isID(v) && !usedVerifiers[v] {
			c.add(at("capabilities", "verifiers", i), "verifier %q is declared but no transition uses it; remove it", v)
		}
	}
	for i, r := range srcResources {
		if isID(r) && !usedResources[r] {
			c.add(at("owned_resources", i), "resource %q is declared but no transition owns it; remove it", r)
		}
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return newProgram(n, sizeHint), nil
}

func contains(sorted []string, s string) bool {
	if len(sorted) <= 8 {
		// A short scan beats the search's comparisons.
		return slices.Contains(sorted, s)
	}
	_, ok := slices.BinarySearch(sorted, s)
	return ok
}

// transition validates t, whose path is on the stack, into out.
func (c *checker) transition(out, t *Transition, prog *Manifest, contracts map[string]bool, classOf map[string]string) {
	// out is zero (a fresh slot of the normalized list): its fields are set
	// one by one rather than by copying a whole struct into it.
	out.ID = c.text.join(prog.ProgramID, "/", t.ID)
	out.SelectionClass, out.Priority = t.SelectionClass, t.Priority
	out.Effect, out.Verifier = t.Effect, t.Verifier
	controllable := t.SelectionClass != ObservedExternal
	if Rank(t.SelectionClass) == 0 {
		c.add(at("selection_class"), "%q is not a selection class; use RECOVERY, OBJECTIVE_REQUIRED, PROGRESS, EXPLICIT_ONLY or OBSERVED_EXTERNAL", t.SelectionClass)
	}
	if t.Priority < 1 {
		c.add(at("priority"), "must be an integer of at least 1 (lower is preferred)")
	}
	if len(t.SourcePhases) == 0 {
		c.add(at("source_phases"), "needs at least one phase")
	}
	out.SourcePhases = c.set("source_phases", t.SourcePhases, isName, "phase name", nameRule)
	if len(t.TargetPhases) == 0 {
		c.add(at("target_phases"), "needs at least one phase")
	}
	out.TargetPhases = c.set("target_phases", t.TargetPhases, isName, "phase name", nameRule)
	for i, o := range t.Objectives {
		if isID(o) && !contracts[o] {
			c.add(at("objectives", i), "objective %q has no objective contract; declare it in objective_contracts", o)
		}
	}
	out.Objectives = c.set("objectives", t.Objectives, isID, "objective id", idRule)
	if len(t.Authority) == 0 {
		c.add(at("authority"), `needs at least one authority class (use "none" to admit any principal)`)
	}
	out.Authority = c.set("authority", t.Authority, isAuthority, "authority class", authorityRule)
	out.AuthorityAll = c.set("authority_all", t.AuthorityAll, isAuthority, "authority class", authorityRule)
	out.RequiredIdentity = c.set("required_identity", t.RequiredIdentity, isName, "identity claim", nameRule)
	out.RequiredEvidence = c.set("required_evidence", t.RequiredEvidence, isName, "evidence name", nameRule)
	for i, r := range t.OwnedResources {
		if isID(r) && !contains(prog.OwnedResources, r) {
			c.add(at("owned_resources", i), "resource %q is not declared in the top-level owned_resources", r)
		}
	}
	out.OwnedResources = c.set("owned_resources", t.OwnedResources, isID, "resource id", idRule)

	// Parameters, keyed by name.
	if len(t.Parameters) > 0 {
		for i, prm := range t.Parameters {
			if !isName(prm.Name) {
				c.add(at("parameters", i, "name"), "%q is not a valid parameter name: %s", prm.Name, nameRule)
			}
		}
		out.Parameters = c.params.clone(t.Parameters)
		slices.SortStableFunc(out.Parameters, func(a, b Parameter) int { return strings.Compare(a.Name, b.Name) })
		for i := 1; i < len(out.Parameters); i++ {
			if name := out.Parameters[i].Name; name == out.Parameters[i-1].Name {
				named := func(p Parameter) bool { return p.Name == name }
				first := slices.IndexFunc(t.Parameters, named)
				second := first + 1 + slices.IndexFunc(t.Parameters[first+1:], named)
				c.add(at("parameters", second, "name"), "duplicate parameter %q; names are unique", name)
				break
			}
		}
	}
	out.SourceConditions = c.conditions("source_conditions", t.SourceConditions, false)
	out.TargetConditions = c.conditions("target_conditions", t.TargetConditions, false)

	// Assignments, keyed by facet.
	if len(t.Assignments) > 0 {
		for i, a := range t.Assignments {
			switch {
			case !isName(a.Facet):
				c.add(at("assignments", i, "facet"), "%q is not a valid facet name: %s", a.Facet, nameRule)
			case a.Facet == PhaseFacet:
				c.add(at("assignments", i, "facet"), "the phase is not assigned as a fact; state.assign moves to the target phase")
			}
		}
		out.Assignments = c.assigns.clone(t.Assignments)
		slices.SortStableFunc(out.Assignments, func(a, b Assignment) int { return strings.Compare(a.Facet, b.Facet) })
		for i := 1; i < len(out.Assignments); i++ {
			if facet := out.Assignments[i].Facet; facet == out.Assignments[i-1].Facet {
				first := slices.IndexFunc(t.Assignments, func(a Assignment) bool { return a.Facet == facet })
				second := first + 1 + slices.IndexFunc(t.Assignments[first+1:], func(a Assignment) bool { return a.Facet == facet })
				c.add(at("assignments", second, "facet"), "facet %q is assigned twice; assign each facet once", facet)
				break
			}
		}
	}

	// Capabilities and the effect.
	if controllable && len(t.RequiredCapabilities) == 0 {
		c.add(at("required_capabilities"), "a controllable transition needs at least one required capability")
	}
	for i, k := range t.RequiredCapabilities {
		switch {
		case !isID(k):
		case !c.inv.capabilities[k]:
			c.add(at("required_capabilities", i), "unknown capability %q", k)
		case !contains(prog.Capabilities.CapabilitySurface, k):
			c.add(at("required_capabilities", i), "capability %q is not in capabilities.capability_surface; declare it there", k)
		}
	}
	out.RequiredCapabilities = c.set("required_capabilities", t.RequiredCapabilities, isID, "capability", idRule)
	switch {
	case !controllable && t.Effect != "":
		c.add(at("effect"), "an OBSERVED_EXTERNAL transition has no effect; remove the key")
	case controllable && t.Effect == "":
		c.add(at("effect"), "a controllable transition needs an effect declared in capabilities.effects")
	case controllable && !contains(prog.Capabilities.Effects, t.Effect):
		c.add(at("effect"), "effect %q is not declared in capabilities.effects", t.Effect)
	case controllable:
		if min, ok := c.inv.minimums[t.Effect]; ok && !contains(prog.Capabilities.CapabilitySurface, min) {
			c.add(at("effect"), "effect %q needs the kernel minimum capability %q, which capabilities.capability_surface does not declare", t.Effect, min)
		}
		if t.Effect == EffectStateAssign && len(out.TargetPhases) > 1 {
			c.add(at("target_phases"), "state.assign moves to a single target phase; list exactly one")
		}
	}
	switch {
	case t.Verifier == "":
		c.add(at("verifier"), "needs a verifier declared in capabilities.verifiers")
	case !contains(prog.Capabilities.Verifiers, t.Verifier):
		c.add(at("verifier"), "verifier %q is not declared in capabilities.verifiers", t.Verifier)
	}

	// Prescription.
	switch ps := t.Prescription; {
	case !controllable && ps != nil:
		c.add(at("prescription"), "an OBSERVED_EXTERNAL transition has no prescription; remove the key")
	case controllable && ps == nil:
		c.add(at("prescription"), "a controllable transition needs a prescription {operation, arguments?, expected_postcondition}")
	case ps != nil:
		if !isName(ps.Operation) {
			c.add(at("prescription", "operation"), "%q is not a valid operation name: %s", ps.Operation, nameRule)
		}
		if ps.ExpectedPostcondition == "" {
			c.add(at("prescription", "expected_postcondition"), "must describe the state the operation establishes")
		}
		// The decoded manifest is private to Load, so its lists can be
		// kept as they are.
		out.Prescription = c.specs.new()
		*out.Prescription = PrescriptionSpec{Operation: ps.Operation, Arguments: ps.Arguments, ExpectedPostcondition: ps.ExpectedPostcondition}
	}

	if in := t.Interruption; in != nil {
		c.path.push("interruption")
		if len(in.Points) == 0 {
			c.add(at("points"), "needs at least one interruption point")
		}
		out.Interruption = c.intrs.new()
		*out.Interruption = Interruption{
			Points:   c.set("points", in.Points, isName, "interruption point", nameRule),
			Recovery: c.text.join(prog.ProgramID, "/", in.Recovery),
		}
		class, ok := classOf[in.Recovery]
		switch {
		case !isID(in.Recovery):
			c.add(at("recovery"), "%q is not a valid transition id: %s", in.Recovery, idRule)
		case !ok:
			c.add(at("recovery"), "no transition %q in this program", in.Recovery)
		case class != Recovery:
			c.add(at("recovery"), "transition %q is %s; recovery must name a RECOVERY transition", in.Recovery, class)
		}
		c.path.pop()
	}
	if r := t.Approval; r != nil {
		c.approvalRule(out, r, t, controllable)
	}
	if pol := t.Policy; pol != nil {
		c.path.push("policy")
		ops := c.set("managed_operations", pol.ManagedOperations, isName, "operation name", nameRule)
		c.path.pop()
		if len(ops) > 0 {
			out.Policy = c.pols.new()
			out.Policy.ManagedOperations = ops
		}
	}
}

// approvalRule validates t's approval rule r into out. A rule that asks for
// one person of no group is the default and is dropped, so it leaves the
// canonical form and the fingerprint as if the key were absent.
func (c *checker) approvalRule(out *Transition, r *ApprovalRule, t *Transition, controllable bool) {
	if r.Quorum < 1 || r.Quorum > MaxQuorum {
		c.add(at("approval", "quorum"), "must be an integer from 1 to %d: how many distinct people must approve", MaxQuorum)
	}
	if r.Group != "" && !isName(r.Group) {
		c.add(at("approval", "group"), "%q is not a valid group name: %s", r.Group, nameRule)
	}
	if r.deadlineSet && (r.DeadlineSeconds < 1 || r.DeadlineSeconds > MaxApprovalDeadline) {
		c.add(at("approval", "deadline_seconds"), "must be an integer from 1 to %d (30 days): how many seconds people have to decide", MaxApprovalDeadline)
	}
	fallback := r.Fallback
	switch {
	case r.Fallback != "" && r.Fallback != FallbackDecline:
		c.add(at("approval", "fallback"), "%q is not a fallback: the only one is %q", r.Fallback, FallbackDecline)
	case r.Fallback != "" && !r.deadlineSet:
		c.add(at("approval", "fallback"), "a fallback is taken at a deadline: add deadline_seconds, or remove fallback")
	}
	if r.DeadlineSeconds > 0 {
		fallback = FallbackDecline
	}
	switch {
	case r.EscalateTo != "" && !isName(r.EscalateTo):
		c.add(at("approval", "escalate_to"), "%q is not a valid group name: %s", r.EscalateTo, nameRule)
	case r.EscalateTo != "" && !r.deadlineSet:
		c.add(at("approval", "escalate_to"), "an approval escalates at a deadline: add deadline_seconds, or remove escalate_to")
	case r.EscalateTo != "" && r.EscalateTo == r.Group:
		c.add(at("approval", "escalate_to"), "the approval is already routed to group %s: name another group, or remove escalate_to", r.Group)
	}
	switch {
	case !controllable:
		c.add(at("approval"), "an OBSERVED_EXTERNAL transition is never applied, so nobody approves it; remove the key")
	case !slices.Contains(t.Authority, AuthorityHuman) && !slices.Contains(t.Authority, AuthorityNone):
		c.add(at("approval"), `people approve this transition, so its authority must admit a person: add "human" to authority`)
	}
	for i, a := range t.AuthorityAll {
		if a != AuthorityHuman && a != AuthorityNone && a != AuthorityPolicy {
			c.add(at("authority_all", i), "%q: a transition with an approval rule is applied by the person who completes the approval, so authority_all may name only human, policy or none", a)
		}
	}
	if r.Quorum > 1 || r.Group != "" || r.DeadlineSeconds > 0 {
		out.Approval = &ApprovalRule{Quorum: r.Quorum, Group: r.Group, DeadlineSeconds: max(r.DeadlineSeconds, 0), Fallback: fallback, EscalateTo: r.EscalateTo}
	}
}

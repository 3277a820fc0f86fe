package screen

import "fmt"

// index holds a document's statements and what the document rules need to
// check a new statement in time proportional to what the statement touches:
// which component lists each id as a child, which fields edit each $key,
// which McpMutation governs each Button.
type index struct {
	ids         idTable            // component and McpMutation ids, defined or pending
	state       map[string]*stmt   // $key declarations
	order       []*stmt            // statements in document order
	editors     map[string][]*stmt // $key -> fields editing it
	users       map[string]int     // $key -> statements reading it
	mutByTarget map[string]*stmt
	kidHashes   []uint64 // hashes of the children of the statement checked last
	dupSlots    []int32  // scratch space for firstDuplicate
	entries     []entry  // the current chunk entries are carved from
	undefined   int      // entries whose id has no definition yet

	// What check looked up for the statement it last passed, so that add
	// need not look it up again: its entry (nil when new) and those of its
	// children, in order (nil for the new ones).
	checked     *stmt
	checkedSelf *entry
	checkedHash uint64 // the hash of its id
	checkedKids []*entry
	nComponents int
	nState      int
	maxComp     int
	maxState    int
}

func newIndex(maxComp, maxState int) *index {
	return &index{
		state:       map[string]*stmt{},
		editors:     map[string][]*stmt{},
		users:       map[string]int{},
		mutByTarget: map[string]*stmt{},
		maxComp:     maxComp,
		maxState:    maxState,
	}
}

// entry is what the index knows of one id: its definition, once it has
// arrived, and the component that lists it as a child, if any. Keeping both
// in one map entry makes each check of a line one lookup per id it names.
type entry struct {
	id     string
	def    *stmt
	parent *entry
}

// get returns the statement defining id, or nil.
func (x *index) get(id string) *stmt {
	if e := x.ids.get(id); e != nil {
		return e.def
	}
	return nil
}

// parentOf returns the id of the component listing id as a child, or "".
func (x *index) parentOf(id string) string {
	if e := x.ids.get(id); e != nil && e.parent != nil {
		return e.parent.id
	}
	return ""
}

// maxEntryChunk is the most entries one allocation holds; chunks start
// small and double, so that a short screen stays small.
const maxEntryChunk = 256

// entry returns the entry for id, making it if needed.
func (x *index) entry(id string) *entry {
	if e := x.ids.get(id); e != nil {
		return e
	}
	return x.newEntry(id, x.ids.hash(id))
}

// newEntry makes the entry for id, which has none and hashes to h.
func (x *index) newEntry(id string, h uint64) *entry {
	if len(x.entries) == cap(x.entries) {
		x.entries = make([]entry, 0, min(max(8, 2*cap(x.entries)), maxEntryChunk))
	}
	x.entries = append(x.entries, entry{id: id})
	e := &x.entries[len(x.entries)-1]
	x.ids.add(e, h)
	x.undefined++
	return e
}

// define records s as the definition of e.
func (x *index) define(e *entry, s *stmt) {
	if e.def == nil {
		x.undefined--
	}
	e.def = s
}

func (x *index) stateUsed(key string) bool { return x.users[key] > 0 }

// docIssue is a document-rule error for one statement.
type docIssue struct {
	code string
	msg  string
}

// check applies the document rules a statement must pass when it arrives
// (SPEC 5.3–5.6, 5.12, 5.13, 5.18–5.25), against the statements accepted so
// far. It returns the first rule broken, or nil.
func (x *index) check(s *stmt) *docIssue {
	if s.kind == stmtState {
		if x.state[s.key] != nil {
			return &docIssue{"duplicate_id", fmt.Sprintf("%s is already declared; a $key is assigned once and keeps its first value", s.key)}
		}
		if x.nState >= x.maxState {
			return &docIssue{"document_too_large", fmt.Sprintf("a screen may declare at most %d $keys", x.maxState)}
		}
		for _, f := range x.editors[s.key] {
			if !f.holds.ok(s.value) {
				return &docIssue{"input_state_type", fmt.Sprintf("%s is edited by %s %q (line %d), so it must hold %s", s.key, f.node.Type, f.node.ID, f.line, f.holds)}
			}
		}
		return nil
	}
	id := s.id()
	h := x.ids.hash(id)
	e := x.ids.lookup(id, h)
	if e != nil && e.def != nil {
		return &docIssue{"duplicate_id", fmt.Sprintf("%q is already defined on line %d; an id is assigned once and keeps its first definition", id, e.def.line)}
	}
	if x.nComponents >= x.maxComp {
		return &docIssue{"document_too_large", fmt.Sprintf("a screen may define at most %d components", x.maxComp)}
	}
	if s.kind == stmtMutation {
		if e != nil && e.parent != nil {
			return &docIssue{"child_not_component", fmt.Sprintf("%q is listed as a child of %q, so it must be a component, not an McpMutation", id, e.parent.id)}
		}
		if prev := x.mutByTarget[s.mut.Target]; prev != nil {
			return &docIssue{"duplicate_mutation", fmt.Sprintf("%q is already governed by %q (line %d); a button has one McpMutation", s.mut.Target, prev.mut.ID, prev.line)}
		}
		return nil
	}
	n := s.node
	// Each child is hashed once, for the checks here and for add.
	hashes := x.kidHashes[:0]
	for _, c := range n.Children {
		hashes = append(hashes, x.ids.hash(c))
	}
	// The scratch buffers are stored back only when they grew: a pointer
	// written to the heap costs a write barrier while the collector runs.
	if cap(hashes) != cap(x.kidHashes) {
		x.kidHashes = hashes[:0]
	}
	c, dup, slots := firstDuplicate(n.Children, hashes, x.dupSlots)
	if cap(slots) != cap(x.dupSlots) {
		x.dupSlots = slots
	}
	if dup {
		return &docIssue{"duplicate_child", fmt.Sprintf("%q is listed twice", c)}
	}
	kids := x.checkedKids[:0]
	for i, c := range n.Children {
		if c == rootID {
			return &docIssue{"root_as_child", "root is the top of the screen and can't be a child"}
		}
		ce := x.ids.lookup(c, hashes[i])
		kids = append(kids, ce)
		if ce == nil {
			if c == id {
				return &docIssue{"cycle", fmt.Sprintf("%q would contain itself", c)}
			}
			continue
		}
		if ce.def != nil && ce.def.kind == stmtMutation {
			return &docIssue{"child_not_component", fmt.Sprintf("%q is an McpMutation, not a component; list only components as children", c)}
		}
		if ce == e || isAncestor(ce, e) {
			return &docIssue{"cycle", fmt.Sprintf("%q would contain itself through its children", c)}
		}
		if ce.parent != nil {
			return &docIssue{"multiple_parents", fmt.Sprintf("%q is already a child of %q; a component has one parent", c, ce.parent.id)}
		}
		if ce.def != nil {
			if di := pairing(s, ce.def); di != nil {
				return di
			}
		}
	}
	if e != nil && e.parent != nil && e.parent.def != nil {
		if di := pairing(e.parent.def, s); di != nil {
			return di
		}
	}
	if s.edits != "" {
		if st := x.state[s.edits]; st != nil && !s.holds.ok(st.value) {
			return &docIssue{"input_state_type", fmt.Sprintf("%s edits %s, which must hold %s (it is declared on line %d)", n.Type, s.edits, s.holds, st.line)}
		}
	}
	x.checked, x.checkedSelf, x.checkedHash, x.checkedKids = s, e, h, kids
	return nil
}

// isAncestor reports whether a contains b through children lists. Only a
// defined component can contain anything, so the walk up from b happens
// only when a child that already arrived is listed again elsewhere.
func isAncestor(a, b *entry) bool {
	if a == nil || b == nil || a.def == nil || b.parent == nil {
		return false
	}
	for p := b.parent; p != nil; p = p.parent {
		if p == a {
			return true
		}
	}
	return false
}

// pairing checks the container rules of [5.18], [5.21], [5.22], [5.23] for
// parent ps and child cs, component statements.
func pairing(ps, cs *stmt) *docIssue {
	if ps == nil || cs == nil || ps.node == nil || cs.node == nil {
		return nil
	}
	p, c := ps.node, cs.node
	pt, ct := p.Type, c.Type
	if p.App {
		pt = ""
	}
	if c.App {
		ct = ""
	}
	mismatch := func(code, format string, args ...any) *docIssue {
		return &docIssue{code, fmt.Sprintf(format, args...)}
	}
	switch pt {
	case "List":
		if ct != "ListItem" {
			return mismatch("list_mismatch", "a List holds only ListItems, and %q is a %s", c.ID, c.Type)
		}
	case "Table":
		if ct != "TableRow" {
			return mismatch("table_mismatch", "a Table holds only TableRows, and %q is a %s", c.ID, c.Type)
		}
		cols, _ := prop1(ps.props, "columns").([]Value)
		cells, _ := prop1(cs.props, "cells").([]Value)
		if len(cols) != len(cells) {
			return mismatch("table_mismatch", "row %q has %d cells but table %q has %d columns", c.ID, len(cells), p.ID, len(cols))
		}
	case "Tabs":
		if ct != "Tab" {
			return mismatch("tabs_mismatch", "a Tabs holds only Tab components, and %q is a %s", c.ID, c.Type)
		}
	case "BarChart", "LineChart":
		if ct != "Series" {
			return mismatch("chart_mismatch", "a %s holds only Series, and %q is a %s", pt, c.ID, c.Type)
		}
		labels, _ := prop1(ps.props, "labels").([]Value)
		values, _ := prop1(cs.props, "values").([]Value)
		if len(labels) != len(values) {
			return mismatch("chart_mismatch", "series %q has %d values but chart %q has %d labels", c.ID, len(values), p.ID, len(labels))
		}
	case "PieChart":
		if ct != "Slice" {
			return mismatch("chart_mismatch", "a PieChart holds only Slices, and %q is a %s", c.ID, c.Type)
		}
	}
	switch ct {
	case "ListItem":
		if pt != "List" {
			return mismatch("list_mismatch", "ListItem %q must be a child of a List, not of a %s", c.ID, p.Type)
		}
	case "TableRow":
		if pt != "Table" {
			return mismatch("table_mismatch", "TableRow %q must be a child of a Table, not of a %s", c.ID, p.Type)
		}
	case "Tab":
		if pt != "Tabs" {
			return mismatch("tabs_mismatch", "Tab %q must be a child of a Tabs, not of a %s", c.ID, p.Type)
		}
	case "Series":
		if pt != "BarChart" && pt != "LineChart" {
			return mismatch("chart_mismatch", "Series %q must be a child of a BarChart or LineChart, not of a %s", c.ID, p.Type)
		}
	case "Slice":
		if pt != "PieChart" {
			return mismatch("chart_mismatch", "Slice %q must be a child of a PieChart, not of a %s", c.ID, p.Type)
		}
	}
	return nil
}

// add records a statement. In a document built by a stream every statement
// added has passed check; when a whole document is re-checked (updates), a
// statement may break a rule, and add then records only the child links
// that keep the tree a forest.
func (x *index) add(s *stmt) {
	if len(x.order) == cap(x.order) {
		// Doubling, where append grows a long slice by a quarter, copies
		// the order of a large screen a few times rather than a dozen.
		order := make([]*stmt, len(x.order), max(16, 2*cap(x.order)))
		copy(order, x.order)
		x.order = order
	}
	x.order = append(x.order, s)
	x.link(s)
}

// link records what the rules need to know about s.
func (x *index) link(s *stmt) {
	for _, k := range s.stateRefs {
		x.users[k]++
	}
	switch s.kind {
	case stmtState:
		x.state[s.key] = s
		x.nState++
		return
	case stmtMutation:
		x.define(x.entry(s.mut.ID), s)
		x.nComponents++
		if x.mutByTarget[s.mut.Target] == nil {
			x.mutByTarget[s.mut.Target] = s
		}
		return
	}
	// After a passed check, the ids it found absent are still absent and
	// distinct (a child that is the component itself, root, or listed
	// twice fails the check), so they are made without looking again.
	var e *entry
	var kids []*entry
	var hashes []uint64
	if x.checked == s {
		e, kids = x.checkedSelf, x.checkedKids
		hashes = x.kidHashes[:len(kids)]
		if e == nil {
			e = x.newEntry(s.node.ID, x.checkedHash)
		}
		x.checked, x.checkedSelf = nil, nil
		defer clear(kids)
	} else {
		e = x.entry(s.node.ID)
	}
	x.define(e, s)
	x.nComponents++
	for i, c := range s.node.Children {
		// The first listing of a child wins; a second listing in the same
		// list finds the parent already set.
		if c == rootID {
			continue
		}
		var ce *entry
		switch {
		case kids == nil:
			ce = x.entry(c)
		case kids[i] != nil:
			ce = kids[i]
		default:
			ce = x.newEntry(c, hashes[i])
		}
		if ce.parent != nil || ce == e || isAncestor(ce, e) {
			continue
		}
		ce.parent = e
	}
	if s.edits != "" {
		x.editors[s.edits] = append(x.editors[s.edits], s)
	}
}

// endIssues runs the end-of-stream checks (SPEC 5.1, 5.11, 5.13, 5.15,
// 7.2, 7.3) and returns them with the sorted missing references.
func (x *index) endIssues() ([]Issue, []string) {
	var out []Issue
	var missing []string
	add := func(line int, code, id, format string, args ...any) {
		out = append(out, Issue{Line: line, Code: code, Message: fmt.Sprintf(format, args...), Severity: SeverityError, ID: id})
	}
	root := x.get(rootID)
	if root == nil {
		add(0, "missing_root", rootID, "no root line arrived; the top component must have the id root")
	} else if root.kind == stmtMutation {
		add(root.line, "root_not_component", rootID, "root is an McpMutation; root must be a component")
	}
	for _, s := range x.order {
		switch s.kind {
		case stmtComponent:
			// Every listed child but root has an entry; when all entries
			// are defined, none of those is missing and the lookups are
			// skipped.
			for _, c := range s.node.Children {
				if (x.undefined > 0 || c == rootID) && x.get(c) == nil {
					missing = append(missing, c)
					add(s.line, "dangling_ref", s.node.ID, "child %q of %q never arrived", c, s.node.ID)
				}
			}
			if s.hasAction() && x.mutByTarget[s.node.ID] == nil {
				add(s.line, "ungoverned_mutation", s.node.ID, "%q has an action but no McpMutation governs it; add one naming a registered tool, or remove the action", s.node.ID)
			}
		case stmtMutation:
			t := x.get(s.mut.Target)
			switch {
			case t == nil:
				add(s.line, "dangling_ref", s.mut.ID, "target %q of %q never arrived", s.mut.Target, s.mut.ID)
			case !t.hasAction():
				add(s.line, "mutation_target_not_interactive", s.mut.ID, "%q targets %q, which is not a Button with an action", s.mut.ID, s.mut.Target)
			}
		}
		for _, k := range s.stateRefs {
			if x.state[k] == nil {
				missing = append(missing, k)
				add(s.line, "missing_state", s.id(), "%s is used by %q but never declared", k, s.id())
			}
		}
	}
	return out, sortedUnique(missing)
}

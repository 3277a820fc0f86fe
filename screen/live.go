package screen

import (
	"fmt"
	"strings"
)

// maxUpdateLines bounds one live update ([10.30]), blank and comment lines
// included.
const maxUpdateLines = 2000

// UpdateResult is the outcome of a live update. When Applied is false the
// screen is unchanged and Issues says why, each issue on the line of the
// update that assigned the id it concerns (0 when no line of the update
// did). A rejected update is a bug in the app's code: report it to the app,
// never to the person using the screen.
type UpdateResult struct {
	Applied bool
	Issues  []Issue
}

// Update applies a live update to the ended screen (SPEC 10.29–10.34).
//
// An update is Omni-IR text written by the app's code. A line for an id the
// screen has replaces that component or McpMutation in place; a line for a
// $key it has sets the value; any other line adds. Afterwards the screen
// keeps only the components reachable from root, and the McpMutations whose
// targets it keeps as Buttons with an action. The update applies whole or not
// at all: any line failing its own checks, assigning a $key a field edits
// (live_field_conflict), or leaving the screen with an error it did not have
// before (compared by code and id) rejects it.
func (p *Parser) Update(text string) (UpdateResult, error) {
	if !p.ended || p.doc == nil {
		return UpdateResult{}, ErrNotEnded
	}
	return p.doc.update(p.reg, text), nil
}

func (d *Document) update(reg *registry, text string) UpdateResult {
	var res UpdateResult
	fail := func(line int, code, id, msg string) {
		res.Issues = append(res.Issues, Issue{Line: line, Code: code, Message: msg, Severity: issueTable[code].severity, ID: id})
	}
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	if n > maxUpdateLines {
		fail(0, "update_too_large", "", fmt.Sprintf("the update has %d lines; an update holds at most %d, so send the changes in smaller updates", n, maxUpdateLines))
		return res
	}

	old := d.idx
	var g grammar
	var stmts []*stmt
	assigned := map[string]int{} // id or $key -> update line
	var lr lineReader
	lr.init(maxLineLength, func(line int, s string) {
		if isBlank(s) {
			return
		}
		raw, err := g.parseLine(s)
		if err == nil {
			for _, w := range g.warnings {
				fail(line, "unknown_escape", raw.target, w)
			}
		}
		var st *stmt
		if err == nil {
			st, err = reg.statement(&raw, line)
		}
		if err != nil {
			fail(line, err.code, raw.target, err.msg)
			return
		}
		id := st.id()
		if prev, dup := assigned[id]; dup {
			fail(line, "duplicate_id", id, fmt.Sprintf("%s is already assigned on line %d of this update; assign each id and $key once", id, prev))
			return
		}
		assigned[id] = line
		if st.kind == stmtState && old.state[id] != nil && fieldEdits(old, stmts, id) {
			fail(line, "live_field_conflict", id, fmt.Sprintf("%s is edited by a field, so its value belongs to the person; an update can't set it", id))
			return
		}
		stmts = append(stmts, st)
	}, func(line int) {
		fail(line, "line_too_long", "", fmt.Sprintf("the line is longer than %d characters", maxLineLength))
	})
	lr.write([]byte(text))
	lr.end()
	// A field the update adds or replaces may edit a $key set earlier in it.
	for _, st := range stmts {
		if st.kind == stmtState && old.state[st.key] != nil && fieldEdits(old, stmts, st.key) && !hasIssue(res.Issues, st.key) {
			fail(st.line, "live_field_conflict", st.key, fmt.Sprintf("%s is edited by a field, so its value belongs to the person; an update can't set it", st.key))
		}
	}
	for _, i := range res.Issues {
		if i.Severity == SeverityError {
			return res
		}
	}

	// The screen the update would leave: replaced lines keep their place,
	// new lines follow in the update's order ([10.32]).
	order := make([]*stmt, len(old.order), len(old.order)+len(stmts))
	copy(order, old.order)
	pos := make(map[string]int, len(order))
	for i, s := range order {
		pos[s.id()] = i
	}
	for _, st := range stmts {
		if i, ok := pos[st.id()]; ok {
			order[i] = st
		} else {
			order = append(order, st)
		}
	}
	order = reachable(order)

	if d.errKeys == nil {
		d.errKeys = errorKeys(recheck(old.order, old.maxComp, old.maxState).issues)
	}
	after := recheck(order, old.maxComp, old.maxState)
	for _, i := range after.issues {
		if d.errKeys[i.Code+"\x00"+i.ID] {
			continue
		}
		i.Line = assigned[i.ID]
		res.Issues = append(res.Issues, i)
	}
	for _, i := range res.Issues {
		if i.Severity == SeverityError {
			return res
		}
	}
	d.idx = after.idx
	d.nodesAdded()
	d.missing = after.missing
	d.errKeys = errorKeys(after.issues)
	res.Applied = true
	return res
}

// errorKeys identifies errors by code and the id they concern ([10.33]).
func errorKeys(issues []Issue) map[string]bool {
	m := make(map[string]bool, len(issues))
	for _, i := range issues {
		m[i.Code+"\x00"+i.ID] = true
	}
	return m
}

func hasIssue(issues []Issue, id string) bool {
	for _, i := range issues {
		if i.ID == id {
			return true
		}
	}
	return false
}

// fieldEdits reports whether a field edits key in the screen before the
// update or among the update's statements.
func fieldEdits(old *index, stmts []*stmt, key string) bool {
	if len(old.editors[key]) > 0 {
		return true
	}
	for _, s := range stmts {
		if s.edits == key {
			return true
		}
	}
	return false
}

// reachable keeps the components reachable from root through children
// lists, the McpMutations whose targets are kept Buttons with an action, and
// every $key ([10.31]).
func reachable(order []*stmt) []*stmt {
	byID := make(map[string]*stmt, len(order))
	for _, s := range order {
		if s.kind != stmtState {
			byID[s.id()] = s
		}
	}
	keep := map[string]bool{}
	if r := byID[rootID]; r != nil && r.kind == stmtComponent {
		stack := []string{rootID}
		keep[rootID] = true
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			s := byID[id]
			if s == nil || s.kind != stmtComponent {
				continue
			}
			for _, c := range s.node.Children {
				if cs := byID[c]; cs != nil && cs.kind == stmtComponent && !keep[c] {
					keep[c] = true
					stack = append(stack, c)
				}
			}
		}
	}
	out := order[:0:0]
	for _, s := range order {
		switch s.kind {
		case stmtState:
			out = append(out, s)
		case stmtComponent:
			if keep[s.node.ID] {
				out = append(out, s)
			}
		case stmtMutation:
			if keep[s.mut.Target] && byID[s.mut.Target].hasAction() {
				out = append(out, s)
			}
		}
	}
	return out
}

type rechecked struct {
	idx     *index
	issues  []Issue
	missing []string
}

// recheck checks a whole document with every rule of section 5, statements
// in order, as at the end of a stream. Unlike a stream, it keeps statements
// that break a rule, so that each error is reported once, by code and id.
func recheck(order []*stmt, maxComp, maxState int) rechecked {
	x := newIndex(maxComp, maxState)
	var issues []Issue
	for _, s := range order {
		if di := x.check(s); di != nil {
			issues = append(issues, Issue{Line: s.line, Code: di.code, Message: di.msg, Severity: SeverityError, ID: s.id()})
		}
		x.add(s)
	}
	end, missing := x.endIssues()
	if missing == nil {
		missing = []string{}
	}
	return rechecked{idx: x, issues: append(issues, end...), missing: missing}
}

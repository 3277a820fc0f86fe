// Package screen reads Omni-IR, the line-by-line text format in which a model
// or an application declares a screen (stream format 0.8).
//
// # The model
//
// A stream is UTF-8 text. Each line holds at most one statement: either a
// component, `id = Component(args…)`, or a piece of state, `$key = value`.
// Components refer to their children by id, so a screen is written flat, one
// component per line, and may refer to lines that have not arrived yet.
//
// A [Parser] reads a stream incrementally. Bytes may be written in any
// chunking — a character split across writes, CRLF endings, one byte at a
// time — and give exactly the same result. Each complete line is checked on
// its own (grammar, catalog, props, tools, pictures) and against the lines
// accepted so far (the document rules: one parent, no cycles, state types,
// List/Table/Tabs/chart pairings, size limits). A line that fails any check
// is rejected as a whole and has no effect; an issue never stops the stream.
// [Parser.End] processes the last line and runs the end-of-stream checks
// (missing root, dangling references, undeclared state, ungoverned buttons).
//
// The result is a [Document]:
//
//   - nodes: the accepted components by id ([Node]), with their props and
//     children in display order;
//   - state: the declared `$key` values;
//   - mutations: the accepted McpMutations ([Mutation]), keyed by the Button
//     they govern — the only way a press reaches a backend tool;
//   - missing: references still pending when the stream ended;
//   - issues: every error and warning ([Issue]) with its line and stable code.
//
// Every check touches only what its line changes, so parsing is linear in
// the stream's length; the whole-document check runs once, at the end.
//
// An application's code (never the model) may change an ended screen with a
// live update ([Parser.Update]): more Omni-IR lines that replace, set or add,
// applied whole or not at all.
//
// [Describe] writes a plain-text outline of a document for models and logs,
// and [Document.FieldsReadBy] says which fields a governed button's press
// must check first.
//
// What a stream may use is the application's choice, given in [Options]:
// the names of its tools and pictures, and its own components and picture
// families ([DeclareComponent], [DeclarePictureFamily]). The built-in
// catalog is generated from the conformance suite's schema.json.
package screen

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Value is a prop or state value: nil, bool, float64, string, [StateRef],
// []Value (lists) or map[string]Value (McpMutation params).
type Value = any

// StateRef is a `$key` used as a value; it includes the `$`. In JSON it is
// written {"state": "$key"}.
type StateRef string

// MarshalJSON writes the reference as {"state": "$key"}.
func (s StateRef) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"state": string(s)})
}

// Severity says whether an issue rejects its line.
type Severity string

const (
	// SeverityError rejects the line it is found on ([7.1]).
	SeverityError Severity = "error"
	// SeverityWarning reports something the parser accepted anyway.
	SeverityWarning Severity = "warning"
)

// Issue is an error or a warning found in a stream or an update.
type Issue struct {
	// Line is the 1-based line the issue concerns, or 0 when it concerns
	// no line (missing_root, update_too_large).
	Line int
	// Code is one of the 34 codes of SPEC section 7.
	Code string
	// Message says what is wrong and how to fix it. Its wording is not
	// part of the format.
	Message string
	// Severity is error or warning.
	Severity Severity
	// ID is the id or $key the issue concerns, when there is one.
	ID string
}

// MarshalJSON writes {"line": N|null, "code": …, "message": …}.
func (i Issue) MarshalJSON() ([]byte, error) {
	var line any
	if i.Line > 0 {
		line = i.Line
	}
	return json.Marshal(struct {
		Line    any    `json:"line"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}{line, i.Code, i.Message})
}

// Node is an accepted component.
type Node struct {
	ID   string
	Type string // the component's name, e.g. "Text"
	App  bool   // an app-declared component ([5.27])
	// Props holds the props as written, without children. A `$key` is a
	// StateRef; the prop's current value is in the document's state.
	Props    map[string]Value
	Children []string // child ids in display order
	// Line is the line that defined the node: a line of the stream, or of
	// the live update that last replaced it.
	Line int
}

// MarshalJSON writes the conformance shape {"type", "app"?, "props", "children"}.
func (n *Node) MarshalJSON() ([]byte, error) {
	props := n.Props
	if props == nil {
		props = map[string]Value{}
	}
	children := n.Children
	if children == nil {
		children = []string{}
	}
	return json.Marshal(struct {
		Type     string           `json:"type"`
		App      bool             `json:"app,omitempty"`
		Props    map[string]Value `json:"props"`
		Children []string         `json:"children"`
	}{n.Type, n.App, props, children})
}

// Mutation is an accepted McpMutation: it lets one Button call one tool.
type Mutation struct {
	ID     string
	Target string // the governed Button's id
	Tool   string
	Params map[string]Value // literals and StateRefs
	Line   int
}

// MarshalJSON writes the conformance shape {"id", "tool", "params"}.
func (m *Mutation) MarshalJSON() ([]byte, error) {
	params := m.Params
	if params == nil {
		params = map[string]Value{}
	}
	return json.Marshal(struct {
		ID     string           `json:"id"`
		Tool   string           `json:"tool"`
		Params map[string]Value `json:"params"`
	}{m.ID, m.Tool, params})
}

// ErrEnded is returned by Write after End.
var ErrEnded = errors.New("screen: the stream has ended; start a new Parser for a new stream")

// ErrNotEnded is returned by Update before End.
var ErrNotEnded = errors.New("screen: an update applies only to a screen whose stream has ended; call End first")

// Document is a screen as read so far. Its methods are valid between calls
// that change it (Write, End, Update, SetState); a Document is not safe for
// concurrent use with them. Values it returns must not be modified.
type Document struct {
	idx     *index
	issues  []Issue
	ended   bool
	newer   bool
	missing []string
	errKeys map[string]bool // the screen's errors by code and id, for updates

	// The parser keeps a component's props in its statement and builds
	// the node's Props map only when the document first hands nodes out:
	// a map for each component cost more than reading the rest of its
	// line. propsBuilt says every node has its map; readers may call at
	// once, so the maps are built under propsMu, which also guards
	// builtIdx and built: the statements of builtIdx.order before built
	// have their maps (a stream only appends to the order).
	propsMu    sync.Mutex
	propsBuilt atomic.Bool
	builtIdx   *index
	built      int
}

// nodesReady gives every node that has none its Props map.
func (d *Document) nodesReady() {
	if d.propsBuilt.Load() {
		return
	}
	d.propsMu.Lock()
	defer d.propsMu.Unlock()
	if d.propsBuilt.Load() {
		return
	}
	if d.builtIdx != d.idx {
		d.builtIdx, d.built = d.idx, 0
	}
	for _, s := range d.idx.order[d.built:] {
		if s.node != nil && s.node.Props == nil {
			s.node.Props = propMap(s.props)
		}
	}
	d.built = len(d.idx.order)
	d.propsBuilt.Store(true)
}

// nodesAdded records that nodes without a Props map may have been added.
func (d *Document) nodesAdded() {
	if d.propsBuilt.Load() {
		d.propsBuilt.Store(false)
	}
}

// Node returns the component with the given id, or nil.
func (d *Document) Node(id string) *Node {
	if s := d.idx.get(id); s != nil && s.node != nil {
		d.nodesReady()
		return s.node
	}
	return nil
}

// Nodes returns the accepted components in the order their lines arrived.
func (d *Document) Nodes() []*Node {
	d.nodesReady()
	out := make([]*Node, 0, d.idx.nComponents)
	for _, s := range d.idx.order {
		if s.node != nil {
			out = append(out, s.node)
		}
	}
	return out
}

// Mutation returns the McpMutation governing the Button target, or nil.
func (d *Document) Mutation(target string) *Mutation {
	if s := d.idx.mutByTarget[target]; s != nil {
		return s.mut
	}
	return nil
}

// Mutations returns the accepted McpMutations in the order they arrived.
func (d *Document) Mutations() []*Mutation {
	var out []*Mutation
	for _, s := range d.idx.order {
		if s.mut != nil {
			out = append(out, s.mut)
		}
	}
	return out
}

// State returns the value of a declared $key (with its `$`).
func (d *Document) State(key string) (Value, bool) {
	s := d.idx.state[key]
	if s == nil {
		return nil, false
	}
	return s.value, true
}

// StateKeys returns the declared $keys in the order they were declared.
func (d *Document) StateKeys() []string {
	var out []string
	for _, s := range d.idx.order {
		if s.kind == stmtState {
			out = append(out, s.key)
		}
	}
	return out
}

// SetState changes the value of a declared $key, as a person editing a field
// does. The value is a string, a float64 (or an int, stored as a float64), a
// bool or nil. It is not checked against the fields that edit the key; field
// checks are the renderer's ([8.1]).
func (d *Document) SetState(key string, v Value) error {
	s := d.idx.state[key]
	if s == nil {
		return errors.New("screen: no state " + key + " is declared; only declared $keys can be set")
	}
	switch x := v.(type) {
	case string, float64, bool, nil:
	case int:
		v = float64(x)
	case int64:
		v = float64(x)
	default:
		return fmt.Errorf("screen: state %s can't hold a %T; use a string, a number, a bool or nil", key, v)
	}
	s.value = v
	d.errKeys = nil
	return nil
}

// Missing returns the references still pending when the stream ended
// (component ids and $keys, sorted), or nil before End.
func (d *Document) Missing() []string { return d.missing }

// Pending reports whether id (a component id or $key) is referenced but
// not yet defined.
func (d *Document) Pending(id string) bool {
	if len(id) > 0 && id[0] == '$' {
		return d.idx.state[id] == nil && d.idx.stateUsed(id)
	}
	return d.idx.get(id) == nil && d.idx.parentOf(id) != ""
}

// Issues returns every issue found in the stream so far, in the order
// found. A live update's issues are in its UpdateResult instead, and an
// applied update doesn't change this list.
func (d *Document) Issues() []Issue { return d.issues }

// HasErrors reports whether any issue is an error.
func (d *Document) HasErrors() bool {
	for _, i := range d.issues {
		if i.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Ended reports whether the stream has ended.
func (d *Document) Ended() bool { return d.ended }

// NewerVersion reports whether line 1 declared a newer stream format than
// this package reads ([3.9]); a renderer should then tell the person the app
// needs an update to show all of the screen.
func (d *Document) NewerVersion() bool { return d.newer }

// Root returns the root component, or nil.
func (d *Document) Root() *Node { return d.Node(rootID) }

// MarshalJSON writes the conformance shape
// {"nodes", "state", "mutations", "missing"}.
func (d *Document) MarshalJSON() ([]byte, error) {
	d.nodesReady()
	nodes := map[string]*Node{}
	state := map[string]Value{}
	muts := map[string]*Mutation{}
	for _, s := range d.idx.order {
		switch {
		case s.node != nil:
			nodes[s.node.ID] = s.node
		case s.mut != nil:
		default:
			state[s.key] = s.value
		}
	}
	for t, s := range d.idx.mutByTarget {
		muts[t] = s.mut
	}
	missing := d.missing
	if missing == nil {
		missing = []string{}
	}
	return json.Marshal(struct {
		Nodes     map[string]*Node     `json:"nodes"`
		State     map[string]Value     `json:"state"`
		Mutations map[string]*Mutation `json:"mutations"`
		Missing   []string             `json:"missing"`
	}{nodes, state, muts, missing})
}

func sortedUnique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

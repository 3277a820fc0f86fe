package screen

import (
	"fmt"
	"sort"
	"strings"
)

// The statement stage (SPEC 5.8–5.17, 5.24–5.30): a line that passed the
// grammar is checked on its own against the catalog, the app's components,
// tools and pictures, and turned into a statement of the document.

type stmtKind uint8

const (
	stmtComponent stmtKind = iota + 1
	stmtMutation
	stmtState
)

// holdKind is what the state a field edits must hold ([5.12], [5.19],
// [5.20], [5.28]).
type holdKind uint8

const (
	holdNone holdKind = iota
	holdText
	holdDate
	holdBool
	holdAppText
	holdAppNumber
	holdAppBool
)

func (h holdKind) ok(v Value) bool {
	switch h {
	case holdText:
		_, ok := v.(string)
		return ok
	case holdDate:
		s, ok := v.(string)
		return ok && (s == "" || isDate(s))
	case holdBool:
		_, ok := v.(bool)
		return ok
	case holdAppText:
		_, ok := v.(string)
		return ok || v == nil
	case holdAppNumber:
		_, ok := v.(float64)
		return ok || v == nil
	case holdAppBool:
		_, ok := v.(bool)
		return ok || v == nil
	}
	return true
}

func (h holdKind) String() string {
	switch h {
	case holdText:
		return "text"
	case holdDate:
		return `a "YYYY-MM-DD" date or ""`
	case holdBool:
		return "true or false"
	case holdAppText:
		return "text or null"
	case holdAppNumber:
		return "a number or null"
	case holdAppBool:
		return "true, false or null"
	}
	return "anything"
}

// builtinHold gives what the state a catalog field edits must hold.
func builtinHold(component string) holdKind {
	switch component {
	case "Input", "Select":
		return holdText
	case "DateInput":
		return holdDate
	case "Switch":
		return holdBool
	}
	return holdNone
}

// stmt is an accepted (or, for an update, candidate) statement.
type stmt struct {
	kind      stmtKind
	holds     holdKind // beside kind, so that the two share a word
	line      int
	node      *Node     // component
	props     []prop    // component: its props, as node.Props will hold them
	mut       *Mutation // McpMutation
	key       string    // state key, with $
	value     Value     // state value
	app       *Component
	stateRefs []string // $keys the statement reads, in order, unique
	edits     string   // $key a field edits
}

// prop is one prop of a component, as written.
type prop struct {
	name string
	val  Value
}

// propOf returns the value of the prop named name, if props holds it.
func propOf(props []prop, name string) (Value, bool) {
	for i := range props {
		if props[i].name == name {
			return props[i].val, true
		}
	}
	return nil, false
}

// propMap returns props as a map, the form [Node.Props] has.
func propMap(props []prop) map[string]Value {
	m := make(map[string]Value, len(props))
	for _, p := range props {
		m[p.name] = p.val
	}
	return m
}

// stmtNode allocates a component's statement and node together.
type stmtNode struct {
	s stmt
	n Node
}

func (s *stmt) id() string {
	switch s.kind {
	case stmtComponent:
		return s.node.ID
	case stmtMutation:
		return s.mut.ID
	}
	return s.key
}

// hasAction reports whether s is a Button with an action: the only thing an
// McpMutation may govern.
func (s *stmt) hasAction() bool {
	if s == nil || s.node == nil || s.node.App || s.node.Type != "Button" {
		return false
	}
	_, ok := propOf(s.props, "action")
	return ok
}

// registry is what the app allows, compiled from Options.
type registry struct {
	tools      map[string]bool
	assets     map[string]bool
	components map[string]*Component
	pictures   []*PictureFamily
	maxComp    int
	maxState   int
	nodes      []stmtNode // the chunk new component statements are carved from
	props      []prop     // the chunk the props of statements are carved from

	// The component the last line called (see component).
	lastCall   string
	lastSchema *compSchema
	lastApp    *Component
}

// maxNodeChunk is the most component statements one allocation holds;
// chunks start small and double, so that a short screen stays small.
const maxNodeChunk = 64

// newNode returns a zero component statement.
func (r *registry) newNode() *stmtNode {
	if len(r.nodes) == cap(r.nodes) {
		r.nodes = make([]stmtNode, 0, min(max(4, 2*cap(r.nodes)), maxNodeChunk))
	}
	r.nodes = r.nodes[:len(r.nodes)+1]
	return &r.nodes[len(r.nodes)-1]
}

// Sizes of the chunks props are carved from: they start at firstPropChunk
// props and double up to propChunk.
const (
	firstPropChunk = 16
	propChunk      = 1024
)

// takeProps returns room for n props, carved from the current chunk; its
// capacity is n, so that appending to it never reaches into another
// statement's props.
func (r *registry) takeProps(n int) []prop {
	if n > propChunk/4 {
		return make([]prop, 0, n)
	}
	if cap(r.props)-len(r.props) < n {
		r.props = make([]prop, 0, max(min(max(firstPropChunk, 2*cap(r.props)), propChunk), n))
	}
	start := len(r.props)
	r.props = r.props[:start+n]
	return r.props[start : start : start+n]
}

func newRegistry(o Options) *registry {
	r := &registry{
		tools:      make(map[string]bool, len(o.Tools)),
		assets:     make(map[string]bool, len(o.Assets)),
		components: make(map[string]*Component, len(o.Components)),
		pictures:   o.Pictures,
		maxComp:    maxComponents,
		maxState:   maxStateKeys,
	}
	for _, t := range o.Tools {
		r.tools[t] = true
	}
	for _, a := range o.Assets {
		r.assets[a] = true
	}
	for _, c := range o.Components {
		if c != nil {
			r.components[c.name] = c
		}
	}
	if o.MaxComponents > 0 {
		r.maxComp = o.MaxComponents
	}
	if o.MaxStateKeys > 0 {
		r.maxState = o.MaxStateKeys
	}
	return r
}

// similarComponent returns a component whose name differs from name only in
// case, or "".
func (r *registry) similarComponent(name string) string {
	for n := range builtinComponents {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	for n := range r.components {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

func (r *registry) pictureKnown(name string) bool {
	if r.assets[name] {
		return true
	}
	for _, f := range r.pictures {
		if f != nil && f.Match(name) {
			return true
		}
	}
	return false
}

func invalid(format string, args ...any) *lineError {
	return &lineError{code: "invalid_props", msg: fmt.Sprintf(format, args...)}
}

// statement checks a parsed line on its own and builds its statement.
func (r *registry) statement(raw *rawStmt, line int) (*stmt, *lineError) {
	if raw.isState {
		return r.stateStmt(raw, line)
	}
	id := raw.target
	if len(id) > maxIDLength {
		return nil, invalid("the id %q is longer than %d characters", clip(id), maxIDLength)
	}
	if reservedWords[id] {
		return nil, invalid("%q is a reserved word and can't be an id; choose another id", id)
	}
	for _, a := range raw.args {
		if hasCall(a.val) {
			return nil, &lineError{code: "not_flat", msg: fmt.Sprintf("column %d: a component call can't appear inside another; define it on its own line and refer to it by id", a.col)}
		}
	}
	if raw.call == "McpMutation" {
		return r.mutationStmt(raw, id, line)
	}
	cs, app, err := r.component(raw.call)
	if err != nil {
		return nil, err
	}
	props, kids, refs, err := r.collectProps(raw, cs)
	if err != nil {
		return nil, err
	}
	// Cross-prop rules.
	if app == nil {
		switch raw.call {
		case "Rating":
			if v, ok := prop1(props, "value").(float64); ok {
				max := 5.0
				if m, ok := prop1(props, "max").(float64); ok {
					max = m
				}
				if v > max {
					return nil, invalid("Rating's value %v is more than its max %v", v, max)
				}
			}
		case "Input":
			lo, ok1 := prop1(props, "minLength").(float64)
			hi, ok2 := prop1(props, "maxLength").(float64)
			if ok1 && ok2 && lo > hi {
				return nil, invalid("Input's minLength %v is more than its maxLength %v", lo, hi)
			}
		}
	}
	// Pictures ([5.17], [5.30]).
	var picProps []string
	switch {
	case app != nil:
		picProps = app.pictures
	case raw.call == "Image":
		picProps = []string{"asset"}
	case raw.call == "ListItem":
		picProps = []string{"image"}
	}
	for _, p := range picProps {
		if name, ok := prop1(props, p).(string); ok && !r.pictureKnown(name) {
			return nil, &lineError{code: "unknown_asset", msg: fmt.Sprintf("%s: no picture named %q is in the app's asset registry", p, name)}
		}
	}
	// The chunk's memory is zero: setting the fields one by one spares
	// copying a whole struct into it.
	sn := r.newNode()
	n := &sn.n
	// Props stays nil until the document hands the node out (see
	// Document.nodesReady): a map per component cost more than the rest of
	// reading its line.
	n.ID, n.Type, n.App, n.Line = id, raw.call, app != nil, line
	switch kids := kids.(type) {
	case refList:
		n.Children = kids
	case []Value: // an empty list
		n.Children = make([]string, len(kids))
		for i, k := range kids {
			n.Children[i] = string(k.(ref))
		}
	}
	s := &sn.s
	s.kind, s.line, s.node, s.props = stmtComponent, line, n, props
	if app != nil {
		s.app = app
	}
	if refs != nil {
		s.stateRefs = refs
	}
	if app != nil {
		s.holds = app.holds
	} else {
		s.holds = builtinHold(raw.call)
	}
	if s.holds != holdNone {
		if k, ok := prop1(props, "value").(StateRef); ok {
			s.edits = string(k)
		} else {
			s.holds = holdNone
		}
	}
	return s, nil
}

// component returns the schema of the component named call, and the app
// component when it is one of the app's. Lines in a row often call the
// same component, so the last one found is kept.
func (r *registry) component(call string) (*compSchema, *Component, *lineError) {
	if r.lastSchema != nil && call == r.lastCall {
		return r.lastSchema, r.lastApp, nil
	}
	cs := builtinComponents[call]
	var app *Component
	if cs == nil {
		app = r.components[call]
		if app == nil {
			msg := fmt.Sprintf("%q is not a component of this app's catalog", clip(call))
			if alt := r.similarComponent(call); alt != "" {
				msg += fmt.Sprintf("; did you mean %s?", alt)
			}
			return nil, nil, &lineError{code: "unknown_component", msg: msg}
		}
		cs = app.schema
	}
	r.lastCall, r.lastSchema, r.lastApp = call, cs, app
	return cs, app, nil
}

func (r *registry) stateStmt(raw *rawStmt, line int) (*stmt, *lineError) {
	if len(raw.target) > maxStateKeyLength {
		return nil, invalid("the state key %q is longer than %d characters", clip(raw.target), maxStateKeyLength)
	}
	v := raw.value
	if hasCall(v) {
		return nil, &lineError{code: "not_flat", msg: "state holds a value, not a component; define the component on its own line"}
	}
	switch x := v.(type) {
	case string:
		if utf16Len(x) > maxText {
			return nil, invalid("the text is longer than %d characters", maxText)
		}
	case float64:
		if !isFinite(x) {
			return nil, invalid("the number is too large to represent")
		}
	case bool, nil:
	default:
		return nil, invalid("state holds a string, a number, true, false or null")
	}
	return &stmt{kind: stmtState, line: line, key: raw.target, value: v}, nil
}

func (r *registry) mutationStmt(raw *rawStmt, id string, line int) (*stmt, *lineError) {
	props, _, _, err := r.collectProps(raw, mutationSchema)
	if err != nil {
		return nil, err
	}
	tool := prop1(props, "tool").(string)
	if !r.tools[tool] {
		return nil, &lineError{code: "unknown_tool", msg: fmt.Sprintf("no tool named %q is in the app's tool registry", tool)}
	}
	m := &Mutation{ID: id, Target: string(prop1(props, "target").(ref)), Tool: tool, Line: line}
	if p, ok := prop1(props, "params").(map[string]Value); ok {
		m.Params = p
	} else {
		m.Params = map[string]Value{}
	}
	s := &stmt{kind: stmtMutation, line: line, mut: m}
	keys := make([]string, 0, len(m.Params))
	for k := range m.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if sr, ok := m.Params[k].(StateRef); ok && !contains(s.stateRefs, string(sr)) {
			s.stateRefs = append(s.stateRefs, string(sr))
		}
	}
	return s, nil
}

// prop1 returns the value of the prop named name, or nil.
func prop1(props []prop, name string) Value {
	v, _ := propOf(props, name)
	return v
}

// collectProps assigns positional arguments to the component's positional
// props, converts values and checks each against the catalog ([5.8],
// [5.9]).
// The children list is returned on its own rather than in the props, with
// the $keys the props read, in argument order.
func (r *registry) collectProps(raw *rawStmt, cs *compSchema) (props []prop, kids Value, refs []string, err *lineError) {
	// Every name is checked against the schema before the next argument is
	// read, so at most one name more than the component has props is ever
	// compared with those before it: a linear search is enough.
	props = r.takeProps(len(raw.args))
	hasKids := false
	pos := 0
	for _, a := range raw.args {
		name := a.name
		if name == "" {
			if pos >= len(cs.positional) {
				return nil, nil, nil, invalid("%s takes %d positional argument%s; give the others by name", raw.call, len(cs.positional), plural(len(cs.positional)))
			}
			name = cs.positional[pos]
			pos++
		}
		if _, dup := propOf(props, name); dup || name == "children" && hasKids {
			return nil, nil, nil, invalid("%s is given twice", name)
		}
		var v Value
		if !a.isStr {
			if v, err = convertValue(a.val); err != nil {
				return nil, nil, nil, err
			}
		}
		var sch *schema
		if a.name == "" && pos <= len(cs.posSchemas) {
			sch = cs.posSchemas[pos-1]
		} else {
			sch = cs.props[name]
		}
		if sch == nil {
			return nil, nil, nil, invalid("%s has no prop %q; its props are %s", raw.call, clip(name), propList(cs))
		}
		if a.isStr {
			v = sch.boxString(a.str)
		}
		if !sch.check(v) {
			return nil, nil, nil, invalid("%s's %s must be %s", raw.call, name, sch.describe())
		}
		if name == "children" {
			kids, hasKids = v, true
		} else {
			props = append(props, prop{name, v})
		}
		refs = appendRefs(refs, v)
	}
	for _, name := range cs.required {
		if _, ok := propOf(props, name); !ok && !(name == "children" && hasKids) {
			return nil, nil, nil, invalid("%s needs %s", raw.call, name)
		}
	}
	return props, kids, refs, nil
}

// appendRefs appends the $keys in v (a value or a list of values) that refs
// doesn't hold yet.
func appendRefs(refs []string, v Value) []string {
	switch x := v.(type) {
	case StateRef:
		if !contains(refs, string(x)) {
			refs = append(refs, string(x))
		}
	case []Value:
		for _, e := range x {
			if k, ok := e.(StateRef); ok && !contains(refs, string(k)) {
				refs = append(refs, string(k))
			}
		}
	}
	return refs
}

// convertValue turns object literals into maps, refusing repeated and
// reserved keys ([5.16]).
func convertValue(v Value) (Value, *lineError) {
	switch x := v.(type) {
	case *rawObject:
		m := make(map[string]Value, len(x.keys))
		for i, k := range x.keys {
			if reservedWords[k] {
				return nil, invalid("%q is a reserved word and can't be a key", k)
			}
			if _, dup := m[k]; dup {
				return nil, invalid("the key %q is repeated", clip(k))
			}
			e, err := convertValue(x.vals[i])
			if err != nil {
				return nil, err
			}
			m[k] = e
		}
		return m, nil
	case []Value:
		for i, e := range x {
			if o, ok := e.(*rawObject); ok {
				c, err := convertValue(o)
				if err != nil {
					return nil, err
				}
				x[i] = c
			} else if l, ok := e.([]Value); ok {
				if _, err := convertValue(l); err != nil {
					return nil, err
				}
			}
		}
	}
	return v, nil
}

func propList(cs *compSchema) string {
	if len(cs.props) == 0 {
		return "none"
	}
	names := make([]string, 0, len(cs.props))
	for n := range cs.props {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// describe says in words what a schema accepts, for messages.
func (s *schema) describe() string {
	if s.anyOf != nil {
		parts := make([]string, len(s.anyOf))
		for i, a := range s.anyOf {
			parts[i] = a.describe()
		}
		return strings.Join(parts, " or ")
	}
	switch s.kind {
	case kindString:
		if s.enum != nil {
			q := make([]string, len(s.enum))
			for i, e := range s.enum {
				q[i] = fmt.Sprintf("%q", e)
			}
			return "one of " + strings.Join(q, ", ")
		}
		switch s.pattern {
		case patAsset:
			return "a picture name (lowercase letters, digits and hyphens)"
		case patAction:
			return "an action name (a lower-case letter, then letters, digits and _)"
		case patTool:
			return "a tool name such as payments.confirm"
		case patDate:
			return `a date "YYYY-MM-DD"`
		case patCurrency:
			return "a 3-letter currency code such as USD"
		case patIdent:
			return "an identifier"
		}
		switch {
		case s.minLength > 0 && s.maxLength > 0:
			return fmt.Sprintf("text of %d to %d characters", s.minLength, s.maxLength)
		case s.maxLength > 0:
			return fmt.Sprintf("text of at most %d characters", s.maxLength)
		}
		return "text"
	case kindNumber, kindInteger:
		w := "a number"
		if s.kind == kindInteger {
			w = "a whole number"
		}
		if s.hasConst {
			return fmt.Sprintf("%v", s.constNum)
		}
		switch {
		case s.hasMin && s.hasMax:
			return fmt.Sprintf("%s from %v to %v", w, s.min, s.max)
		case s.hasMin:
			return fmt.Sprintf("%s of at least %v", w, s.min)
		case s.hasMax:
			return fmt.Sprintf("%s of at most %v", w, s.max)
		}
		return w
	case kindBool:
		return "true or false"
	case kindNull:
		return "null"
	case kindState:
		return "a $key"
	case kindRef:
		return "a component id"
	case kindArray:
		w := "a list"
		if s.items != nil {
			w = "a list of " + s.items.describe()
		}
		if s.maxItems > 0 {
			w += fmt.Sprintf(" (%d to %d items)", s.minItems, s.maxItems)
		}
		return w
	case kindObject:
		return "{key: value or $key, …}"
	}
	return "something else"
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	i := 40
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}

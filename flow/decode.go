package flow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits of the strict decoder.
const (
	// MaxDocumentSize is the largest document accepted, in bytes.
	MaxDocumentSize = 16 << 20
	// MaxDepth is the deepest nesting of arrays and objects accepted.
	MaxDepth = 64
	// maxDecodeErrors bounds the structural errors collected in one pass.
	maxDecodeErrors = 32
)

// decoder is a strict, path-tracking reader over jsontext. Syntax problems
// (bad JSON, duplicate keys, invalid UTF-8, excessive depth, trailing data)
// are fatal and stop decoding. Structural problems (unknown keys, wrong
// types, missing keys) are collected and the offending value is skipped, so
// that later checks such as schema_version still see the rest. Every method
// reads the value at the current path.
type decoder struct {
	dec     *jsontext.Decoder
	path    pathStack
	fatal   *Error
	errs    []*Error
	strs    *[internSize]string // recently seen strings: names and values repeat
	scratch []byte
	arena   []string // backing store shared by the decoded string lists
	text    stringArena

	// Lists are gathered in scratch space, then copied to slabs at their
	// final size.
	conds     slab[Condition]
	params    slab[Parameter]
	assigns   slab[Assignment]
	condBuf   []Condition
	paramBuf  []Parameter
	assignBuf []Assignment
}

// arenaChunk is how many strings one arena allocation holds.
const arenaChunk = 512

func newDecoder(data []byte) *decoder {
	d := &decoder{dec: jsontext.NewDecoder(bytes.NewBuffer(data)), strs: new([internSize]string)}
	d.path.elems = make([]pathElem, 0, 8)
	return d
}

// readString reads a string value or an object name. Strings already seen
// in this document are shared rather than allocated again.
func (d *decoder) readString() (string, bool) {
	v, err := d.dec.ReadValue()
	if err != nil {
		d.syntax(err)
		return "", false
	}
	return d.unquote([]byte(v))
}

// unquote decodes a raw JSON string.
func (d *decoder) unquote(raw []byte) (string, bool) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return d.intern(raw[1 : len(raw)-1]), true
	}
	var err error
	d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], raw)
	if err != nil {
		d.syntax(err)
		return "", false
	}
	return d.intern(d.scratch), true
}

// internSize is the number of slots of the decoder's string cache.
const internSize = 512

// intern returns b as a string, reusing the string last seen in b's cache
// slot when it is equal. The cache is direct-mapped: cheaper than a map, and
// good enough because the same few names and values recur.
func (d *decoder) intern(b []byte) string {
	// A cheap hash of the length and three bytes: equal strings share a
	// slot, and the comparison below settles collisions.
	h := uint32(len(b))
	if len(b) > 0 {
		h = h*0x9E3779B1 ^ uint32(b[0])<<16 ^ uint32(b[len(b)/2])<<8 ^ uint32(b[len(b)-1])
		h *= 0x85EBCA6B
		h ^= h >> 15
	}
	slot := &d.strs[h%internSize]
	if *slot == string(b) {
		return *slot
	}
	s := d.text.bytes(b)
	*slot = s
	return s
}

func (d *decoder) ok() bool { return d.fatal == nil }

func (d *decoder) syntax(err error) {
	if d.fatal != nil {
		return
	}
	msg := err.Error()
	at := d.path.String()
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		switch {
		case errors.Is(se.Err, jsontext.ErrDuplicateName):
			name := se.JSONPointer.LastToken()
			at = d.path.with(name)
			msg = fmt.Sprintf("duplicate key %q; each key may appear once per object", name)
		case errors.Is(err, io.ErrUnexpectedEOF):
			msg = "the document ends before the JSON value is complete"
		default:
			msg = strings.TrimPrefix(se.Err.Error(), "jsontext: ")
			msg = fmt.Sprintf("not valid JSON at byte %d: %s", se.ByteOffset, msg)
		}
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "the document ends before the JSON value is complete"
	}
	d.fatal = &Error{Code: CodeProgramInvalid, Path: at, Message: msg}
}

// structural records a shape error at the current path (plus extra
// elements).
func (d *decoder) structural(extra []any, format string, args ...any) {
	if len(d.errs) < maxDecodeErrors {
		d.errs = append(d.errs, &Error{Code: CodeProgramInvalid, Path: d.path.with(extra...), Message: fmt.Sprintf(format, args...)})
	}
}

func (d *decoder) read() (jsontext.Token, bool) {
	tok, err := d.dec.ReadToken()
	if err != nil {
		d.syntax(err)
		return tok, false
	}
	if d.dec.StackDepth() > MaxDepth {
		d.fatal = &Error{Code: CodeProgramInvalid, Path: d.path.String(), Message: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
		return tok, false
	}
	return tok, true
}

// skip consumes one value, token by token so that the depth limit applies.
func (d *decoder) skip() {
	depth := 0
	for d.ok() {
		tok, ok := d.read()
		if !ok {
			return
		}
		switch tok.Kind() {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth == 0 {
			return
		}
	}
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "nothing"
}

// expect peeks at the next value and, when it is not of kind want, records
// a type error, skips the value and returns false.
func (d *decoder) expect(want jsontext.Kind, what string) bool {
	if !d.ok() {
		return false
	}
	k := d.dec.PeekKind()
	if k == 0 {
		d.read() // surfaces the syntax error
		return false
	}
	if k == want || (want == 't' && k == 'f') {
		return true
	}
	d.structural(nil, "must be %s, not %s", what, kindName(k))
	d.skip()
	return false
}

// str reads a string value. It reads the value whole and checks its kind
// afterwards, which saves a peek on the common path.
func (d *decoder) str() (string, bool) {
	if !d.ok() {
		return "", false
	}
	v, err := d.dec.ReadValue()
	if err != nil {
		d.syntax(err)
		return "", false
	}
	raw := []byte(v)
	if raw[0] != '"' {
		if d.path.depth()+valueDepth(raw) > MaxDepth {
			d.fatal = &Error{Code: CodeProgramInvalid, Path: d.path.String(), Message: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
			return "", false
		}
		d.structural(nil, "must be a string, not %s", kindName(jsontext.Kind(raw[0])))
		return "", false
	}
	return d.unquote(raw)
}

// valueDepth returns the nesting depth of a raw JSON value.
func valueDepth(raw []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func (d *decoder) boolean() (bool, bool) {
	if !d.expect('t', "true or false") {
		return false, false
	}
	tok, ok := d.read()
	if !ok {
		return false, false
	}
	return tok.Bool(), true
}

// integer reads a number written as an integer literal: no fraction, no
// exponent, within int64.
func (d *decoder) integer() (int64, bool) {
	if !d.expect('0', "an integer") {
		return 0, false
	}
	tok, ok := d.read()
	if !ok {
		return 0, false
	}
	raw := tok.String()
	if strings.ContainsAny(raw, ".eE") {
		d.structural(nil, "must be an integer, not %s", raw)
		return 0, false
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		d.structural(nil, "integer %s is out of range", raw)
		return 0, false
	}
	return n, true
}

// object reads an object, calling field for each key with the key pushed on
// the path. field returns false for an unknown key, which is recorded and
// skipped.
func (d *decoder) object(what string, field func(key string) bool) bool {
	if !d.expect('{', what) {
		return false
	}
	d.read()
	for d.ok() {
		if d.dec.PeekKind() == '}' {
			d.read()
			return d.ok()
		}
		key, ok := d.readString()
		if !ok {
			return false
		}
		d.path.push(key)
		if !field(key) {
			d.structural(nil, "unknown key %q", key)
			d.skip()
		}
		d.path.pop()
	}
	return false
}

// array reads an array, calling item for each element with its index
// pushed on the path.
func (d *decoder) array(what string, item func(i int)) bool {
	if !d.expect('[', what) {
		return false
	}
	d.read()
	for i := 0; d.ok(); i++ {
		if d.dec.PeekKind() == ']' {
			d.read()
			return d.ok()
		}
		d.path.pushIndex(i)
		item(i)
		d.path.pop()
	}
	return false
}

// strings reads an array of strings. The lists of one document share
// chunks of a bump-allocated arena; each list is capped so that appending
// to it copies instead of overwriting its neighbour.
func (d *decoder) strings() []string {
	start := len(d.arena)
	d.array("an array of strings", func(int) {
		// A bad member is recorded and kept as "" so that indexes stay
		// aligned with the source.
		s, _ := d.str()
		if len(d.arena) == cap(d.arena) {
			n := len(d.arena) - start
			chunk := make([]string, n, max(arenaChunk, 2*n))
			copy(chunk, d.arena[start:])
			d.arena, start = chunk, 0
		}
		d.arena = append(d.arena, s)
	})
	return d.arena[start:len(d.arena):len(d.arena)]
}

// end checks that nothing but whitespace follows the top-level value.
func (d *decoder) end() {
	if !d.ok() {
		return
	}
	if _, err := d.dec.ReadToken(); err == nil {
		d.fatal = &Error{Code: CodeProgramInvalid, Message: "trailing data after the JSON value; a document holds exactly one object"}
	} else if !errors.Is(err, io.EOF) {
		d.syntax(err)
	}
}

// Top-level keys, for the "exactly these keys" rule.
const (
	keySchemaVersion = 1 << iota
	keyProgramID
	keyProgramVersion
	keyRequiresRuntime
	keyCapabilities
	keyOwnedResources
	keyObjectiveContracts
	keyTransitions
	keyAll = 1<<iota - 1
)

var topKeys = []string{"schema_version", "program_id", "program_version", "requires_runtime", "capabilities", "owned_resources", "objective_contracts", "transitions"}

// decodeManifest decodes data strictly. It returns the manifest, a fatal
// syntax error if any, and the structural errors.
func decodeManifest(data []byte) (*Manifest, *Error, []*Error) {
	if len(data) > MaxDocumentSize {
		return nil, &Error{Code: CodeProgramInvalid, Message: fmt.Sprintf("the document is %d bytes; the limit is %d (16 MiB)", len(data), MaxDocumentSize)}, nil
	}
	d := newDecoder(data)
	m := &Manifest{}
	seen := 0
	if k := d.dec.PeekKind(); k != '{' && k != 0 {
		// A top-level value that is not an object cannot be a program.
		d.skip()
		d.end()
		if d.fatal != nil {
			return nil, d.fatal, nil
		}
		return nil, &Error{Code: CodeProgramInvalid, Message: "the document must be a JSON object"}, nil
	}
	d.object("an object", func(key string) bool {
		switch key {
		case "schema_version":
			seen |= keySchemaVersion
			m.SchemaVersion, _ = d.integer()
		case "program_id":
			seen |= keyProgramID
			m.ProgramID, _ = d.str()
		case "program_version":
			seen |= keyProgramVersion
			m.ProgramVersion, _ = d.str()
		case "requires_runtime":
			seen |= keyRequiresRuntime
			m.RequiresRuntime, _ = d.str()
		case "capabilities":
			seen |= keyCapabilities
			d.capabilities(&m.Capabilities)
		case "owned_resources":
			seen |= keyOwnedResources
			m.OwnedResources = d.strings()
		case "objective_contracts":
			seen |= keyObjectiveContracts
			d.array("an array of objective contracts", func(int) {
				m.ObjectiveContracts = append(m.ObjectiveContracts, d.objectiveContract())
			})
		case "transitions":
			seen |= keyTransitions
			// Size the slice once: every transition has one selection_class
			// key, so its count bounds the number of transitions in practice.
			if m.Transitions == nil {
				m.Transitions = make([]Transition, 0, min(bytes.Count(data, []byte(`"selection_class"`)), 1<<16))
			}
			d.array("an array of transitions", func(int) {
				m.Transitions = append(m.Transitions, Transition{})
				d.transition(&m.Transitions[len(m.Transitions)-1])
			})
		default:
			return false
		}
		return true
	})
	d.end()
	if d.fatal != nil {
		return nil, d.fatal, nil
	}
	if seen != keyAll {
		for i, k := range topKeys {
			if seen&(1<<i) == 0 {
				d.structural([]any{k}, "missing; a program has exactly the keys %s", strings.Join(topKeys, ", "))
			}
		}
	}
	return m, nil, d.errs
}

func (d *decoder) capabilities(c *Capabilities) {
	seen := 0
	if !d.object("an object", func(key string) bool {
		switch key {
		case "effects":
			seen |= 1
			c.Effects = d.strings()
		case "verifiers":
			seen |= 2
			c.Verifiers = d.strings()
		case "capability_surface":
			seen |= 4
			c.CapabilitySurface = d.strings()
		default:
			return false
		}
		return true
	}) {
		return
	}
	for i, k := range []string{"effects", "verifiers", "capability_surface"} {
		if seen&(1<<i) == 0 {
			d.structural([]any{k}, "missing; capabilities has exactly the keys effects, verifiers and capability_surface (each may be empty)")
		}
	}
}

func (d *decoder) objectiveContract() ObjectiveContract {
	var c ObjectiveContract
	d.object("an object", func(key string) bool {
		switch key {
		case "objective":
			c.Objective, _ = d.str()
		case "conditions":
			c.Conditions = d.conditions()
		default:
			return false
		}
		return true
	})
	return c
}

func (d *decoder) conditions() []Condition {
	out := d.condBuf[:0]
	d.array("an array of conditions", func(int) {
		var c Condition
		d.object("an object", func(key string) bool {
			switch key {
			case "facet":
				c.Facet, _ = d.str()
			case "statuses":
				c.Statuses = d.strings()
			case "values":
				c.Values = d.strings()
			default:
				return false
			}
			return true
		})
		out = append(out, c)
	})
	d.condBuf = out
	return d.conds.clone(out)
}

func (d *decoder) transition(t *Transition) {
	d.object("an object", func(key string) bool {
		switch key {
		case "id":
			t.ID, _ = d.str()
		case "selection_class":
			t.SelectionClass, _ = d.str()
		case "priority":
			t.Priority, _ = d.integer()
		case "source_phases":
			t.SourcePhases = d.strings()
		case "target_phases":
			t.TargetPhases = d.strings()
		case "objectives":
			t.Objectives = d.strings()
		case "authority":
			t.Authority = d.strings()
		case "authority_all":
			t.AuthorityAll = d.strings()
		case "required_identity":
			t.RequiredIdentity = d.strings()
		case "required_evidence":
			t.RequiredEvidence = d.strings()
		case "owned_resources":
			t.OwnedResources = d.strings()
		case "parameters":
			prms := d.paramBuf[:0]
			d.array("an array of parameters", func(int) {
				var prm Parameter
				d.object("an object", func(key string) bool {
					switch key {
					case "name":
						prm.Name, _ = d.str()
					case "required":
						prm.Required, _ = d.boolean()
					case "secret":
						prm.Secret, _ = d.boolean()
					default:
						return false
					}
					return true
				})
				prms = append(prms, prm)
			})
			d.paramBuf = prms
			t.Parameters = d.params.clone(prms)
		case "source_conditions":
			t.SourceConditions = d.conditions()
		case "target_conditions":
			t.TargetConditions = d.conditions()
		case "assignments":
			as := d.assignBuf[:0]
			d.array("an array of assignments", func(int) {
				var a Assignment
				hasValue := false
				if d.object("an object", func(key string) bool {
					switch key {
					case "facet":
						a.Facet, _ = d.str()
					case "value":
						hasValue = true
						a.Value, _ = d.str()
					default:
						return false
					}
					return true
				}) && !hasValue {
					d.structural([]any{"value"}, "missing; an assignment needs a string value")
				}
				as = append(as, a)
			})
			d.assignBuf = as
			t.Assignments = d.assigns.clone(as)
		case "required_capabilities":
			t.RequiredCapabilities = d.strings()
		case "effect":
			if e, ok := d.str(); ok && e == "" {
				d.structural(nil, "must be an effect id; omit the key when the transition has no effect")
			} else {
				t.Effect = e
			}
		case "verifier":
			t.Verifier, _ = d.str()
		case "prescription":
			ps := &PrescriptionSpec{}
			t.Prescription = ps
			d.object("an object", func(key string) bool {
				switch key {
				case "operation":
					ps.Operation, _ = d.str()
				case "arguments":
					ps.Arguments = d.strings()
				case "expected_postcondition":
					ps.ExpectedPostcondition, _ = d.str()
				default:
					return false
				}
				return true
			})
		case "interruption":
			in := &Interruption{}
			t.Interruption = in
			d.object("an object", func(key string) bool {
				switch key {
				case "points":
					in.Points = d.strings()
				case "recovery":
					in.Recovery, _ = d.str()
				default:
					return false
				}
				return true
			})
		case "approval":
			r := &ApprovalRule{Quorum: 1}
			t.Approval = r
			d.object("an object", func(key string) bool {
				switch key {
				case "quorum":
					r.Quorum, _ = d.integer()
				case "group":
					r.Group, _ = d.str()
				case "deadline_seconds":
					r.DeadlineSeconds, _ = d.integer()
					r.deadlineSet = true
				case "fallback":
					r.Fallback, _ = d.str()
				case "escalate_to":
					r.EscalateTo, _ = d.str()
				default:
					return false
				}
				return true
			})
		case "policy":
			pol := &Policy{}
			t.Policy = pol
			d.object("an object", func(key string) bool {
				if key != "managed_operations" {
					return false
				}
				pol.ManagedOperations = d.strings()
				return true
			})
		default:
			return false
		}
		return true
	})
}

// Package tool is the registry of tools that agents call. The MCP tool list
// is built from it, so every part of assent (controls, screens, Runs, Flows,
// and tools that applications register) adds its tools in one place.
//
// A tool has a name, a description, a JSON Schema for its arguments, the four
// MCP annotations (always set explicitly) and a handler. Handlers receive the
// calling principal from the transport, never from the arguments.
//
// Names are unique after normalization: "Audio-Transcribe", "audio.transcribe"
// and "audio_transcribe" are one name, so a tool cannot shadow another by a
// change of case or separator.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/assent-run/assent/store"
)

// Annotations are the MCP tool hints. Every tool states all four.
type Annotations struct {
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
}

// Call is one invocation of a tool.
type Call struct {
	// Principal is who calls, decided by the transport.
	Principal store.Principal
	// Args is the JSON object of arguments (never nil; "{}" when empty).
	Args json.RawMessage
	// Meta is the request's _meta, as the client sent it. Nothing in it
	// is trusted for who calls or what they may do.
	Meta map[string]any
}

// Result is what a tool returns.
type Result struct {
	// Text is the human-readable answer. When empty, the JSON of
	// Structured is used.
	Text string
	// Structured is returned as MCP structuredContent when not nil.
	Structured any
	// IsError marks a result that reports a refusal in its own shape (for
	// example a registry result with ok false).
	IsError bool
	// Decision, when set, is the web page where a person decides what
	// the call filed for them (an approval, a staged value, a proposal).
	// An MCP client that declared URL-mode elicitation is asked to open
	// it for the person.
	Decision string
}

// Handler runs a tool. A refusal is returned as an *Error; any other error
// is reported to the caller as "tool_failed" without its message.
type Handler func(ctx context.Context, call Call) (*Result, error)

// Tool is a registered tool.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is a JSON Schema object for Args. Nil means an object
	// with no properties.
	InputSchema json.RawMessage
	// OutputSchema is a JSON Schema object that the tool's Structured
	// result conforms to. Nil means an object with any properties.
	OutputSchema json.RawMessage
	Annotations  Annotations
	// Hidden tools can be called but are not listed (for example legacy
	// aliases of a renamed tool).
	Hidden bool
	// Meta is passed through as the MCP tool's _meta.
	Meta map[string]any
	// Owner is the principal that registered the tool at run time; empty
	// for the tools assent itself provides. Until Published, a tool with
	// an Owner is visible to (listed for and callable by) its owner only.
	Owner string
	// Published makes an owned tool visible to every principal. Only a
	// person publishes a tool.
	Published bool
	Handler   Handler
	// Example is the arguments of a valid call, for the reference and
	// the tests; set by New.
	Example json.RawMessage

	defect error // why New could not derive the tool's schemas
}

// VisibleTo reports whether p may see and call t: a tool assent provides,
// a published tool, or p's own tool.
func (t Tool) VisibleTo(p store.Principal) bool {
	return t.Owner == "" || t.Published || (p.ID != "" && t.Owner == p.ID)
}

// Error is a refusal with a stable code.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Data carries structured detail (for example backpressure figures).
	Data map[string]any `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrCollision is returned by Register when a tool's normalized name is
// already taken.
var ErrCollision = errors.New("tool name collides with an existing tool")

// Normalize returns the form in which names are compared for collisions:
// lower case, with '-', '.', ' ' and '/' folded to '_'.
func Normalize(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '-', '.', ' ', '/':
			return '_'
		}
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, strings.TrimSpace(name))
}

// Registry holds tools. It is safe for concurrent use. The zero value is not
// usable; call NewRegistry.
type Registry struct {
	mu       sync.RWMutex
	byNorm   map[string]*Tool
	watchers map[int]func()
	nextW    int
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byNorm: map[string]*Tool{}, watchers: map[int]func(){}}
}

// Register adds t. It fails with ErrCollision when a tool with the same
// normalized name exists.
func (r *Registry) Register(t Tool) error {
	if err := check(t); err != nil {
		return err
	}
	n := Normalize(t.Name)
	r.mu.Lock()
	if old, ok := r.byNorm[n]; ok {
		r.mu.Unlock()
		return fmt.Errorf("register %q: %w (%q)", t.Name, ErrCollision, old.Name)
	}
	r.byNorm[n] = &t
	r.mu.Unlock()
	r.changed()
	return nil
}

// Replace adds t or replaces the tool with its exact name. A different tool
// whose normalized name matches is still a collision.
func (r *Registry) Replace(t Tool) error {
	if err := check(t); err != nil {
		return err
	}
	n := Normalize(t.Name)
	r.mu.Lock()
	if old, ok := r.byNorm[n]; ok && old.Name != t.Name {
		r.mu.Unlock()
		return fmt.Errorf("replace %q: %w (%q)", t.Name, ErrCollision, old.Name)
	}
	r.byNorm[n] = &t
	r.mu.Unlock()
	r.changed()
	return nil
}

// Remove deletes the tool with exactly this name and reports whether it
// existed.
func (r *Registry) Remove(name string) bool {
	n := Normalize(name)
	r.mu.Lock()
	old, ok := r.byNorm[n]
	if ok && old.Name == name {
		delete(r.byNorm, n)
	} else {
		ok = false
	}
	r.mu.Unlock()
	if ok {
		r.changed()
	}
	return ok
}

// Lookup returns the tool with exactly this name (hidden tools included).
// Names are compared byte for byte: a look-alike name is simply unknown.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byNorm[Normalize(name)]
	if !ok || t.Name != name {
		return Tool{}, false
	}
	return *t, true
}

// VisibleTo reports whether a tool named exactly name exists and p may see
// it. A tool p cannot see is, to p, a tool that does not exist.
func (r *Registry) VisibleTo(p store.Principal, name string) bool {
	t, ok := r.Lookup(name)
	return ok && t.VisibleTo(p)
}

// ListFor returns the tools p may see, hidden ones included, sorted by
// name. The MCP tool list of p is built from it.
func (r *Registry) ListFor(p store.Principal) []Tool {
	all := r.List()
	out := all[:0]
	for _, t := range all {
		if t.VisibleTo(p) {
			out = append(out, t)
		}
	}
	return out
}

// Colliding returns the tool whose normalized name equals name's, whatever
// its exact spelling.
func (r *Registry) Colliding(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byNorm[Normalize(name)]
	if !ok {
		return Tool{}, false
	}
	return *t, true
}

// Taken reports whether name collides with a registered tool after
// normalization.
func (r *Registry) Taken(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.byNorm[Normalize(name)]
	return ok
}

// List returns every tool, hidden ones included, sorted by name.
func (r *Registry) List() []Tool {
	r.mu.RLock()
	out := make([]Tool, 0, len(r.byNorm))
	for _, t := range r.byNorm {
		out = append(out, *t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Watch calls f (on the goroutine that changed the registry) after every
// change, and returns a function that stops watching.
func (r *Registry) Watch(f func()) (stop func()) {
	r.mu.Lock()
	id := r.nextW
	r.nextW++
	r.watchers[id] = f
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.watchers, id)
		r.mu.Unlock()
	}
}

func (r *Registry) changed() {
	r.mu.RLock()
	fs := make([]func(), 0, len(r.watchers))
	for _, f := range r.watchers {
		fs = append(fs, f)
	}
	r.mu.RUnlock()
	for _, f := range fs {
		f()
	}
}

func check(t Tool) error {
	if t.defect != nil {
		return t.defect
	}
	if t.Name == "" || len(t.Name) > 128 {
		return fmt.Errorf("tool name %q must be 1 to 128 characters", t.Name)
	}
	for _, c := range t.Name {
		if !(c == '_' || c == '-' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return fmt.Errorf("tool name %q may only hold letters, digits, '_', '-' and '.'", t.Name)
		}
	}
	if t.Handler == nil {
		return fmt.Errorf("tool %q has no handler", t.Name)
	}
	if t.InputSchema != nil && !json.Valid(t.InputSchema) {
		return fmt.Errorf("tool %q: input schema is not valid JSON", t.Name)
	}
	return nil
}

// Call runs the named tool for call. Unknown names, and tools the caller
// may not see, give the same *Error with code "unknown_tool".
func (r *Registry) Call(ctx context.Context, name string, call Call) (*Result, error) {
	t, ok := r.Lookup(name)
	if !ok || !t.VisibleTo(call.Principal) {
		return nil, Errorf("unknown_tool", "no tool is named %q; list the tools to see what is available", name)
	}
	if len(call.Args) == 0 || string(call.Args) == "null" {
		call.Args = json.RawMessage("{}")
	}
	return t.Handler(ctx, call)
}

// DecodeArgs decodes args into v, refusing unknown fields, and returns an
// *Error with code "invalid_request" on failure. Its message and data name
// the argument at fault and the JSON type it takes, in JSON's terms, never
// Go's: data is {"field", "expected", "got"} for a value of the wrong type
// and {"field", "accepted"} for an unknown argument.
func DecodeArgs(args json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return argsError(err, args, v)
	}
	// More stops at a closing bracket, so ask for the next token: only
	// the end of the input may follow the value.
	if _, err := dec.Token(); err != io.EOF {
		return Errorf("invalid_request", "invalid arguments: trailing data after the JSON value")
	}
	return nil
}

// argsError describes a decoding error of DecodeArgs.
func argsError(err error, args json.RawMessage, v any) *Error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		got, _, _ := strings.Cut(te.Value, " ")
		if got == "bool" {
			got = "boolean"
		}
		want := jsonKind(te.Type)
		if te.Field == "" {
			e := Errorf("invalid_request", "invalid arguments: the arguments must be a JSON object, not %s", article(got))
			e.Data = map[string]any{"field": "", "expected": "object", "got": got}
			return e
		}
		if got == "number" && (want == "integer" || want == "number") {
			what := "a number within range"
			if want == "integer" {
				what = "an integer (a whole number within range)"
			}
			e := Errorf("invalid_request", "invalid arguments: %q must be %s", te.Field, what)
			e.Data = map[string]any{"field": te.Field, "expected": want, "got": "number out of range"}
			return e
		}
		e := Errorf("invalid_request", "invalid arguments: %q must be %s, not %s", te.Field, article(want), article(got))
		e.Data = map[string]any{"field": te.Field, "expected": want, "got": got}
		return e
	case errors.As(err, &se):
		return Errorf("invalid_request", "invalid arguments: not valid JSON (at byte %d); send one JSON object", se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf("invalid_request", "invalid arguments: the JSON ends too early; send one JSON object")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		var top map[string]json.RawMessage
		if json.Unmarshal(args, &top) != nil || top[name] == nil {
			// Not a top-level key: inside an argument's object.
			e := Errorf("invalid_request", "invalid arguments: unknown field %q inside an argument's object; see the tool's input schema", name)
			e.Data = map[string]any{"field": name}
			return e
		}
		accepted := jsonFields(reflect.TypeOf(v))
		e := Errorf("invalid_request", "invalid arguments: unknown argument %q; the tool takes %s", name, strings.Join(quoteAll(accepted), ", "))
		if len(accepted) == 0 {
			e.Message = fmt.Sprintf("invalid arguments: unknown argument %q; the tool takes no arguments", name)
		}
		e.Data = map[string]any{"field": name, "accepted": accepted}
		return e
	}
	return Errorf("invalid_request", "invalid arguments: the arguments could not be read; check them against the tool's input schema")
}

// jsonKind names the JSON type a value of Go type t is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string"
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "value"
}

func article(kind string) string {
	switch kind {
	case "":
		return "a value"
	case "array", "object", "integer":
		return "an " + kind
	case "null", "true", "false":
		return kind
	}
	return "a " + kind
}

// jsonFields lists the JSON names of the fields of the struct t points to.
func jsonFields(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

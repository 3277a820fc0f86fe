package confirm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assent-run/assent/internal/schemaerr"
)

// MaxNameLength is the longest tool name, in bytes.
const MaxNameLength = 128

// Tool is an application's backend action, as the registry holds it.
type Tool struct {
	// Name is how a stream's McpMutation names the tool: ASCII,
	// dot-separated segments, each a lower-case letter followed by
	// letters, digits or underscores, at least two segments, at most
	// MaxNameLength bytes ("payments.confirm"). See [ValidName].
	Name string
	// Description says what the tool does, for people and models.
	Description string
	// Params is the JSON Schema (draft 2020-12 unless it says otherwise)
	// that a press's params must match. Empty means any object. It may not
	// refer to other documents, and "format" is asserted.
	Params json.RawMessage
	// Secret lists the params whose values must never be shown or logged.
	// A confirmation template may not name them, and schema issues about
	// them never repeat their value.
	Secret []string
	// Confirm is the sentence the person confirms before the tool runs;
	// the zero value runs it without asking.
	Confirm Confirmation
	// Handler runs the action. A tool without one is refused at a press
	// as unknown_tool, like a tool that isn't registered.
	Handler Handler
}

// ValidName reports whether name is shaped like a tool name:
// ^[a-z][A-Za-z0-9_]*(\.[a-z][A-Za-z0-9_]*)+$ and at most MaxNameLength
// bytes.
func ValidName(name string) bool {
	if len(name) > MaxNameLength {
		return false
	}
	segments := 0
	for seg := range strings.SplitSeq(name, ".") {
		if seg == "" || seg[0] < 'a' || seg[0] > 'z' {
			return false
		}
		for i := 1; i < len(seg); i++ {
			if c := seg[i]; !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				return false
			}
		}
		segments++
	}
	return segments >= 2
}

// entry is a registered tool with its compiled schema. Entries are never
// modified; replacing a tool stores a new entry.
type entry struct {
	tool   Tool
	schema *jsonschema.Schema
	secret map[string]bool
}

// Registry holds an application's tools by name. It is safe for concurrent
// use, and its zero value is an empty registry ready to use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*entry
}

// NewRegistry returns a registry holding tools, or the first registration
// error.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. It fails with invalid_tool when t is malformed (its
// name, schema or confirmation) and with tool_exists when a tool of that
// name is already registered.
func (r *Registry) Register(t Tool) error {
	return r.add(t, false)
}

// Replace adds t, or replaces the tool of the same name. A press prepared
// for the old tool fails with tool_changed when it is confirmed.
func (r *Registry) Replace(t Tool) error {
	return r.add(t, true)
}

func (r *Registry) add(t Tool, replace bool) error {
	e, err := compile(t)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[t.Name]; ok && !replace {
		return &Error{Code: CodeToolExists, Tool: t.Name, Message: fmt.Sprintf("a tool named %q is already registered; use Replace to change it", t.Name)}
	}
	if r.tools == nil {
		r.tools = make(map[string]*entry)
	}
	r.tools[t.Name] = e
	return nil
}

// Remove removes the tool named name and reports whether there was one.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

// Lookup returns the tool registered under exactly name, byte for byte.
func (r *Registry) Lookup(name string) (Tool, bool) {
	e := r.entry(name)
	if e == nil {
		return Tool{}, false
	}
	t := e.tool
	t.Params = slices.Clone(t.Params)
	t.Secret = slices.Clone(t.Secret)
	return t, true
}

// Names returns the registered tool names in byte order: the tool registry a
// parser checks McpMutation lines against.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for name := range r.tools {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (r *Registry) entry(name string) *entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tools[name]
}

func invalidTool(name, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidTool, Tool: name, Message: fmt.Sprintf("tool %q: ", name) + fmt.Sprintf(format, args...)}
}

// compile checks t and compiles its schema.
func compile(t Tool) (*entry, error) {
	if !ValidName(t.Name) {
		return nil, invalidTool(t.Name, "a tool name is ASCII, dot-separated segments that each start with a lower-case letter, such as \"payments.confirm\", at most %d bytes", MaxNameLength)
	}
	t.Params = slices.Clone(t.Params)
	t.Secret = slices.Clone(t.Secret)
	e := &entry{tool: t, secret: make(map[string]bool, len(t.Secret))}
	for _, s := range t.Secret {
		e.secret[s] = true
	}
	if t.Confirm.fn == nil && t.Confirm.template != "" {
		if blank(t.Confirm.template) {
			return nil, invalidTool(t.Name, "the confirmation template is blank; give a sentence or no confirmation")
		}
		for _, p := range placeholders(t.Confirm.template) {
			if e.secret[p.name] {
				return nil, invalidTool(t.Name, "the confirmation template shows secret param %q; leave it out of the sentence", p.name)
			}
		}
	}
	params := []byte(t.Params)
	if len(bytes.TrimSpace(params)) == 0 {
		params = []byte(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, invalidTool(t.Name, "the params schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	const url = "urn:assent:tool-params"
	if err := c.AddResource(url, doc); err != nil {
		return nil, invalidTool(t.Name, "the params schema is not usable: %v", err)
	}
	e.schema, err = c.Compile(url)
	if err != nil {
		return nil, invalidTool(t.Name, "the params schema is not a valid JSON Schema: %v", err)
	}
	return e, nil
}

// noLoader refuses to load any document a schema refers to, so a schema
// can't make the process read files or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a params schema may not refer to another document (%s); put every definition in $defs", url)
}

// Prepare runs the checks of a press of a button governed by the tool named
// name, with the params the button sends, given the problems of the fields
// those params read (in document order; the caller finds them with the
// parser and [field.Check], and entries with a nil Problem pass). The checks
// run in this order and the first failure is returned:
//
//  1. any field problem: mutation_blocked, with the failing fields and the
//     first one to focus;
//  2. the tool, compared byte for byte: unknown_tool when it isn't
//     registered or has no handler;
//  3. the params against the tool's schema: invalid_params with issues;
//  4. the confirmation sentence: confirmation_failed when it can't be
//     written.
//
// On success it returns a Pending press holding its own copy of the params,
// whose Sentence the person confirms (empty when the tool asks for none).
// Nothing runs until [Pending.Confirm].
func (r *Registry) Prepare(ctx context.Context, name string, params map[string]any, fields []FieldProblem) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e := blocked(name, fields); e != nil {
		return nil, e
	}
	e := r.entry(name)
	if e == nil {
		return nil, &Error{Code: CodeUnknownTool, Tool: name, Message: fmt.Sprintf("no tool named %q is registered (names are compared byte for byte)", name)}
	}
	if e.tool.Handler == nil {
		return nil, &Error{Code: CodeUnknownTool, Tool: name, Message: fmt.Sprintf("tool %q has no handler, so it can't run", name)}
	}
	checked, err := e.check(params)
	if err != nil {
		return nil, err
	}
	// The confirmation gets its own copy, so it can't change what runs.
	view, _ := plainJSON(checked)
	sentence, err := e.tool.Confirm.Sentence(ctx, view.(map[string]any))
	if err != nil {
		return nil, &Error{Code: CodeConfirmationFailed, Tool: name, Message: fmt.Sprintf("the confirmation for %q failed, so nothing runs: %v", name, err), Err: err}
	}
	return &Pending{reg: r, entry: e, params: checked, sentence: sentence, done: make(chan struct{})}, nil
}

// check copies params as plain decoded JSON and checks them against the
// tool's schema.
func (e *entry) check(params map[string]any) (map[string]any, error) {
	invalid := func(issues []ParamIssue) error {
		parts := make([]string, len(issues))
		for i, is := range issues {
			parts[i] = is.Message
			if is.Path != "" {
				parts[i] = is.Path + ": " + is.Message
			}
		}
		return &Error{
			Code:    CodeInvalidParams,
			Tool:    e.tool.Name,
			Message: fmt.Sprintf("the params for %q don't match its schema: %s", e.tool.Name, strings.Join(parts, "; ")),
			Issues:  issues,
		}
	}
	copied := make(map[string]any, len(params))
	var issues []ParamIssue
	for k, v := range params {
		c, err := plainJSON(v)
		if err != nil {
			msg := err.Error()
			if e.secret[k] {
				msg = "the value is not JSON (it is secret, so it isn't shown)"
			}
			issues = append(issues, ParamIssue{Path: k, Message: msg})
			continue
		}
		copied[k] = c
	}
	if len(issues) > 0 {
		sortIssues(issues)
		return nil, invalid(issues)
	}
	err := e.schema.Validate(copied)
	if err == nil {
		return copied, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, invalid([]ParamIssue{{Message: err.Error()}})
	}
	return nil, invalid(e.issues(ve))
}

// issues flattens a validation error into the issues of its innermost
// failures.
func (e *entry) issues(ve *jsonschema.ValidationError) []ParamIssue {
	var out []ParamIssue
	seen := map[ParamIssue]bool{}
	for _, v := range schemaerr.Leaves(ve) {
		is := ParamIssue{Path: strings.Join(v.InstanceLocation, ".")}
		if len(v.InstanceLocation) > 0 && e.secret[v.InstanceLocation[0]] {
			is.Message = "the value doesn't match the schema (it is secret, so it isn't shown)"
			if kw := v.ErrorKind.KeywordPath(); len(kw) > 0 {
				is.Message = fmt.Sprintf("the value fails the schema's %q keyword (it is secret, so it isn't shown)", kw[len(kw)-1])
			}
		} else {
			// A bare error's text is "at '': " and the message; Path
			// already holds the location.
			is.Message = (&jsonschema.ValidationError{ErrorKind: v.ErrorKind}).Error()
			is.Message = strings.TrimPrefix(is.Message, "at '': ")
		}
		if !seen[is] {
			seen[is] = true
			out = append(out, is)
		}
	}
	sortIssues(out)
	return out
}

func sortIssues(issues []ParamIssue) {
	sort.Slice(issues, func(i, j int) bool {
		if issues[i].Path != issues[j].Path {
			return issues[i].Path < issues[j].Path
		}
		return issues[i].Message < issues[j].Message
	})
}

// plainJSON returns a deep copy of v as plain decoded JSON. Values of other
// Go types are converted through encoding/json.
func plainJSON(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", x)
		}
		return x, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%q is not a JSON number that fits in 64 bits", string(x))
		}
		return f, nil
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			c, err := plainJSON(e)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			c, err := plainJSON(e)
			if err != nil {
				return nil, err
			}
			s[i] = c
		}
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the value can't be written as JSON: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("the value can't be read back as JSON: %v", err)
	}
	return out, nil
}

package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/assent-run/assent/internal/schemaerr"
)

// CodeInvalidParams is the code of a refusal of arguments that break the
// tool's input schema.
const CodeInvalidParams = "invalid_params"

// Spec declares a tool whose arguments decode into In. Its input schema is
// derived from In (see SchemaFor for the tags that add constraints).
type Spec[In any] struct {
	Name        string
	Title       string
	Description string
	Annotations Annotations
	Hidden      bool
	Meta        map[string]any
	// Example is the arguments of a valid call: the reference shows it,
	// and the tests call every tool with it.
	Example In
	// Retired maps arguments the tool no longer takes to the hint given
	// when a call sends one.
	Retired map[string]string
	// Unlisted maps an argument to values of its enum the tool accepts
	// but does not list in the input schema it shows: values the tool
	// always refuses to its callers with a refusal that says who may
	// give them, so a caller is not offered what it cannot do.
	Unlisted map[string][]string
	// OutputSchema replaces the schema derived from the answer's type,
	// for an answer that is one of several shapes.
	OutputSchema json.RawMessage
}

// Reply is a typed tool's answer.
type Reply[Out any] struct {
	// Out is returned as structuredContent.
	Out Out
	// Text is the human-readable answer; when empty, the JSON of Out.
	Text string
	// IsError and Decision are as in Result.
	IsError  bool
	Decision string
}

// Answer is the Reply that carries out alone.
func Answer[Out any](out Out) *Reply[Out] { return &Reply[Out]{Out: out} }

// New returns the tool spec declares, answered by h. Before h runs, the
// arguments are checked against the input schema derived from In, and
// every constraint the schema states holds: a refusal is an *Error with
// code "invalid_params" that names the argument at fault. The output
// schema is derived from Out unless spec gives one. A type that has no
// schema, or an example the input schema refuses, makes Registry.Register
// refuse the tool.
func New[In, Out any](spec Spec[In], h func(ctx context.Context, call Call, in In) (*Reply[Out], error)) Tool {
	t := Tool{Name: spec.Name, Title: spec.Title, Description: spec.Description, Annotations: spec.Annotations,
		Hidden: spec.Hidden, Meta: spec.Meta, OutputSchema: spec.OutputSchema}
	in, err := newInput[In](spec.Retired, spec.Unlisted)
	if err != nil {
		t.defect = fmt.Errorf("tool %q: input: %w", spec.Name, err)
		return t
	}
	t.InputSchema = in.listed
	if t.Example, err = json.Marshal(spec.Example); err == nil {
		var ex In
		err = in.decode(t.Example, &ex)
	}
	if err != nil {
		t.defect = fmt.Errorf("tool %q: example: %w", spec.Name, err)
		return t
	}
	if t.OutputSchema == nil {
		s, err := SchemaFor(reflect.TypeFor[Out](), nil)
		if err == nil {
			OpenObjects(s)
			t.OutputSchema, err = json.Marshal(s)
		}
		if err != nil {
			t.defect = fmt.Errorf("tool %q: output: %w", spec.Name, err)
			return t
		}
	}
	t.Handler = func(ctx context.Context, call Call) (*Result, error) {
		var args In
		if err := in.decode(call.Args, &args); err != nil {
			return nil, err
		}
		r, err := h(ctx, call, args)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return &Result{}, nil
		}
		return &Result{Structured: r.Out, Text: r.Text, IsError: r.IsError, Decision: r.Decision}, nil
	}
	return t
}

// input checks and decodes a typed tool's arguments.
type input struct {
	schema   json.RawMessage
	listed   json.RawMessage // schema without the unlisted enum values
	unlisted map[string][]string
	compiled *jsonschema.Schema
	fields   []string // the top-level arguments, in declaration order
	retired  map[string]string
}

func newInput[In any](retired map[string]string, unlisted map[string][]string) (*input, error) {
	t := reflect.TypeFor[In]()
	s, err := SchemaFor(t, nil)
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("arguments of type %v are not a JSON object", t)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	c, err := compileSchema(b)
	if err != nil {
		return nil, err
	}
	listed := b
	if len(unlisted) > 0 {
		for arg, values := range unlisted {
			p := s.Properties[arg]
			if p == nil || len(p.Enum) == 0 {
				return nil, fmt.Errorf("unlisted values of %q: the argument has no enum", arg)
			}
			p.Enum = slices.DeleteFunc(p.Enum, func(v any) bool {
				str, ok := v.(string)
				return ok && slices.Contains(values, str)
			})
		}
		if listed, err = json.Marshal(s); err != nil {
			return nil, err
		}
	}
	return &input{schema: b, listed: listed, unlisted: unlisted, compiled: c, fields: jsonFields(t), retired: retired}, nil
}

// compileSchema compiles a derived schema for validation.
func compileSchema(schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "urn:assent:tool-input"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// decode checks args against the schema and decodes them into v.
func (in *input) decode(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		// The decoder's wording names what is wrong with the JSON.
		return asParams(DecodeArgs(args, v))
	}
	if obj, ok := doc.(map[string]any); ok && len(in.retired) > 0 {
		var gone []string
		var hint string
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if h, ok := in.retired[k]; ok {
				gone, hint = append(gone, k), h
			}
		}
		if len(gone) > 0 {
			e := Errorf(CodeInvalidParams, "%s: %s", strings.Join(gone, ", "), hint)
			e.Data = map[string]any{"field": gone[0]}
			return e
		}
	}
	if err := in.compiled.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return Errorf(CodeInvalidParams, "invalid arguments: %v", err)
		}
		return in.refusal(ve)
	}
	return asParams(DecodeArgs(args, v))
}

// asParams recodes a refusal of DecodeArgs as invalid_params.
func asParams(err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.Code = CodeInvalidParams
	}
	return err
}

// Issue is one way in which arguments break their schema.
type Issue struct {
	// Field is the argument at fault, as a dotted path ("identity.formId");
	// empty for the arguments as a whole.
	Field   string `json:"field"`
	Message string `json:"message"`
}

// refusal turns a validation error into an invalid_params *Error whose
// message is the first issue's and whose data lists them all.
func (in *input) refusal(ve *jsonschema.ValidationError) *Error {
	var issues []Issue
	first := map[string]any{}
	for _, v := range schemaerr.Leaves(ve) {
		is, data := in.issue(v)
		if len(issues) == 0 {
			first = data
		}
		issues = append(issues, is)
	}
	if len(issues) == 0 {
		issues = []Issue{{Message: "the arguments do not match the tool's input schema"}}
	}
	e := Errorf(CodeInvalidParams, "invalid arguments: %s", issues[0].Message)
	first["issues"] = issues
	e.Data = first
	return e
}

// issue describes one innermost validation failure, in JSON's terms, and
// returns the refusal data it gives when it comes first.
func (in *input) issue(v *jsonschema.ValidationError) (Issue, map[string]any) {
	path := strings.Join(v.InstanceLocation, ".")
	field := func(f string) string {
		if path == "" {
			return f
		}
		if f == "" {
			return path
		}
		return path + "." + f
	}
	data := map[string]any{"field": path}
	var msg string
	switch k := v.ErrorKind.(type) {
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = article(w)
		}
		got := k.Got
		if got == "integer" {
			got = "number"
		}
		if path == "" {
			msg = fmt.Sprintf("the arguments must be a JSON object, not %s", article(got))
		} else {
			msg = fmt.Sprintf("%q must be %s, not %s", path, strings.Join(want, " or "), article(got))
		}
		data["expected"], data["got"] = strings.Join(k.Want, ","), got
	case *kind.Required:
		f := field(k.Missing[0])
		msg = fmt.Sprintf("%q is required", f)
		data["field"] = f
	case *kind.AdditionalProperties:
		f := k.Properties[0]
		if path == "" {
			msg = fmt.Sprintf("unknown argument %q; the tool takes %s", f, strings.Join(quoteAll(in.fields), ", "))
			if len(in.fields) == 0 {
				msg = fmt.Sprintf("unknown argument %q; the tool takes no arguments", f)
			}
			data["accepted"] = in.fields
		} else {
			msg = fmt.Sprintf("unknown field %q inside %q; see the tool's input schema", f, path)
		}
		data["field"] = field(f)
	case *kind.Enum:
		want := make([]string, 0, len(k.Want))
		for _, w := range k.Want {
			if str := fmt.Sprint(w); !slices.Contains(in.unlisted[path], str) {
				want = append(want, str)
			}
		}
		msg = fmt.Sprintf("%q must be one of %s", path, strings.Join(quoteAll(want), ", "))
		data["accepted"] = want
	case *kind.MinLength:
		msg = fmt.Sprintf("%q must be at least %d characters long; it has %d", path, k.Want, k.Got)
		if k.Want == 1 {
			msg = fmt.Sprintf("%q must not be empty", path)
		}
	case *kind.MaxLength:
		msg = fmt.Sprintf("%q must be at most %d characters long; it has %d", path, k.Want, k.Got)
	case *kind.MinItems:
		msg = fmt.Sprintf("%q must hold at least %d items; it has %d", path, k.Want, k.Got)
	case *kind.MaxItems:
		msg = fmt.Sprintf("%q must hold at most %d items; it has %d", path, k.Want, k.Got)
	case *kind.Minimum:
		msg = fmt.Sprintf("%q must be at least %s", path, ratString(k.Want))
	case *kind.Maximum:
		msg = fmt.Sprintf("%q must be at most %s", path, ratString(k.Want))
	case *kind.Pattern:
		msg = fmt.Sprintf("%q must match %s", path, k.Want)
	default:
		msg = strings.TrimPrefix((&jsonschema.ValidationError{ErrorKind: v.ErrorKind}).Error(), "at '': ")
		if path != "" {
			msg = fmt.Sprintf("%q: %s", path, msg)
		}
	}
	return Issue{Field: data["field"].(string), Message: msg}, data
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}

package tool

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// SchemaOptions returns the options with which tool schemas are derived
// from Go types: raw JSON is any JSON value. Callers may add their own
// TypeSchemas to the returned value.
func SchemaOptions() *jsonschema.ForOptions {
	return &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {},
	}}
}

// SchemaFor derives the JSON Schema of values of type t. Struct fields
// without omitempty are required, and struct objects take no other
// properties. Besides the jsonschema tag (the description), these field
// tags add constraints to the field's schema:
//
//	type:"string,integer"   the JSON types the field takes (for raw JSON)
//	enum:"a,b,c"            the strings the field takes
//	minLength:"1" maxLength:"128" pattern:"^[a-z]+$"
//	minimum:"0" maximum:"60000"
//	minItems:"1" maxItems:"50"
//
// A type whose JSON is not what its Go shape says (a value that is a
// string or an object, say) implements Schemer to give its own schema.
//
// opts may be nil for SchemaOptions().
func SchemaFor(t reflect.Type, opts *jsonschema.ForOptions) (*jsonschema.Schema, error) {
	if opts == nil {
		opts = SchemaOptions()
	}
	own(t, opts.TypeSchemas, map[reflect.Type]bool{})
	s, err := jsonschema.ForType(t, opts)
	if err != nil {
		return nil, fmt.Errorf("schema of %v: %w", t, err)
	}
	if err := applyTags(t, s, map[reflect.Type]bool{}); err != nil {
		return nil, fmt.Errorf("schema of %v: %w", t, err)
	}
	return s, nil
}

// Schemer is implemented by a type that states its own JSON Schema.
type Schemer interface {
	JSONSchema() *jsonschema.Schema
}

// own adds the schemas of the Schemer types t holds, at any depth, to m.
func own(t reflect.Type, m map[reflect.Type]*jsonschema.Schema, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	if t.Kind() != reflect.Pointer && t.Implements(reflect.TypeFor[Schemer]()) {
		if _, ok := m[t]; !ok {
			m[t] = reflect.Zero(t).Interface().(Schemer).JSONSchema()
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		own(t.Elem(), m, seen)
	case reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			if f.IsExported() {
				own(f.Type, m, seen)
			}
		}
	}
}

// UnionSchema is the schema of an answer that is a value of one of types:
// the schema of the only type, or an object that is any of them. extra
// schemas are added to the choices.
func UnionSchema(opts *jsonschema.ForOptions, types []reflect.Type, extra ...*jsonschema.Schema) (json.RawMessage, error) {
	alts := make([]*jsonschema.Schema, 0, len(types)+len(extra))
	for _, t := range types {
		s, err := SchemaFor(t, opts)
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
	}
	alts = append(alts, extra...)
	root := &jsonschema.Schema{Type: "object"}
	if len(alts) == 1 {
		root = alts[0]
	} else {
		root.AnyOf = alts
	}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	return b, nil
}

// applyTags adds the constraint tags of t's struct fields, at any depth,
// to s, the schema ForType derived for t.
func applyTags(t reflect.Type, s *jsonschema.Schema, seen map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s == nil || seen[t] {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return applyTags(t.Elem(), s.Items, seen)
	case reflect.Map:
		return applyTags(t.Elem(), s.AdditionalProperties, seen)
	case reflect.Struct:
	default:
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ps := s.Properties[name]
		if ps == nil {
			continue
		}
		if err := fieldTags(f, ps); err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		if err := applyTags(f.Type, ps, seen); err != nil {
			return err
		}
	}
	return nil
}

// fieldTags sets the constraints f's tags name on ps.
func fieldTags(f reflect.StructField, ps *jsonschema.Schema) error {
	if v, ok := f.Tag.Lookup("type"); ok {
		types := strings.Split(v, ",")
		ps.Type, ps.Types = "", nil
		if len(types) == 1 {
			ps.Type = types[0]
		} else {
			ps.Types = types
		}
	}
	if v, ok := f.Tag.Lookup("enum"); ok {
		ps.Enum = nil
		for _, e := range strings.Split(v, ",") {
			ps.Enum = append(ps.Enum, e)
		}
	}
	if v, ok := f.Tag.Lookup("pattern"); ok {
		ps.Pattern = v
	}
	for _, k := range []struct {
		tag string
		dst **int
	}{{"minLength", &ps.MinLength}, {"maxLength", &ps.MaxLength}, {"minItems", &ps.MinItems}, {"maxItems", &ps.MaxItems}} {
		if v, ok := f.Tag.Lookup(k.tag); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("tag %s:%q is not a count", k.tag, v)
			}
			*k.dst = &n
		}
	}
	for _, k := range []struct {
		tag string
		dst **float64
	}{{"minimum", &ps.Minimum}, {"maximum", &ps.Maximum}} {
		if v, ok := f.Tag.Lookup(k.tag); ok {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("tag %s:%q is not a number", k.tag, v)
			}
			*k.dst = &x
		}
	}
	return nil
}

// OpenObjects lets every object s describes, at any depth, carry
// properties it does not name, so an answer that gains a field later
// still conforms to the schema a client kept. New opens the output
// schemas it derives.
func OpenObjects(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if s.AdditionalProperties != nil {
		if b, _ := json.Marshal(s.AdditionalProperties); string(b) == "false" {
			s.AdditionalProperties = nil
		}
	}
	for _, p := range s.Properties {
		OpenObjects(p)
	}
	for _, d := range s.Defs {
		OpenObjects(d)
	}
	for _, a := range s.AnyOf {
		OpenObjects(a)
	}
	for _, a := range s.OneOf {
		OpenObjects(a)
	}
	for _, a := range s.AllOf {
		OpenObjects(a)
	}
	OpenObjects(s.Items)
	OpenObjects(s.AdditionalProperties)
}

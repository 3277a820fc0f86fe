package screen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"
)

// Options configures a Parser with what the application allows. The zero
// value allows no tools, no pictures and no app components.
type Options struct {
	// Tools are the names in the app's tool registry. An McpMutation's
	// tool must be one of them exactly ([5.14]).
	Tools []string
	// Assets are the picture names in the app's asset registry ([5.17]).
	Assets []string
	// Components are the app's own components ([5.27]), from
	// DeclareComponent or DeclareComponents.
	Components []*Component
	// Pictures are the app's picture families ([5.30]), from
	// DeclarePictureFamily or DeclarePictures.
	Pictures []*PictureFamily
	// MaxComponents and MaxStateKeys override the format's limits of 1,000
	// ([5.25]) when positive. A conforming client keeps the defaults; the
	// overrides exist for measuring the parser on larger streams.
	MaxComponents int
	MaxStateKeys  int
}

// PropDecl declares one prop of an app component ([5.28]). Its JSON form is
// the one the conformance suite uses, e.g. {"kind": "text", "maxLength": 20}.
type PropDecl struct {
	// Kind is text, number, boolean, oneOf, picture, list or state.
	Kind     string   `json:"kind"`
	Optional bool     `json:"optional,omitempty"`
	State    *bool    `json:"state,omitempty"` // text and number: whether a $key is accepted (default true)
	MinLen   *int     `json:"minLength,omitempty"`
	MaxLen   *int     `json:"maxLength,omitempty"`
	Minimum  *float64 `json:"minimum,omitempty"`
	Maximum  *float64 `json:"maximum,omitempty"`
	Integer  bool     `json:"integer,omitempty"`
	Values   []string `json:"values,omitempty"`   // oneOf
	Item     string   `json:"item,omitempty"`     // list: text or number
	MaxItems *int     `json:"maxItems,omitempty"` // list: 1–50, default 50
	Holds    string   `json:"holds,omitempty"`    // state: text, number or boolean
}

// ComponentDecl declares an app component ([5.27]).
type ComponentDecl struct {
	Description string              `json:"description"`
	Positional  []string            `json:"positional,omitempty"`
	Props       map[string]PropDecl `json:"props"`
	Children    *ChildrenDecl       `json:"children,omitempty"` // nil: no children
	Field       bool                `json:"field,omitempty"`    // edits its value $key
}

// ChildrenDecl says that an app component holds children, and how many.
type ChildrenDecl struct {
	Max int `json:"max"` // 1–200
}

// Component is a checked app component declaration.
type Component struct {
	name        string
	description string
	schema      *compSchema
	field       bool
	holds       holdKind
	pictures    []string // props naming pictures
}

// Name returns the component's name.
func (c *Component) Name() string { return c.name }

// Description returns the one-sentence description for the model.
func (c *Component) Description() string { return c.description }

// IsField reports whether the component edits a $key as a field.
func (c *Component) IsField() bool { return c.field }

// DeclareComponent checks an app component declaration and compiles it.
// A malformed declaration is refused here, never while reading a stream.
func DeclareComponent(name string, d ComponentDecl) (*Component, error) {
	fail := func(format string, args ...any) (*Component, error) {
		return nil, fmt.Errorf("screen: component %q: %s", name, fmt.Sprintf(format, args...))
	}
	if !isAppName(name) {
		return fail("a component name is a capital letter then up to 63 letters and digits")
	}
	if _, ok := builtinComponents[name]; ok || name == "McpMutation" || name == "App" {
		return fail("the name is taken by the catalog; choose another")
	}
	if n := utf8.RuneCountInString(d.Description); n < 1 || utf16Len(d.Description) > 300 {
		return fail("the description must be one sentence of 1 to 300 characters")
	}
	if len(d.Props) > 24 {
		return fail("at most 24 props may be declared")
	}
	c := &Component{name: name, description: d.Description, field: d.Field,
		schema: &compSchema{props: map[string]*schema{}}}
	names := make([]string, 0, len(d.Props))
	for pn := range d.Props {
		names = append(names, pn)
	}
	sort.Strings(names)
	for _, pn := range names {
		p := d.Props[pn]
		if !isAppPropName(pn) {
			return fail("prop %q: a prop name is a lower-case letter then up to 63 letters and digits", pn)
		}
		switch pn {
		case "children", "action", "required", "kind":
			return fail("prop %q can't be declared: children are declared with \"children\", and app components have no action", pn)
		}
		if reservedWords[pn] {
			return fail("prop %q is a reserved word", pn)
		}
		s, err := propSchema(pn, p)
		if err != nil {
			return fail("prop %q: %v", pn, err)
		}
		if p.Kind == "state" {
			c.holds = map[string]holdKind{"text": holdAppText, "number": holdAppNumber, "boolean": holdAppBool}[p.Holds]
		}
		if p.Kind == "picture" {
			c.pictures = append(c.pictures, pn)
		}
		c.schema.props[pn] = s
		if !p.Optional {
			c.schema.required = append(c.schema.required, pn)
		}
	}
	if d.Children != nil {
		if d.Children.Max < 1 || d.Children.Max > maxChildren {
			return fail("children.max must be 1 to %d", maxChildren)
		}
		c.schema.props["children"] = &schema{kind: kindArray, items: &schema{kind: kindRef}, maxItems: d.Children.Max}
	}
	if d.Field {
		if c.holds == 0 {
			return fail("a field must declare the $key it edits as a prop named value of kind state")
		}
		c.schema.props["required"] = &schema{kind: kindBool}
	}
	seen := map[string]bool{}
	for _, pn := range d.Positional {
		if c.schema.props[pn] == nil || pn == "required" {
			return fail("positional prop %q is not declared", pn)
		}
		if seen[pn] {
			return fail("positional prop %q is listed twice", pn)
		}
		seen[pn] = true
	}
	c.schema.positional = append([]string(nil), d.Positional...)
	c.schema.indexPositional()
	return c, nil
}

func propSchema(name string, p PropDecl) (*schema, error) {
	acceptsState := p.State == nil || *p.State
	withState := func(s *schema) *schema {
		if acceptsState {
			return &schema{anyOf: []*schema{s, {kind: kindState}}}
		}
		return s
	}
	switch p.Kind {
	case "text":
		s := &schema{kind: kindString, maxLength: maxText}
		if p.MinLen != nil {
			if *p.MinLen < 0 || *p.MinLen > maxText {
				return nil, fmt.Errorf("minLength must be 0 to %d", maxText)
			}
			s.minLength = *p.MinLen
		}
		if p.MaxLen != nil {
			if *p.MaxLen < 1 || *p.MaxLen > maxText {
				return nil, fmt.Errorf("maxLength must be 1 to %d", maxText)
			}
			s.maxLength = *p.MaxLen
		}
		if s.minLength > s.maxLength {
			return nil, fmt.Errorf("minLength is more than maxLength")
		}
		return withState(s), nil
	case "number":
		s := &schema{kind: kindNumber}
		if p.Integer {
			s.kind = kindInteger
		}
		if p.Minimum != nil {
			s.hasMin, s.min = true, *p.Minimum
		}
		if p.Maximum != nil {
			s.hasMax, s.max = true, *p.Maximum
		}
		if s.hasMin && s.hasMax && s.min > s.max {
			return nil, fmt.Errorf("minimum is more than maximum")
		}
		return withState(s), nil
	case "boolean":
		return &schema{kind: kindBool}, nil
	case "oneOf":
		if len(p.Values) < 1 || len(p.Values) > 50 {
			return nil, fmt.Errorf("oneOf needs 1 to 50 values")
		}
		for _, v := range p.Values {
			if n := utf16Len(v); n < 1 || n > 200 {
				return nil, fmt.Errorf("each oneOf value must be 1 to 200 characters")
			}
		}
		return &schema{kind: kindString, enum: append([]string(nil), p.Values...)}, nil
	case "picture":
		return &schema{kind: kindString, maxLength: 64, pattern: patAsset}, nil
	case "list":
		max := 50
		if p.MaxItems != nil {
			if *p.MaxItems < 1 || *p.MaxItems > 50 {
				return nil, fmt.Errorf("maxItems must be 1 to 50")
			}
			max = *p.MaxItems
		}
		var item *schema
		switch p.Item {
		case "text":
			item = &schema{kind: kindString, maxLength: maxText}
		case "number":
			item = &schema{kind: kindNumber}
		default:
			return nil, fmt.Errorf("a list's item is text or number")
		}
		return &schema{kind: kindArray, items: item, maxItems: max}, nil
	case "state":
		if name != "value" {
			return nil, fmt.Errorf("the $key a component edits must be the prop named value")
		}
		switch p.Holds {
		case "text", "number", "boolean":
		default:
			return nil, fmt.Errorf("holds must be text, number or boolean")
		}
		return &schema{kind: kindState}, nil
	}
	return nil, fmt.Errorf("unknown kind %q; use text, number, boolean, oneOf, picture, list or state", p.Kind)
}

// DeclareComponents reads declarations in their JSON form, an object from
// component name to declaration, and checks each one.
func DeclareComponents(data []byte) ([]*Component, error) {
	var m map[string]ComponentDecl
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("screen: component declarations: %v", err)
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*Component, 0, len(m))
	for _, n := range names {
		c, err := DeclareComponent(n, m[n])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// PictureFamily is a checked family of picture names ([5.30]), such as
// product- followed by digits.
type PictureFamily struct {
	prefix    string
	letters   bool // id of lowercase letters and digits, not digits only
	maxLength int
}

// DeclarePictureFamily checks a family: prefix is lowercase letters, digits
// and hyphens ending in "-"; idKind is "digits" or "letters-digits";
// maxLength (0 for the default 32) bounds the id, and the whole name is at
// most 64 characters.
func DeclarePictureFamily(prefix, idKind string, maxLength int) (*PictureFamily, error) {
	if len(prefix) < 2 || !isAssetName(prefix) || prefix[len(prefix)-1] != '-' {
		return nil, fmt.Errorf("screen: picture family %q: a prefix is lowercase letters, digits and hyphens, ending in -", prefix)
	}
	f := &PictureFamily{prefix: prefix, maxLength: maxLength}
	switch idKind {
	case "digits":
	case "letters-digits":
		f.letters = true
	default:
		return nil, fmt.Errorf("screen: picture family %q: id must be digits or letters-digits", prefix)
	}
	if f.maxLength == 0 {
		f.maxLength = 32
	}
	if f.maxLength < 1 || len(prefix)+f.maxLength > 64 {
		return nil, fmt.Errorf("screen: picture family %q: the prefix and the id's maxLength may total at most 64 characters", prefix)
	}
	return f, nil
}

// DeclarePictures reads families in their JSON form,
// [{"prefix": "item-", "id": "digits", "maxLength": 6}, …].
func DeclarePictures(data []byte) ([]*PictureFamily, error) {
	var list []struct {
		Prefix    string `json:"prefix"`
		ID        string `json:"id"`
		MaxLength int    `json:"maxLength"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("screen: picture families: %v", err)
	}
	out := make([]*PictureFamily, 0, len(list))
	for _, p := range list {
		f, err := DeclarePictureFamily(p.Prefix, p.ID, p.MaxLength)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Match reports whether name belongs to the family.
func (f *PictureFamily) Match(name string) bool {
	if len(name) <= len(f.prefix) || name[:len(f.prefix)] != f.prefix {
		return false
	}
	id := name[len(f.prefix):]
	if len(id) > f.maxLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !isDigit(c) && !(f.letters && c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

func isAppName(s string) bool {
	if len(s) < 1 || len(s) > 64 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)) {
			return false
		}
	}
	return true
}

func isAppPropName(s string) bool {
	if len(s) < 1 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)) {
			return false
		}
	}
	return true
}

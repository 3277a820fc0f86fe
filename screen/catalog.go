package screen

//go:generate go run ./internal/gencatalog ../../shared/omni-ir/conformance/schema.json

import (
	"math"
	"regexp"
)

// kind is the JSON type a schema accepts, with the two object shapes the
// catalog uses for references spelled out.
type kind uint8

const (
	kindString kind = iota + 1
	kindNumber
	kindInteger
	kindBool
	kindNull
	kindState // a $key
	kindRef   // a component id (children lists and McpMutation targets)
	kindArray
	kindObject // McpMutation params
)

// pattern names one of the regular expressions the catalog uses; each has a
// hand-written matcher so that checking a line needs no regexp engine.
type pattern uint8

const (
	patNone pattern = iota
	patIdent
	patStateKey
	patAsset
	patAction
	patTool
	patDate
	patCurrency
)

// schema is the part of JSON Schema the catalog needs. Zero values mean
// "no constraint" (no catalog bound is zero).
type schema struct {
	anyOf []*schema

	kind      kind
	minLength int // UTF-16 code units
	maxLength int
	pattern   pattern
	re        *regexp.Regexp
	enum      []string
	enumVals  []Value // enum's members boxed once, so that props share them
	hasConst  bool
	constNum  float64
	hasMin    bool
	min       float64
	hasMax    bool
	max       float64
	minItems  int
	maxItems  int
	items     *schema
	keys      *schema // object property names
	values    *schema // object property values
}

// boxString returns str as a Value, sharing the boxed member of s's enum
// it equals, if any, rather than boxing it again.
func (s *schema) boxString(str string) Value {
	for i, e := range s.enum {
		if e == str && i < len(s.enumVals) {
			return s.enumVals[i]
		}
	}
	return str
}

func init() {
	box := func(cs *compSchema) {
		cs.indexPositional()
		for _, s := range cs.props {
			s.enumVals = make([]Value, len(s.enum))
			for i, e := range s.enum {
				s.enumVals[i] = e
			}
		}
	}
	for _, cs := range builtinComponents {
		box(cs)
	}
	box(mutationSchema)
}

// compSchema describes one component's props.
type compSchema struct {
	positional []string
	required   []string
	props      map[string]*schema
	posSchemas []*schema // the schemas of positional, in order, when indexed
}

// indexPositional looks up the schemas of the positional props once, so
// that reading a positional argument needs no map lookup.
func (cs *compSchema) indexPositional() {
	cs.posSchemas = make([]*schema, len(cs.positional))
	for i, name := range cs.positional {
		cs.posSchemas[i] = cs.props[name]
	}
}

// issueInfo is a row of the issue table (SPEC 7.4).
type issueInfo struct {
	severity Severity
	stage    string // line, end, renderer or update
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isIdent reports whether s is an ASCII identifier.
func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

// isLowerIdent matches [a-z][A-Za-z0-9_]*.
func isLowerIdent(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

// isToolName matches ^[a-z][A-Za-z0-9_]*(\.[a-z][A-Za-z0-9_]*)+$.
func isToolName(s string) bool {
	segs := 0
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !isLowerIdent(s[start:i]) {
				return false
			}
			segs++
			start = i + 1
		}
	}
	return segs >= 2
}

// isAssetName matches ^[a-z0-9][a-z0-9-]*$.
func isAssetName(s string) bool {
	if s == "" || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || isDigit(c) || c == '-') {
			return false
		}
	}
	return true
}

// isDate matches ^\d{4}-\d{2}-\d{2}$ (ASCII digits).
func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i, c := range []byte(s) {
		if i == 4 || i == 7 {
			continue
		}
		if !isDigit(c) {
			return false
		}
	}
	return true
}

func (p pattern) match(s string) bool {
	switch p {
	case patIdent:
		return isIdent(s)
	case patStateKey:
		return len(s) > 1 && s[0] == '$' && isIdent(s[1:])
	case patAsset:
		return isAssetName(s)
	case patAction:
		return isLowerIdent(s)
	case patTool:
		return isToolName(s)
	case patDate:
		return isDate(s)
	case patCurrency:
		if len(s) != 3 {
			return false
		}
		for i := 0; i < 3; i++ {
			if s[i] < 'A' || s[i] > 'Z' {
				return false
			}
		}
		return true
	}
	return true
}

// check reports whether v satisfies s.
func (s *schema) check(v Value) bool {
	if s.anyOf != nil {
		for _, a := range s.anyOf {
			if a.check(v) {
				return true
			}
		}
		return false
	}
	switch s.kind {
	case kindString:
		str, ok := v.(string)
		if !ok {
			return false
		}
		if s.minLength > 0 || s.maxLength > 0 {
			n := utf16Len(str)
			if n < s.minLength || (s.maxLength > 0 && n > s.maxLength) {
				return false
			}
		}
		if s.pattern != patNone && !s.pattern.match(str) {
			return false
		}
		if s.re != nil && !s.re.MatchString(str) {
			return false
		}
		if s.enum != nil {
			found := false
			for _, e := range s.enum {
				if e == str {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	case kindNumber, kindInteger:
		n, ok := v.(float64)
		if !ok || math.IsInf(n, 0) || math.IsNaN(n) {
			return false
		}
		if s.kind == kindInteger && n != math.Trunc(n) {
			return false
		}
		if s.hasConst && n != s.constNum {
			return false
		}
		if (s.hasMin && n < s.min) || (s.hasMax && n > s.max) {
			return false
		}
		return true
	case kindBool:
		_, ok := v.(bool)
		return ok
	case kindNull:
		return v == nil
	case kindState:
		_, ok := v.(StateRef)
		return ok
	case kindRef:
		_, ok := v.(ref)
		return ok
	case kindArray:
		if ids, ok := v.(refList); ok {
			if len(ids) < s.minItems || (s.maxItems > 0 && len(ids) > s.maxItems) {
				return false
			}
			return s.items == nil || s.items.kind == kindRef
		}
		list, ok := v.([]Value)
		if !ok {
			return false
		}
		if len(list) < s.minItems || (s.maxItems > 0 && len(list) > s.maxItems) {
			return false
		}
		if s.items != nil {
			for _, it := range list {
				if !s.items.check(it) {
					return false
				}
			}
		}
		return true
	case kindObject:
		obj, ok := v.(map[string]Value)
		if !ok {
			return false
		}
		for k, x := range obj {
			if s.keys != nil && !s.keys.check(k) {
				return false
			}
			if s.values != nil && !s.values.check(x) {
				return false
			}
		}
		return true
	}
	return false
}

// utf16Len counts s in UTF-16 code units, the unit of every text limit.
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x80:
			n++
		case c >= 0xF0:
			n += 2 // a four-byte sequence is a surrogate pair
			i += 3
		case c >= 0xE0:
			n++
			i += 2
		case c >= 0xC0:
			n++
			i++
		default:
			n++ // stray continuation byte; strings here are valid UTF-8
		}
	}
	return n
}

package screen

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tables returns, as JSON, what a second reader of the format needs to
// check a stream exactly as this package does: the built-in catalog and
// the McpMutation's props (as schemas), the limits, the reserved words and
// each issue code's severity. The screen view's script reads these rather
// than a copy of its own, so the two readers cannot disagree about them.
func Tables() []byte {
	comps := make(map[string]any, len(builtinComponents))
	for name, cs := range builtinComponents {
		comps[name] = cs.table()
	}
	reserved := make([]string, 0, len(reservedWords))
	for w := range reservedWords {
		reserved = append(reserved, w)
	}
	sort.Strings(reserved)
	sev := make(map[string]Severity, len(issueTable))
	for code, info := range issueTable {
		sev[code] = info.severity
	}
	b, err := json.Marshal(map[string]any{
		"format":     catalogFormat,
		"components": comps,
		"mutation":   mutationSchema.table(),
		"reserved":   reserved,
		"severity":   sev,
		"limits": map[string]int{
			"line":        maxLineLength,
			"nesting":     maxNesting,
			"id":          maxIDLength,
			"stateKey":    maxStateKeyLength,
			"text":        maxText,
			"components":  maxComponents,
			"stateKeys":   maxStateKeys,
			"children":    maxChildren,
			"updateLines": maxUpdateLines,
		},
	})
	if err != nil {
		panic(err) // the tables are plain values
	}
	return b
}

func (cs *compSchema) table() map[string]any {
	props := make(map[string]any, len(cs.props))
	for n, s := range cs.props {
		props[n] = s.table()
	}
	return map[string]any{"positional": nonNil(cs.positional), "required": nonNil(cs.required), "props": props}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

var kindNames = map[kind]string{
	kindString: "string", kindNumber: "number", kindInteger: "integer", kindBool: "bool",
	kindNull: "null", kindState: "state", kindRef: "ref", kindArray: "array", kindObject: "object",
}

var patternNames = map[pattern]string{
	patIdent: "ident", patStateKey: "stateKey", patAsset: "asset", patAction: "action",
	patTool: "tool", patDate: "date", patCurrency: "currency",
}

// table writes a schema with only the constraints it has.
func (s *schema) table() map[string]any {
	if s == nil {
		return nil
	}
	t := map[string]any{}
	if s.anyOf != nil {
		alts := make([]any, len(s.anyOf))
		for i, a := range s.anyOf {
			alts[i] = a.table()
		}
		t["anyOf"] = alts
		return t
	}
	t["kind"] = kindNames[s.kind]
	if s.minLength > 0 {
		t["minLength"] = s.minLength
	}
	if s.maxLength > 0 {
		t["maxLength"] = s.maxLength
	}
	if s.pattern != patNone {
		t["pattern"] = patternNames[s.pattern]
	}
	if s.enum != nil {
		t["enum"] = s.enum
	}
	if s.hasConst {
		t["const"] = s.constNum
	}
	if s.hasMin {
		t["min"] = s.min
	}
	if s.hasMax {
		t["max"] = s.max
	}
	if s.minItems > 0 {
		t["minItems"] = s.minItems
	}
	if s.maxItems > 0 {
		t["maxItems"] = s.maxItems
	}
	if s.items != nil {
		t["items"] = s.items.table()
	}
	if s.keys != nil {
		t["keys"] = s.keys.table()
	}
	if s.values != nil {
		t["values"] = s.values.table()
	}
	return t
}

// CatalogText describes each built-in component's props in one line, for a
// model writing a screen: its positional props in order, then every prop
// with what it takes, and the props it needs.
func CatalogText() string {
	names := make([]string, 0, len(builtinComponents))
	for n := range builtinComponents {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		cs := builtinComponents[n]
		b.WriteString(n + "(" + strings.Join(cs.positional, ", ") + ")")
		props := make([]string, 0, len(cs.props))
		for p := range cs.props {
			props = append(props, p)
		}
		sort.Strings(props)
		if len(props) > 0 {
			parts := make([]string, len(props))
			for i, p := range props {
				parts[i] = p + ": " + cs.props[p].brief()
			}
			b.WriteString(" props " + strings.Join(parts, "; "))
		}
		if len(cs.required) > 0 {
			b.WriteString("; needs " + strings.Join(cs.required, ", "))
		}
		b.WriteString(".\n")
	}
	b.WriteString("McpMutation(target) props target: a Button's id; tool: a tool name below; params: {key: value or $key, …}; needs target, tool.\n")
	return b.String()
}

// brief says in a few words what a schema takes.
func (s *schema) brief() string {
	if s.anyOf != nil {
		parts := make([]string, len(s.anyOf))
		for i, a := range s.anyOf {
			parts[i] = a.brief()
		}
		return strings.Join(parts, " or ")
	}
	switch s.kind {
	case kindString:
		if s.enum != nil {
			return strings.Join(s.enum, "|")
		}
		switch s.pattern {
		case patAsset:
			return "picture name"
		case patAction:
			return "action name"
		case patDate:
			return "YYYY-MM-DD"
		case patCurrency:
			return "currency code"
		}
		return "text"
	case kindNumber:
		if s.hasConst {
			return strconv.FormatFloat(s.constNum, 'f', -1, 64)
		}
		return "number"
	case kindInteger:
		if s.hasMin && s.hasMax {
			return fmt.Sprintf("%v-%v", s.min, s.max)
		}
		return "whole number"
	case kindBool:
		return "true|false"
	case kindState:
		return "$key"
	case kindRef:
		return "id"
	case kindArray:
		if s.items != nil && s.items.kind == kindRef {
			return "[ids]"
		}
		if s.items != nil {
			return "[" + s.items.brief() + ", …]"
		}
		return "[…]"
	case kindObject:
		return "{key: value or $key}"
	}
	return "value"
}

package screen

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Describe writes a plain-text outline of a screen, for a model to read or
// for a log: one component per line, indented two spaces per level, starting
// at root. A Stack only arranges its children and adds no line of its own.
// A reference that has not arrived shows as [loading] while the stream is
// open and [missing] once it has ended.
//
// The values of $keys that a field edits are the person's and show as
// [hidden] unless values is true; then each field also shows its current
// value. Text from the stream has every run of white space collapsed to one
// space, so nothing in a stream can start a new line of the outline.
func Describe(doc *Document, values bool) string {
	if doc == nil {
		return ""
	}
	doc.nodesReady()
	d := describer{doc: doc, values: values, seen: map[string]bool{}}
	d.walk(rootID, 0)
	return strings.TrimSuffix(d.b.String(), "\n")
}

type describer struct {
	doc    *Document
	values bool
	seen   map[string]bool
	b      strings.Builder
}

func (d *describer) line(depth int, s string) {
	for i := 0; i < depth; i++ {
		d.b.WriteString("  ")
	}
	d.b.WriteString(s)
	d.b.WriteByte('\n')
}

func (d *describer) walk(id string, depth int) {
	s := d.doc.idx.get(id)
	if s == nil || s.node == nil {
		if d.doc.ended || (s != nil && s.node == nil) {
			d.line(depth, "[missing]")
		} else {
			d.line(depth, "[loading]")
		}
		return
	}
	if d.seen[id] {
		return
	}
	d.seen[id] = true
	n := s.node
	next := depth + 1
	if n.Type == "Stack" && !n.App {
		next = depth
	} else {
		d.line(depth, d.describe(s))
	}
	for _, c := range n.Children {
		d.walk(c, next)
	}
}

// text renders a prop for the outline: "" when absent.
func (d *describer) text(v Value) string {
	if k, ok := v.(StateRef); ok {
		if !d.values && len(d.doc.idx.editors[string(k)]) > 0 {
			return "[hidden]"
		}
		st := d.doc.idx.state[string(k)]
		if st == nil {
			if d.doc.ended {
				return "[missing]"
			}
			return "[loading]"
		}
		v = st.value
	}
	return plain(v)
}

// plain renders a literal value on one line.
func plain(v Value) string {
	switch x := v.(type) {
	case string:
		return oneLine(x)
	case float64:
		return jsNumber(x)
	case bool:
		return strconv.FormatBool(x)
	case []Value:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = plain(e)
		}
		return strings.Join(parts, ", ")
	}
	return ""
}

func (d *describer) prop(n *Node, name string) string { return d.text(n.Props[name]) }

func details(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return ""
	}
	return " (" + strings.Join(keep, ", ") + ")"
}

func withLabel(kind, label string) string {
	if label == "" {
		return kind
	}
	return kind + ": " + label
}

func (d *describer) describe(s *stmt) string {
	n := s.node
	if n.App {
		return d.describeApp(s)
	}
	var out string
	switch n.Type {
	case "Card":
		out = withLabel("Card", d.prop(n, "title"))
	case "Heading", "Badge", "Tab":
		key := "text"
		if n.Type == "Tab" {
			key = "label"
		}
		out = n.Type + ": " + d.prop(n, key)
	case "Text":
		out = "Text: " + d.prop(n, "text") + details(d.prop(n, "format"), d.prop(n, "currency"))
	case "Input":
		var parts []string
		if n.Props["required"] == true {
			parts = append(parts, "required")
		}
		parts = append(parts, d.prop(n, "format"))
		if v, ok := n.Props["minLength"].(float64); ok {
			parts = append(parts, "at least "+jsNumber(v)+" characters")
		}
		if v, ok := n.Props["maxLength"].(float64); ok {
			parts = append(parts, "at most "+jsNumber(v)+" characters")
		}
		out = "Input: " + d.prop(n, "label") + details(parts...)
	case "DateInput":
		var parts []string
		if n.Props["required"] == true {
			parts = append(parts, "required")
		}
		if v := d.prop(n, "min"); v != "" {
			parts = append(parts, "from "+v)
		}
		if v := d.prop(n, "max"); v != "" {
			parts = append(parts, "until "+v)
		}
		out = "DateInput: " + d.prop(n, "label") + details(parts...)
	case "Select":
		var parts []string
		if n.Props["required"] == true {
			parts = append(parts, "required")
		}
		parts = append(parts, "options: "+d.prop(n, "options"))
		out = "Select: " + d.prop(n, "label") + " (" + strings.Join(parts, "; ") + ")"
	case "Switch":
		out = "Switch: " + d.prop(n, "label")
		if n.Props["required"] == true {
			out += " (required)"
		}
	case "Button":
		out = "Button: " + d.prop(n, "label")
		if s.hasAction() {
			if m := d.doc.idx.mutByTarget[n.ID]; m != nil {
				out += " (action: " + m.mut.Tool + ")"
			}
		}
	case "Image":
		out = "Image: " + d.prop(n, "alt")
	case "Rating":
		max := "5"
		if _, ok := n.Props["max"]; ok {
			max = d.prop(n, "max")
		}
		out = "Rating: " + d.prop(n, "value") + " out of " + max
	case "ListItem":
		var parts []string
		for _, k := range []string{"title", "detail", "trailing"} {
			if _, ok := n.Props[k]; ok {
				parts = append(parts, d.prop(n, k))
			}
		}
		out = "Item: " + strings.Join(parts, " · ")
	case "Message":
		out = "Message from " + d.prop(n, "from") + ": " + d.prop(n, "text")
	case "Table":
		out = "Table: " + joinPlain(n.Props["columns"], " | ")
	case "TableRow":
		out = "Row: " + joinPlain(n.Props["cells"], " | ")
	case "Notice":
		out = "Notice"
		if t := d.prop(n, "tone"); t != "" {
			out += " (" + t + ")"
		}
		out += ": "
		if _, ok := n.Props["title"]; ok {
			out += d.prop(n, "title") + ": "
		}
		out += d.prop(n, "text")
	case "BarChart", "LineChart":
		out = n.Type + ": " + d.prop(n, "title") + " (labels: " + d.prop(n, "labels") + ")"
	case "PieChart":
		out = "PieChart: " + d.prop(n, "title")
	case "Series":
		out = "Series: " + d.prop(n, "name") + ": " + d.prop(n, "values")
	case "Slice":
		out = "Slice: " + d.prop(n, "name") + ": " + d.prop(n, "value")
	default: // Divider, Skeleton, List, Tabs
		out = n.Type
	}
	return out + d.fieldValue(s)
}

func joinPlain(v Value, sep string) string {
	list, _ := v.([]Value)
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = plain(e)
	}
	return strings.Join(parts, sep)
}

// fieldValue appends a field's current value when values are asked for.
func (d *describer) fieldValue(s *stmt) string {
	if !d.values || s.edits == "" {
		return ""
	}
	st := d.doc.idx.state[s.edits]
	if st == nil {
		return ""
	}
	switch x := st.value.(type) {
	case string:
		return " = " + jsonQuote(oneLine(x))
	case float64:
		return " = " + jsNumber(x)
	case bool:
		if s.node.Type == "Switch" || s.holds == holdAppBool {
			if x {
				return " = on"
			}
			return " = off"
		}
		return " = " + strconv.FormatBool(x)
	}
	return ""
}

func (d *describer) describeApp(s *stmt) string {
	n := s.node
	sch := s.app.schema
	// The first text or $key prop, in positional then name order, heads
	// the line.
	order := append([]string(nil), sch.positional...)
	order = append(order, sortedPropNames(sch)...)
	head := ""
	used := map[string]bool{"children": true, "required": true, "value": s.edits != ""}
	for _, k := range order {
		if used[k] {
			continue
		}
		switch n.Props[k].(type) {
		case string, StateRef:
			head = d.prop(n, k)
			used[k] = true
		}
		if head != "" {
			break
		}
	}
	var parts []string
	if n.Props["required"] == true {
		parts = append(parts, "required")
	}
	for _, k := range sortedPropNames(sch) {
		if used[k] {
			continue
		}
		if v, ok := n.Props[k]; ok {
			parts = append(parts, k+": "+d.text(v))
		}
	}
	return withLabel(n.Type, head) + details(parts...) + d.fieldValue(s)
}

func sortedPropNames(sch *compSchema) []string {
	names := make([]string, 0, len(sch.props))
	for k := range sch.props {
		names = append(names, k)
	}
	return sortedUnique(names)
}

// oneLine collapses every run of white space to one space and trims the
// ends, so that stream text never breaks a line of the outline.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if isJSSpace(r) || r == '\u0085' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

func jsonQuote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// jsNumber writes a number as JavaScript's String(n) does, so outlines match
// the other implementations: 42.5, -150, 1e+21, 1e-7.
func jsNumber(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	if math.IsInf(f, 0) {
		if f > 0 {
			return "Infinity"
		}
		return "-Infinity"
	}
	if f == 0 {
		return "0"
	}
	sign := ""
	if f < 0 {
		sign = "-"
		f = -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k := len(digits)
	n := x + 1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	es := "+"
	if n-1 < 0 {
		es = "-"
	}
	m := digits[:1]
	if k > 1 {
		m += "." + digits[1:]
	}
	return sign + m + "e" + es + strconv.Itoa(abs(n-1))
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

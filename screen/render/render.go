// Package render turns a screen document into the view model a renderer
// draws, and draws it as HTML.
//
// The model ([Node]) holds only plain text: every value a stream wrote is a
// string that the template escapes, and a $key marked secret is never in it.
// The web UI draws screens with this model and template; the screen view
// (package screen/view) draws the same markup with its own script, so a
// screen looks alike in both.
package render

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/field"
)

// The renderer's own words. They are plain text, never the stream's.
const (
	WordLoading      = "Loading"
	WordMissing      = "Component failed to load"
	WordFailedRender = "Component failed to render"
	WordUnsupported  = "This part of the screen can't be shown here."
	WordBlocked      = "This can't be sent. Check the details and try again."
	WordNewerVersion = "This screen was written for a newer version of the app. Update the app to see all of it."
	WordHidden       = "••••••"
)

// maxDepth bounds the depth the renderer walks (the document rules already
// forbid cycles).
const maxDepth = 64

// Options tells [Build] what it cannot read from the document.
type Options struct {
	// Secret lists the $keys whose values are secret: their fields are
	// drawn empty and their text as [WordHidden].
	Secret map[string]bool
	// Tool reports whether a governed Button's tool is registered; a
	// Button whose tool is not is drawn blocked. Nil blocks every one.
	Tool func(name string) bool
	// Picture returns the address of the app's picture name, or "" when
	// there is none. Nil draws every Image as its alt text.
	Picture func(name string) template.URL
	// Message returns the message a field shows now (its problem, once
	// the person has left it), or "".
	Message func(n *screen.Node, key string) string
	// OnPanic is told of a component that failed to draw; the component
	// is drawn as a fallback and the rest of the screen is drawn.
	OnPanic func(n *screen.Node, recovered any)
}

// View is a whole screen, drawn.
type View struct {
	Root *Node
	// Fields are the field nodes in the order they were drawn.
	Fields []*Node
	// Title is the text of the screen's first Heading.
	Title string
	Ended bool
	// Newer holds the notice shown when the stream declared a newer
	// format.
	Newer string
	// Rejected counts the lines that were rejected.
	Rejected int
}

// Build draws doc. The caller holds whatever lock guards doc.
func Build(doc *screen.Document, opt Options) *View {
	b := &builder{opt: opt, doc: doc, secret: opt.Secret, seen: map[string]bool{}}
	v := &View{Ended: doc.Ended(), Title: Title(doc)}
	if doc.NewerVersion() {
		v.Newer = WordNewerVersion
	}
	v.Root = b.child("root", 0)
	v.Fields = b.fields
	for _, is := range doc.Issues() {
		if is.Severity == screen.SeverityError {
			v.Rejected++
		}
	}
	return v
}

// Title returns the text of the document's first Heading, or "Untitled
// screen".
func Title(d *screen.Document) string {
	for _, n := range d.Nodes() {
		if n.Type == "Heading" {
			if t, ok := n.Props["text"].(string); ok && strings.TrimSpace(t) != "" {
				return strings.Join(strings.Fields(t), " ")
			}
		}
	}
	return "Untitled screen"
}

//go:embed node.tmpl
var templateFS embed.FS

// Template is the text of the templates "node", "field" and "chart", which
// draw a [Node]; add it to a page's template set to draw screens there.
var Template = func() string {
	b, err := templateFS.ReadFile("node.tmpl")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

var nodeTemplate = template.Must(template.New("screen").Parse(Template))

// WriteHTML draws n as HTML, as the web UI draws it.
func WriteHTML(w io.Writer, n *Node) error {
	return nodeTemplate.ExecuteTemplate(w, "node", n)
}

// Node is one component as the template draws it. Every string in it
// is plain text, escaped by html/template.
type Node struct {
	ID, Type string
	// Slot is "" for a drawn component, "pending" for a placeholder and
	// "missing" for a fallback.
	Slot     string
	Children []*Node

	Text, Title, Label, Detail, Trailing, Placeholder string
	Tone, Variant, Direction, Gap, Align, Ratio       string
	Level                                             int
	From                                              string

	// Fields.
	Key, Value, InputType, InputMode, Min, Max string
	Lines, MinLength, MaxLength                int
	Required, Checked, Secret                  bool
	Options                                    []Option
	Message                                    string
	Staged                                     *Staged

	// Buttons.
	Action            string
	Governed, Blocked bool

	// Images: the picture's address, empty when the app has no picture
	// of that name (the alt text is shown instead).
	Src template.URL

	// Tables, charts, ratings, skeletons.
	Columns []string
	Cells   []Cell
	Chart   *Chart
	Count   []int
}

// Option is one choice of a Select.
type Option struct {
	Value    string
	Selected bool
}

// Cell is one cell of a TableRow.
type Cell struct {
	Text   string
	Number bool
}

// Staged is an agent's proposal for a field, with the person's Apply
// and Discard.
type Staged struct {
	Value, By, Revision           string
	Stale                         bool
	FormID, ControlID, CSRF, Back string
}

// builder walks a document.
type builder struct {
	opt    Options
	doc    *screen.Document
	secret map[string]bool
	seen   map[string]bool
	fields []*Node
}

// child draws the component id: a placeholder while it is pending, a
// fallback once it is missing.
func (b *builder) child(id string, depth int) *Node {
	n := b.doc.Node(id)
	if n == nil || b.seen[id] || depth > maxDepth {
		return b.slot(id)
	}
	for _, v := range n.Props {
		if ref, ok := v.(screen.StateRef); ok {
			if _, declared := b.doc.State(string(ref)); !declared {
				return b.slot(id)
			}
		}
	}
	b.seen[id] = true
	return b.safeNode(n, depth)
}

// safeNode draws n; a component that fails to draw becomes a fallback in its
// own place, and the rest of the screen is drawn.
func (b *builder) safeNode(n *screen.Node, depth int) (v *Node) {
	defer func() {
		if r := recover(); r != nil {
			if b.opt.OnPanic != nil {
				b.opt.OnPanic(n, r)
			}
			v = &Node{ID: n.ID, Slot: "failed", Text: WordFailedRender}
		}
	}()
	return b.node(n, depth)
}

func (b *builder) slot(id string) *Node {
	if b.doc.Ended() {
		return &Node{ID: id, Slot: "missing", Text: WordMissing}
	}
	return &Node{ID: id, Slot: "pending", Text: WordLoading}
}

func (b *builder) children(n *screen.Node, depth int) []*Node {
	out := make([]*Node, 0, len(n.Children))
	for _, c := range n.Children {
		out = append(out, b.child(c, depth+1))
	}
	return out
}

// text returns a prop as plain text, with a $key replaced by its value.
func (b *builder) text(v screen.Value) string {
	if ref, ok := v.(screen.StateRef); ok {
		if b.secret[string(ref)] {
			return WordHidden
		}
		v, _ = b.doc.State(string(ref))
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return field.FormatValue(v)
}

func (b *builder) str(n *screen.Node, prop string) string { return b.text(n.Props[prop]) }

func (b *builder) num(n *screen.Node, prop string) (float64, bool) {
	v := n.Props[prop]
	if ref, ok := v.(screen.StateRef); ok {
		v, _ = b.doc.State(string(ref))
	}
	f, ok := v.(float64)
	return f, ok
}

func (b *builder) node(n *screen.Node, depth int) *Node {
	v := &Node{ID: n.ID, Type: n.Type}
	if n.App {
		v.Type, v.Slot, v.Text = "App", "unsupported", WordUnsupported
		return v
	}
	switch n.Type {
	case "Stack":
		v.Direction, v.Gap, v.Align = b.str(n, "direction"), b.str(n, "gap"), b.str(n, "align")
		v.Children = b.children(n, depth)
	case "Card":
		v.Title = b.str(n, "title")
		v.Children = b.children(n, depth)
	case "Heading":
		v.Text = b.str(n, "text")
		v.Level = 1
		if l, ok := b.num(n, "level"); ok {
			v.Level = int(l)
		}
	case "Text":
		v.Tone = b.str(n, "tone")
		v.Text = b.formatText(n)
	case "Button":
		v.Label, v.Variant, v.Action = b.str(n, "label"), b.str(n, "variant"), b.str(n, "action")
		if v.Action != "" {
			m := b.doc.Mutation(n.ID)
			v.Governed = m != nil
			if m != nil {
				if b.opt.Tool == nil || !b.opt.Tool(m.Tool) {
					v.Blocked, v.Text = true, WordBlocked
				}
			}
		}
	case "Divider":
	case "Badge":
		v.Text, v.Tone = b.str(n, "text"), b.str(n, "tone")
	case "Skeleton":
		lines := 3
		if l, ok := b.num(n, "lines"); ok {
			lines = int(l)
		}
		v.Count = make([]int, lines)
		v.Text = WordLoading
	case "Image":
		v.Text, v.Ratio = b.str(n, "alt"), strings.ReplaceAll(b.str(n, "ratio"), ":", "-")
		if v.Ratio == "" {
			v.Ratio = "16-9"
		}
		if name, _ := n.Props["asset"].(string); name != "" && b.opt.Picture != nil {
			v.Src = b.opt.Picture(name)
		}
	case "Rating":
		val, _ := b.num(n, "value")
		max := 5.0
		if m, ok := b.num(n, "max"); ok {
			max = m
		}
		v.Text = field.FillTemplate("Rated {value} out of {max}", map[string]any{"value": val, "max": max})
		full := int(math.Floor(math.Max(0, math.Min(val, max))))
		v.Count = make([]int, int(max))
		for i := range v.Count {
			if i < full {
				v.Count[i] = 1
			}
		}
	case "List", "Tabs":
		v.Children = b.children(n, depth)
	case "ListItem":
		v.Title, v.Detail, v.Trailing = b.str(n, "title"), b.str(n, "detail"), b.str(n, "trailing")
	case "Message":
		v.Text, v.From = b.str(n, "text"), b.str(n, "from")
		v.Label = "Assistant"
		if v.From == "user" {
			v.Label = "You"
		}
	case "Tab":
		v.Label = b.str(n, "label")
		v.Children = b.children(n, depth)
	case "Notice":
		v.Text, v.Tone, v.Title = b.str(n, "text"), b.str(n, "tone"), b.str(n, "title")
		if v.Tone == "" {
			v.Tone = "info"
		}
	case "Table":
		v.Columns = textList(n.Props["columns"])
		v.Children = b.children(n, depth)
	case "TableRow":
		if cells, ok := n.Props["cells"].([]screen.Value); ok {
			for _, c := range cells {
				_, isNum := c.(float64)
				v.Cells = append(v.Cells, Cell{Text: b.text(c), Number: isNum})
			}
		}
	case "BarChart", "LineChart", "PieChart":
		v.Chart = b.chart(n, depth)
		v.Title = b.str(n, "title")
	case "Input", "DateInput", "Select", "Switch":
		b.field(n, v)
	default:
		v.Slot, v.Text = "unsupported", WordUnsupported
	}
	return v
}

func textList(v screen.Value) []string {
	list, _ := v.([]screen.Value)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		} else {
			out = append(out, field.FormatValue(x))
		}
	}
	return out
}

// formatText writes a Text's text, as money or a date when its format asks.
func (b *builder) formatText(n *screen.Node) string {
	raw := n.Props["text"]
	if ref, ok := raw.(screen.StateRef); ok && !b.secret[string(ref)] {
		raw, _ = b.doc.State(string(ref))
	}
	switch b.str(n, "format") {
	case "currency":
		if f, ok := raw.(float64); ok {
			return Money(f, b.str(n, "currency"))
		}
	case "date":
		if s, ok := raw.(string); ok {
			if t, err := time.Parse("2006-01-02", strings.TrimSpace(s)); err == nil {
				return t.Format("January 2, 2006")
			}
		}
	}
	return b.str(n, "text")
}

// Money formats an amount in a currency (USD when none is given).
func Money(f float64, cur string) string {
	if cur == "" {
		cur = "USD"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	s := strconv.FormatFloat(f, 'f', 2, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var g strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			g.WriteByte(',')
		}
		g.WriteRune(r)
	}
	amount := g.String() + "." + frac
	symbols := map[string]string{"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}
	if sym, ok := symbols[cur]; ok {
		return sign + sym + amount
	}
	return sign + amount + " " + cur
}

// secretSetPlaceholder is what a secret field that holds a value shows
// instead of the value.
const secretSetPlaceholder = "••••••• (set)"

// field fills a field's view: its value, constraints, message and kind.
func (b *builder) field(n *screen.Node, v *Node) {
	key := b.doc.Edits(n.ID)
	v.Key = key
	v.Label = b.str(n, "label")
	v.Placeholder = b.str(n, "placeholder")
	v.Required = n.Props["required"] == true
	v.Secret = b.secret[key]
	val, _ := b.doc.State(key)
	switch n.Type {
	case "Input":
		v.Value, _ = val.(string)
		v.InputType = "text"
		switch n.Props["format"] {
		case "email":
			v.InputType = "email"
		case "url":
			v.InputType = "url"
		case "phone":
			v.InputType = "tel"
		case "number":
			v.InputMode = "decimal"
		}
		if l, ok := b.num(n, "lines"); ok && l > 1 {
			v.Lines = int(l)
		}
		if l, ok := b.num(n, "minLength"); ok {
			v.MinLength = int(l)
		}
		if l, ok := b.num(n, "maxLength"); ok {
			v.MaxLength = int(l)
		}
		if v.Secret {
			// A secret is never sent back to a browser: the field is
			// drawn empty, and its placeholder says whether it is set.
			v.InputType, v.Lines = "password", 0
			if v.Value != "" {
				v.Placeholder = secretSetPlaceholder
			}
			v.Value = ""
		}
	case "DateInput":
		v.Value, _ = val.(string)
		v.Min, v.Max = b.str(n, "min"), b.str(n, "max")
	case "Select":
		cur, _ := val.(string)
		for _, o := range textList(n.Props["options"]) {
			v.Options = append(v.Options, Option{Value: o, Selected: o == cur})
		}
	case "Switch":
		v.Checked = val == true
	}
	if b.opt.Message != nil {
		v.Message = b.opt.Message(n, key)
	}
	b.fields = append(b.fields, v)
}

// Chart is a chart drawn as SVG shapes whose sizes are attributes (no
// styles), with its values also in a table for assistive technology.
type Chart struct {
	Kind    string
	Labels  []string
	Series  []Series
	Bars    []Bar
	Slices  []Slice
	Legend  bool
	Width   int
	Height  int
	Pending int
}

// Series is one series of a chart, with its values as text.
type Series struct {
	Name, Class, Points string
	Values              []string
}

// Bar is one bar of a BarChart.
type Bar struct {
	X, Y, W, H int
	Class      string
	Title      string
}

// Slice is one slice of a PieChart.
type Slice struct {
	Name, Value, Class, Path string
}

const (
	chartW = 560
	chartH = 220
)

func (b *builder) chart(n *screen.Node, depth int) *Chart {
	cv := &Chart{Kind: n.Type, Labels: textList(n.Props["labels"]), Width: chartW, Height: chartH}
	format, cur := b.str(n, "format"), b.str(n, "currency")
	show := func(f float64) string {
		switch format {
		case "currency":
			return Money(f, cur)
		case "percent":
			return field.FormatValue(f) + "%"
		}
		return field.FormatValue(f)
	}
	type ser struct {
		name string
		vals []float64
	}
	var series []ser
	for _, c := range n.Children {
		cn := b.doc.Node(c)
		if cn == nil {
			cv.Pending++
			continue
		}
		b.seen[c] = true
		name, _ := cn.Props["name"].(string)
		switch cn.Type {
		case "Series":
			var vals []float64
			for _, x := range asList(cn.Props["values"]) {
				f, _ := x.(float64)
				vals = append(vals, f)
			}
			series = append(series, ser{name, vals})
		case "Slice":
			f, _ := cn.Props["value"].(float64)
			series = append(series, ser{name, []float64{f}})
		}
	}
	max := 0.0
	for _, s := range series {
		for _, f := range s.vals {
			max = math.Max(max, f)
		}
	}
	if max == 0 {
		max = 1
	}
	for i, s := range series {
		sv := Series{Name: s.name, Class: fmt.Sprintf("c%d", i%8+1)}
		for _, f := range s.vals {
			sv.Values = append(sv.Values, show(f))
		}
		cv.Series = append(cv.Series, sv)
	}
	switch n.Type {
	case "BarChart":
		cv.Legend = len(series) >= 2
		groups := max1(len(cv.Labels))
		gw := chartW / groups
		bw := (gw - 12) / max1(len(series))
		for si, s := range series {
			for li, f := range s.vals {
				h := int(f / max * float64(chartH-10))
				cv.Bars = append(cv.Bars, Bar{X: li*gw + 6 + si*bw, Y: chartH - h, W: max1(bw - 2), H: h, Class: cv.Series[si].Class, Title: s.name + ": " + show(f)})
			}
		}
	case "LineChart":
		cv.Legend = len(series) >= 2
		step := float64(chartW-20) / float64(max1(len(cv.Labels)-1))
		for si, s := range series {
			var pts []string
			for li, f := range s.vals {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", 10+float64(li)*step, float64(chartH)-f/max*float64(chartH-10)))
			}
			cv.Series[si].Points = strings.Join(pts, " ")
		}
	case "PieChart":
		cv.Legend = len(series) > 0
		total := 0.0
		for _, s := range series {
			total += s.vals[0]
		}
		start := -math.Pi / 2
		cx, cy, r := float64(chartH)/2, float64(chartH)/2, float64(chartH)/2-5
		for i, s := range series {
			sv := Slice{Name: s.name, Value: show(s.vals[0]), Class: cv.Series[i].Class}
			if total > 0 && s.vals[0] > 0 {
				a := s.vals[0] / total * 2 * math.Pi
				if a >= 2*math.Pi-1e-9 {
					sv.Path = fmt.Sprintf("M %.1f %.1f m -%.1f 0 a %.1f %.1f 0 1 0 %.1f 0 a %.1f %.1f 0 1 0 -%.1f 0", cx, cy, r, r, r, 2*r, r, r, 2*r)
				} else {
					large := 0
					if a > math.Pi {
						large = 1
					}
					x1, y1 := cx+r*math.Cos(start), cy+r*math.Sin(start)
					x2, y2 := cx+r*math.Cos(start+a), cy+r*math.Sin(start+a)
					sv.Path = fmt.Sprintf("M %.1f %.1f L %.1f %.1f A %.1f %.1f 0 %d 1 %.1f %.1f Z", cx, cy, x1, y1, r, r, large, x2, y2)
				}
				start += a
			}
			cv.Slices = append(cv.Slices, sv)
		}
	}
	return cv
}

func asList(v screen.Value) []screen.Value {
	l, _ := v.([]screen.Value)
	return l
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

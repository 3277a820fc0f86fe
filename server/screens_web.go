package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/field"
)

// The renderer's own words. They are plain text, never the stream's.
const (
	wordLoading      = "Loading"
	wordMissing      = "Component failed to load"
	wordFailedRender = "Component failed to render"
	wordUnsupported  = "This part of the screen can't be shown here."
	wordBlocked      = "This can't be sent. Check the details and try again."
	wordFailed       = "The action failed. Nothing was changed that you can see; try again."
	wordNewerVersion = "This screen was written for a newer version of the app. Update the app to see all of it."
	wordHidden       = "••••••"
)

// maxRenderDepth bounds the depth the renderer walks (the document rules
// already forbid cycles).
const maxRenderDepth = 64

func (s *Server) routesScreensWeb(mux *http.ServeMux) {
	mux.Handle("GET /screens", s.webPage(s.handleScreensPage))
	mux.Handle("GET /screens/{id}", s.webPage(s.handleScreenPage))
	mux.Handle("POST /screens/{id}/state", s.webPage(s.handleScreenState))
	mux.Handle("POST /screens/{id}/press", s.webPage(s.handleScreenPress))
	mux.Handle("POST /screens/{id}/confirm", s.webPage(s.handleScreenConfirm))
	mux.Handle("POST /screens/{id}/cancel", s.webPage(s.handleScreenCancel))
	mux.Handle("GET /screen-pictures/{name}", s.webPage(s.handlePicture))
}

// screenListItem is one row of the screens page.
type screenListItem struct {
	ID, Title, Owner, Created string
	Components                int
	Ended                     bool
}

func (s *Server) handleScreensPage(w http.ResponseWriter, r *http.Request, pg page) {
	names := s.principalNames(r.Context())
	var items []screenListItem
	for _, sc := range s.visibleScreens(*pg.Principal) {
		sc.mu.Lock()
		title := screenTitle(sc.doc)
		n := len(sc.doc.Nodes())
		ended := sc.doc.Ended()
		sc.mu.Unlock()
		owner := sc.owner.Name
		if n, ok := names[sc.owner.ID]; ok {
			owner = n
		}
		items = append(items, screenListItem{ID: sc.id, Title: title, Owner: owner, Created: sc.created.UTC().Format(time.RFC3339), Components: n, Ended: ended})
	}
	pg.Title = "Screens"
	pg.Data = map[string]any{"Screens": items}
	if r.URL.Query().Get("partial") == "1" {
		s.web.renderPartial(w, "screens", "screen-list", pg)
		return
	}
	s.web.render(w, http.StatusOK, "screens", pg)
}

// screenTitle is the text of the screen's first Heading, or "Untitled
// screen".
func screenTitle(d *screen.Document) string {
	for _, n := range d.Nodes() {
		if n.Type == "Heading" {
			if t, ok := n.Props["text"].(string); ok && strings.TrimSpace(t) != "" {
				return oneLine(t)
			}
		}
	}
	return "Untitled screen"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (s *Server) handleScreenPage(w http.ResponseWriter, r *http.Request, pg page) {
	sc, ok := s.screenFor(*pg.Principal, r.PathValue("id"))
	if !ok {
		pg.Title = "Screen not found"
		pg.Data = &screenView{NotFound: true}
		s.web.render(w, http.StatusNotFound, "screen", pg)
		return
	}
	view := s.buildScreenView(r.Context(), sc, pg.CSRF)
	pg.Title = view.Title
	pg.Data = view
	if r.URL.Query().Get("partial") == "1" {
		s.web.renderPartial(w, "screen", "screen-region", pg)
		return
	}
	s.web.render(w, http.StatusOK, "screen", pg)
}

// screenView is what the screen template draws.
type screenView struct {
	ID, Title, Owner string
	Version          int64
	Ended            bool
	NotFound         bool
	// Newer holds the notice shown when the stream declared a newer format.
	Newer    string
	Root     *nodeView
	Rejected int
	// Marks is a JSON object mapping the element id of each field an
	// agent highlighted to the milliseconds its highlight has left.
	Marks string
}

// nodeView is one component as the template draws it. Every string in it
// is plain text, escaped by html/template.
type nodeView struct {
	ID, Type string
	// Slot is "" for a drawn component, "pending" for a placeholder and
	// "missing" for a fallback.
	Slot     string
	Children []*nodeView

	Text, Title, Label, Detail, Trailing, Placeholder string
	Tone, Variant, Direction, Gap, Align, Ratio       string
	Level                                             int
	From                                              string

	// Fields.
	Key, Value, InputType, InputMode, Min, Max string
	Lines, MinLength, MaxLength                int
	Required, Checked, Secret                  bool
	Options                                    []optionView
	Message                                    string
	Staged                                     *stagedView

	// Buttons.
	Action            string
	Governed, Blocked bool

	// Images: the registered picture's name, empty when the registry
	// does not have it (the alt text is shown instead).
	Src string

	// Tables, charts, ratings, skeletons.
	Columns []string
	Cells   []cellView
	Chart   *chartView
	Count   []int
}

type optionView struct {
	Value    string
	Selected bool
}

type cellView struct {
	Text   string
	Number bool
}

// stagedView is an agent's proposal for a field, with the person's Apply
// and Discard.
type stagedView struct {
	Value, By, Revision           string
	Stale                         bool
	FormID, ControlID, CSRF, Back string
}

// buildScreenView draws the document into views: under the screen's lock,
// then the proposals staged on its fields (which read the screen again
// through their handles, so after the lock is released).
func (s *Server) buildScreenView(ctx context.Context, sc *liveScreen, csrf string) *screenView {
	sc.mu.Lock()
	b := &viewBuilder{s: s, sc: sc, doc: sc.doc, secret: s.secretKeysLocked(sc), seen: map[string]bool{}}
	v := &screenView{ID: sc.id, Owner: sc.owner.Name, Version: sc.version, Ended: sc.doc.Ended(), Title: screenTitle(sc.doc)}
	if sc.doc.NewerVersion() {
		v.Newer = wordNewerVersion
	}
	v.Root = b.child("root", 0)
	if marks := markedFields(sc.marks, time.Now()); len(marks) > 0 {
		b, _ := json.Marshal(marks)
		v.Marks = string(b)
	}
	for _, is := range sc.doc.Issues() {
		if is.Severity == screen.SeverityError {
			v.Rejected++
		}
	}
	sc.mu.Unlock()
	if len(b.fields) > 0 {
		names := s.principalNames(ctx)
		for _, nv := range b.fields {
			snap, ok := s.controls.Get(ctx, control.Identity{FormID: sc.id, ControlID: nv.ID})
			if !ok || snap.State.Staged == nil {
				continue
			}
			st := snap.State
			nv.Staged = &stagedView{
				Value:    displayValue(st.StagedValue, st.StagedValueRedacted || st.ValueRedacted || nv.Secret),
				By:       fmt.Sprintf("%s (%s)", nameOr(names, st.Staged.Provenance.PrincipalID), st.Staged.Provenance.Source),
				Revision: strconv.FormatInt(st.Staged.Revision, 10),
				Stale:    st.Staged.Stale,
				FormID:   sc.id, ControlID: nv.ID, CSRF: csrf, Back: "/screens/" + sc.id,
			}
		}
	}
	return v
}

// viewBuilder walks a document; the screen's lock is held.
type viewBuilder struct {
	s      *Server
	sc     *liveScreen
	doc    *screen.Document
	secret map[string]bool
	seen   map[string]bool
	fields []*nodeView
}

// child draws the component id: a placeholder while it is pending, a
// fallback once it is missing.
func (b *viewBuilder) child(id string, depth int) *nodeView {
	n := b.doc.Node(id)
	if n == nil || b.seen[id] || depth > maxRenderDepth {
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
func (b *viewBuilder) safeNode(n *screen.Node, depth int) (v *nodeView) {
	defer func() {
		if r := recover(); r != nil {
			b.s.log.Error("a screen component failed to draw", "screen", b.sc.id, "component", n.ID, "type", n.Type, "panic", fmt.Sprint(r))
			v = &nodeView{ID: n.ID, Slot: "failed", Text: wordFailedRender}
		}
	}()
	return b.node(n, depth)
}

func (b *viewBuilder) slot(id string) *nodeView {
	if b.doc.Ended() {
		return &nodeView{ID: id, Slot: "missing", Text: wordMissing}
	}
	return &nodeView{ID: id, Slot: "pending", Text: wordLoading}
}

func (b *viewBuilder) children(n *screen.Node, depth int) []*nodeView {
	out := make([]*nodeView, 0, len(n.Children))
	for _, c := range n.Children {
		out = append(out, b.child(c, depth+1))
	}
	return out
}

// text returns a prop as plain text, with a $key replaced by its value.
func (b *viewBuilder) text(v screen.Value) string {
	if ref, ok := v.(screen.StateRef); ok {
		if b.secret[string(ref)] {
			return wordHidden
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

func (b *viewBuilder) str(n *screen.Node, prop string) string { return b.text(n.Props[prop]) }

func (b *viewBuilder) num(n *screen.Node, prop string) (float64, bool) {
	v := n.Props[prop]
	if ref, ok := v.(screen.StateRef); ok {
		v, _ = b.doc.State(string(ref))
	}
	f, ok := v.(float64)
	return f, ok
}

func (b *viewBuilder) node(n *screen.Node, depth int) *nodeView {
	v := &nodeView{ID: n.ID, Type: n.Type}
	if n.App {
		v.Type, v.Slot, v.Text = "App", "unsupported", wordUnsupported
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
				if _, ok := b.s.screenTools.Lookup(m.Tool); !ok {
					v.Blocked, v.Text = true, wordBlocked
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
		v.Text = wordLoading
	case "Image":
		v.Text, v.Ratio = b.str(n, "alt"), strings.ReplaceAll(b.str(n, "ratio"), ":", "-")
		if v.Ratio == "" {
			v.Ratio = "16-9"
		}
		if name, _ := n.Props["asset"].(string); b.s.hasPicture(name) {
			v.Src = name
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
				v.Cells = append(v.Cells, cellView{Text: b.text(c), Number: isNum})
			}
		}
	case "BarChart", "LineChart", "PieChart":
		v.Chart = b.chart(n, depth)
		v.Title = b.str(n, "title")
	case "Input", "DateInput", "Select", "Switch":
		b.field(n, v)
	default:
		v.Slot, v.Text = "unsupported", wordUnsupported
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
func (b *viewBuilder) formatText(n *screen.Node) string {
	raw := n.Props["text"]
	if ref, ok := raw.(screen.StateRef); ok && !b.secret[string(ref)] {
		raw, _ = b.doc.State(string(ref))
	}
	switch b.str(n, "format") {
	case "currency":
		if f, ok := raw.(float64); ok {
			return money(f, b.str(n, "currency"))
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

// money formats an amount in a currency (USD when none is given).
func money(f float64, cur string) string {
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
func (b *viewBuilder) field(n *screen.Node, v *nodeView) {
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
			v.Options = append(v.Options, optionView{Value: o, Selected: o == cur})
		}
	case "Switch":
		v.Checked = val == true
	}
	f := fieldInfo{id: n.ID, typ: n.Type, key: key, props: n.Props}
	if p := b.sc.problemLocked(f); p != nil && b.sc.touched[n.ID] {
		v.Message = b.s.screenMessages.Text(p)
	}
	b.fields = append(b.fields, v)
}

// chartView is a chart drawn as SVG shapes whose sizes are attributes (no
// styles), with its values also in a table for assistive technology.
type chartView struct {
	Kind    string
	Labels  []string
	Series  []seriesView
	Bars    []barView
	Slices  []sliceView
	Legend  bool
	Width   int
	Height  int
	Pending int
}

type seriesView struct {
	Name, Class, Points string
	Values              []string
}

type barView struct {
	X, Y, W, H int
	Class      string
	Title      string
}

type sliceView struct {
	Name, Value, Class, Path string
}

const (
	chartW = 560
	chartH = 220
)

func (b *viewBuilder) chart(n *screen.Node, depth int) *chartView {
	cv := &chartView{Kind: n.Type, Labels: textList(n.Props["labels"]), Width: chartW, Height: chartH}
	format, cur := b.str(n, "format"), b.str(n, "currency")
	show := func(f float64) string {
		switch format {
		case "currency":
			return money(f, cur)
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
		sv := seriesView{Name: s.name, Class: fmt.Sprintf("c%d", i%8+1)}
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
				cv.Bars = append(cv.Bars, barView{X: li*gw + 6 + si*bw, Y: chartH - h, W: max1(bw - 2), H: h, Class: cv.Series[si].Class, Title: s.name + ": " + show(f)})
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
			sv := sliceView{Name: s.name, Value: show(s.vals[0]), Class: cv.Series[i].Class}
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

// handleScreenState records what the person typed or chose in a field, and
// whether they left it (so its message shows from then on). It answers with
// the field's message, in the runtime's words, or none.
func (s *Server) handleScreenState(w http.ResponseWriter, r *http.Request, pg page) {
	sc, ok := s.screenFor(*pg.Principal, r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such screen is open for you")
		return
	}
	var req struct {
		Field   string `json:"field"`
		Value   any    `json:"value"`
		Touched bool   `json:"touched"`
	}
	if !decodeJSON(w, r, 64<<10, &req) {
		return
	}
	sc.mu.Lock()
	var f *fieldInfo
	for _, fi := range sc.fieldsLocked() {
		if fi.id == req.Field {
			f = &fi
			break
		}
	}
	if f == nil || sc.closed {
		sc.mu.Unlock()
		writeError(w, http.StatusNotFound, "not_found", "the screen has no such field")
		return
	}
	if err := checkFieldValue(f.typ, req.Value); err != nil {
		sc.mu.Unlock()
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	err := sc.doc.SetState(f.key, req.Value)
	if req.Touched {
		sc.touched[f.id] = true
	}
	p := sc.problemLocked(*f)
	msg := ""
	if sc.touched[f.id] && p != nil {
		msg = s.screenMessages.Text(p)
	}
	redraw := shownElsewhereLocked(sc.doc, f.id, f.key)
	sc.bumpLocked()
	v := sc.version
	sc.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	s.publishScreen(sc, map[string]any{"screen": sc.id, "version": v})
	writeJSON(w, http.StatusOK, map[string]any{"message": msg, "invalid": msg != "", "version": v, "redraw": redraw})
}

// shownElsewhereLocked reports whether a component other than the field
// fieldID shows key, so the page that typed it must redraw; the screen's lock
// is held.
func shownElsewhereLocked(d *screen.Document, fieldID, key string) bool {
	for _, n := range d.Nodes() {
		if n.ID == fieldID {
			continue
		}
		for _, v := range n.Props {
			if ref, ok := v.(screen.StateRef); ok && string(ref) == key {
				return true
			}
		}
	}
	return false
}

// handleScreenPress runs a person's press of a governed Button: the fields
// its params read, then the tool and params against the registry, then the
// application's confirmation (answered with the sentence for the runtime's
// own dialog), and only then the handler.
func (s *Server) handleScreenPress(w http.ResponseWriter, r *http.Request, pg page) {
	sc, ok := s.screenFor(*pg.Principal, r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such screen is open for you")
		return
	}
	var req struct {
		Button string `json:"button"`
	}
	if !decodeJSON(w, r, 4<<10, &req) {
		return
	}
	sc.mu.Lock()
	n := sc.doc.Node(req.Button)
	m := sc.doc.Mutation(req.Button)
	if n == nil || n.Type != "Button" || m == nil || sc.closed {
		sc.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"status": "refused", "message": wordBlocked})
		return
	}
	if a, _ := n.Props["action"].(string); a == "" {
		sc.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"status": "refused", "message": wordBlocked})
		return
	}
	var problems []confirm.FieldProblem
	for _, fn := range sc.doc.FieldsReadBy(m) {
		f := fieldInfo{id: fn.ID, typ: fn.Type, key: sc.doc.Edits(fn.ID), app: fn.App, props: fn.Props}
		p := sc.problemLocked(f)
		problems = append(problems, confirm.FieldProblem{FieldID: fn.ID, Problem: p})
		if p != nil {
			sc.touched[fn.ID] = true
		}
	}
	params := make(map[string]any, len(m.Params))
	for k, v := range m.Params {
		if ref, ok := v.(screen.StateRef); ok {
			v, _ = sc.doc.State(string(ref))
		}
		params[k] = v
	}
	display := shownParams(sc.doc, m.Params, params)
	toolName := m.Tool
	sc.bumpLocked()
	sc.mu.Unlock()

	pend, err := s.screenTools.Prepare(confirm.WithDisplay(r.Context(), display), toolName, params, problems)
	if err == nil {
		if e := s.checkAccess(*pg.Principal, toolName); e != nil {
			pend.Cancel()
			err = &confirm.Error{Code: confirm.CodeUnknownTool, Tool: toolName, Message: e.Message}
		}
	}
	if err != nil {
		ce, _ := err.(*confirm.Error)
		if ce != nil && ce.Code == confirm.CodeMutationBlocked {
			s.publishScreen(sc, map[string]any{"screen": sc.id})
			writeJSON(w, http.StatusOK, map[string]any{"status": "blocked", "focus": ce.Focus})
			return
		}
		code := "tool_failed"
		if ce != nil {
			code = ce.Code
		}
		s.log.Warn("screen press blocked", "screen", sc.id, "button", req.Button, "tool", toolName, "code", code)
		writeJSON(w, http.StatusOK, map[string]any{"status": "refused", "message": wordBlocked})
		return
	}
	if !pend.NeedsConfirmation() {
		s.finishPress(r.Context(), w, sc, req.Button, pend)
		return
	}
	id := newPressID()
	sc.mu.Lock()
	if len(sc.presses) >= maxPendingPresses {
		for k, old := range sc.presses {
			old.pending.Cancel()
			delete(sc.presses, k)
			break
		}
	}
	sc.presses[id] = &pendingPress{button: req.Button, pending: pend}
	sc.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"status": "confirm", "press": id, "sentence": pend.Sentence()})
}

func newPressID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// takePress removes and returns the press id waiting on sc.
func (sc *liveScreen) takePress(id string) *pendingPress {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	pp := sc.presses[id]
	delete(sc.presses, id)
	return pp
}

// handleScreenConfirm is the person's Confirm in the runtime's dialog.
func (s *Server) handleScreenConfirm(w http.ResponseWriter, r *http.Request, pg page) {
	sc, pp := s.pressOf(w, r, pg)
	if pp == nil {
		return
	}
	s.finishPress(r.Context(), w, sc, pp.button, pp.pending)
}

// handleScreenCancel is the person's Cancel: nothing runs.
func (s *Server) handleScreenCancel(w http.ResponseWriter, r *http.Request, pg page) {
	_, pp := s.pressOf(w, r, pg)
	if pp == nil {
		return
	}
	pp.pending.Cancel()
	writeJSON(w, http.StatusOK, map[string]any{"status": "cancelled"})
}

func (s *Server) pressOf(w http.ResponseWriter, r *http.Request, pg page) (*liveScreen, *pendingPress) {
	sc, ok := s.screenFor(*pg.Principal, r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such screen is open for you")
		return nil, nil
	}
	var req struct {
		Press string `json:"press"`
	}
	if !decodeJSON(w, r, 4<<10, &req) {
		return nil, nil
	}
	pp := sc.takePress(req.Press)
	if pp == nil {
		writeError(w, http.StatusNotFound, "not_found", "that press is no longer waiting; press the button again")
		return nil, nil
	}
	return sc, pp
}

// finishPress runs the handler once and applies its update to the screen.
func (s *Server) finishPress(ctx context.Context, w http.ResponseWriter, sc *liveScreen, button string, pend *confirm.Pending) {
	res, err := pend.Confirm(ctx)
	if err != nil {
		code := "tool_failed"
		if ce, ok := err.(*confirm.Error); ok {
			code = ce.Code
		}
		s.log.Warn("screen press failed", "screen", sc.id, "button", button, "tool", pend.Tool(), "code", code)
		writeJSON(w, http.StatusOK, map[string]any{"status": "failed", "message": wordFailed})
		return
	}
	if res.Update != "" {
		if _, err := s.applyUpdate(sc, res.Update); err != nil {
			s.log.Warn("screen update from a press failed", "screen", sc.id, "tool", pend.Tool(), "err", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "done"})
}

// shownParams returns, for each param bound to a state value that the
// screen shows as money, the text the screen shows, so the confirmation
// sentence reads like the screen.
func shownParams(doc *screen.Document, raw map[string]any, params map[string]any) map[string]string {
	var out map[string]string
	for k, v := range raw {
		ref, ok := v.(screen.StateRef)
		if !ok {
			continue
		}
		f, ok := params[k].(float64)
		if !ok {
			continue
		}
		for _, n := range doc.Nodes() {
			if n.Props["format"] != "currency" {
				continue
			}
			if r, ok := n.Props["text"].(screen.StateRef); !ok || r != ref {
				if doc.Edits(n.ID) != string(ref) {
					continue
				}
			}
			cur, _ := n.Props["currency"].(string)
			if out == nil {
				out = map[string]string{}
			}
			out[k] = money(f, cur)
			break
		}
	}
	return out
}

// markedFields returns the element id of each field whose highlight is
// still on at now, with the milliseconds it has left.
func markedFields(marks map[string]time.Time, now time.Time) map[string]int64 {
	var out map[string]int64
	for id, until := range marks {
		if left := until.Sub(now).Milliseconds(); left > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out["n-"+id] = left
		}
	}
	return out
}

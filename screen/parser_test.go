package screen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// feed parses b in pieces of n bytes (all at once when n <= 0).
func feed(b []byte, n int, opts Options) *Document {
	p := NewParser(opts)
	if n <= 0 {
		n = len(b) + 1
	}
	for i := 0; i < len(b); i += n {
		_, _ = p.Write(b[i:min(i+n, len(b))])
	}
	return p.End()
}

func snapshot(t testing.TB, d *Document) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Doc    *Document
		Issues []string
	}{d, issueStrings(d.Issues())})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func issueStrings(issues []Issue) []string {
	out := make([]string, len(issues))
	for i, is := range issues {
		out[i] = fmt.Sprintf("%d:%s:%s:%s", is.Line, is.Code, is.Severity, is.ID)
	}
	return out
}

func TestUTF8Decoding(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // the text of root
	}{
		{"valid", "caf\u00e9 \u2615 \U0001F600", "caf\u00e9 \u2615 \U0001F600"},
		{"lone continuation", "a\x80b", "a\uFFFDb"},
		{"truncated three-byte", "a\xe2\x82b", "a\uFFFDb"},
		{"invalid lead", "a\xffb", "a\uFFFDb"},
		{"overlong", "a\xc0\xafb", "a\uFFFD\uFFFDb"},
		{"surrogate", "a\xed\xa0\x80b", "a\uFFFD\uFFFD\uFFFDb"},
		{"too high", "a\xf4\x90\x80\x80b", "a\uFFFD\uFFFD\uFFFD\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte("root = Text(\"" + tt.in + "\")\n")
			var first string
			for _, n := range []int{0, 1, 2, 3, 5, 13} {
				doc := feed(in, n, Options{})
				root := doc.Root()
				if root == nil {
					t.Fatalf("chunk %d: no root; issues %v", n, doc.Issues())
				}
				if got := root.Props["text"]; got != tt.want {
					t.Errorf("chunk %d: text = %q, want %q", n, got, tt.want)
				}
				s := snapshot(t, doc)
				if first == "" {
					first = s
				} else if s != first {
					t.Errorf("chunk %d gives a different document", n)
				}
			}
		})
	}
	// A byte order mark at the start is dropped, so line 1 can still be a
	// version marker; anywhere else U+FEFF is kept.
	for _, n := range []int{0, 1, 2} {
		doc := feed([]byte("\xef\xbb\xbf# omni-ir 9.0\nroot = Text(\"\xef\xbb\xbf\")\n"), n, Options{})
		if !doc.NewerVersion() || doc.Root() == nil || doc.Root().Props["text"] != "\uFEFF" {
			t.Errorf("chunk %d: BOM handling: newer=%v issues %v", n, doc.NewerVersion(), doc.Issues())
		}
	}
	// An incomplete character at the very end of the stream is one U+FFFD.
	doc := feed([]byte("root = Divider()\n$x = 1 # \xe2\x82"), 1, Options{})
	if len(doc.Issues()) != 0 {
		t.Errorf("issues %v", doc.Issues())
	}
}

func TestLineLength(t *testing.T) {
	line := func(units int, astral bool) string {
		// "root = Divider() #" is 18 units before the comment's text.
		n := units - 18
		if astral {
			return "root = Divider() #" + strings.Repeat("\U0001F600", n/2) + strings.Repeat("x", n%2)
		}
		return "root = Divider() #" + strings.Repeat("x", n)
	}
	tests := []struct {
		name    string
		in      string
		tooLong bool
	}{
		{"at limit", line(maxLineLength, false) + "\n", false},
		{"at limit crlf", line(maxLineLength, false) + "\r\n", false},
		{"at limit no newline", line(maxLineLength, false), false},
		{"at limit trailing cr at end", line(maxLineLength, false) + "\r", false},
		{"over limit", line(maxLineLength+1, false) + "\n", true},
		{"astral at limit", line(maxLineLength, true) + "\n", false},
		{"astral over limit", line(maxLineLength+2, true) + "\n", true},
		{"cr inside counts", line(maxLineLength, false) + "\rx\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 7} {
				doc := feed([]byte("t = Divider()\n"+tt.in), n, Options{})
				var codes []string
				for _, i := range doc.Issues() {
					codes = append(codes, fmt.Sprintf("%d:%s", i.Line, i.Code))
				}
				got := strings.Join(codes, ",")
				want := ""
				if tt.tooLong {
					want = "2:line_too_long,0:missing_root"
				}
				if got != want {
					t.Errorf("chunk %d: issues %q, want %q", n, got, want)
				}
				if doc.Node("t") == nil || (doc.Root() == nil) != tt.tooLong {
					t.Errorf("chunk %d: root accepted = %v", n, doc.Root() != nil)
				}
			}
		})
	}
}

func TestLongLineNotBuffered(t *testing.T) {
	p := NewParser(Options{})
	chunk := []byte(strings.Repeat("x", 64<<10))
	_, _ = p.WriteString("root = Text(\"")
	for i := 0; i < 64; i++ { // 4 MiB on one line
		_, _ = p.Write(chunk)
	}
	if c := cap(p.lr.buf); c > 4*maxLineLength+64 {
		t.Errorf("line buffer grew to %d bytes while discarding", c)
	}
	_, _ = p.WriteString("\")\nroot = Divider()\n")
	doc := p.End()
	n := 0
	for _, i := range doc.Issues() {
		if i.Code == "line_too_long" {
			n++
			if i.Line != 1 {
				t.Errorf("line_too_long on line %d, want 1", i.Line)
			}
		}
	}
	if n != 1 {
		t.Errorf("line_too_long reported %d times, want once", n)
	}
	if doc.Root() == nil {
		t.Error("line 2 was not processed")
	}
}

func TestVersionMarker(t *testing.T) {
	tests := []struct {
		line  string
		newer bool
	}{
		{"# omni-ir 0.8", false},
		{"# omni-ir 0.08", false},
		{"# omni-ir 00.9", true},
		{"#omni-ir 1.0", true},
		{"\t# omni-ir\t0.10 \t", true},
		{"# omni-ir 0.7", false},
		{"# omni-ir 0.6", false},
		{"# omni-ir 0.5", false},
		{"# omni-ir 1", false},
		{"# omni-ir 1.", false},
		{"# omni-ir .9", false},
		{"# omni-ir 1.0x", false},
		{"# omni-ir １.0", false},
		{"## omni-ir 9.9", false},
	}
	for _, tt := range tests {
		doc := Parse(tt.line+"\nroot = Divider()\n", Options{})
		if doc.NewerVersion() != tt.newer {
			t.Errorf("%q: newer = %v, want %v", tt.line, doc.NewerVersion(), tt.newer)
		}
		want := 0
		if tt.newer {
			want = 1
		}
		if n := len(doc.Issues()); n != want {
			t.Errorf("%q: %d issues, want %d: %v", tt.line, n, want, doc.Issues())
		}
		if tt.newer && (doc.Issues()[0].Severity != SeverityWarning || doc.Issues()[0].Line != 1) {
			t.Errorf("%q: issue %+v", tt.line, doc.Issues()[0])
		}
	}
}

func TestGrammarErrors(t *testing.T) {
	tests := []struct {
		line string
		code string
	}{
		{`root = `, "syntax"},
		{`$x =`, "syntax"},
		{`$ = 1`, "syntax"},
		{`root = Text("a"`, "syntax"},
		{`root = Text("a",,)`, "syntax"},
		{`root = Stack([a b])`, "syntax"},
		{`root = Stack([a,`, "syntax"},
		{`$x = {a 1}`, "syntax"},
		{`$x = {1: 2}`, "syntax"},
		{`$x = {a: 1`, "syntax"},
		{`$x = 1 2`, "syntax"},
		{`$x = 1.2.3`, "syntax"},
		{`$x = -`, "syntax"},
		{`$x = 1e`, "syntax"},
		{`$x = 0x10`, "syntax"},
		{`$x = @`, "syntax"},
		{`$x = $`, "syntax"},
		{`root = Text(a = )`, "syntax"},
		{`root = "Text"`, "syntax"},
		{`root = Text("a") = 1`, "syntax"},
		{"root = Text(\"a\u00a0b\") \u00a0", "syntax"},
		{`$x = "abc`, "unterminated_string"},
		{`$x = "abc\`, "unterminated_string"},
		{`$x = [` + strings.Repeat("[", 5000), "syntax"},
		{`$x = ` + strings.Repeat("{a:", 9) + "1" + strings.Repeat("}", 9), "syntax"},
		{`$x = ` + strings.Repeat("{a:", 8) + "1" + strings.Repeat("}", 8), "invalid_props"},
		{`root = Text(Heading("x"))`, "not_flat"},
		{`root = Stack([], gap=x("a"))`, "not_flat"},
		{`root = Nope(x("a"))`, "not_flat"},
		{`$x = Text("a")`, "not_flat"},
		{`__proto__ = Divider()`, "invalid_props"},
		{`prototype = Divider()`, "invalid_props"},
		{strings.Repeat("a", 65) + ` = Divider()`, "invalid_props"},
		{"$" + strings.Repeat("a", 65) + ` = 1`, "invalid_props"},
		{`$x = "` + strings.Repeat("é", 2001) + `"`, "invalid_props"},
		{`root = Divider(,)`, "syntax"},
	}
	for _, tt := range tests {
		doc := Parse(tt.line+"\n", Options{})
		if len(doc.Issues()) == 0 || doc.Issues()[0].Code != tt.code || doc.Issues()[0].Line != 1 {
			t.Errorf("%.60q: issues %v, want %s on line 1", tt.line, doc.Issues(), tt.code)
		}
	}
}

func TestAccepted(t *testing.T) {
	for _, line := range []string{
		`root = Divider()`,
		`root = Divider( )`,
		`root = Stack([],)`,
		`root = Text("a"  ,  tone = "muted" , )  # note`,
		`root = Text(1e3)`,
		`root = Text(-.5)`,
		`root = Text("$x # not a comment")`,
		"\u00a0root = Divider()",
		`_x1 = Divider()`,
	} {
		doc := Parse(line+"\n", Options{})
		for _, i := range doc.Issues() {
			if i.Code != "missing_root" {
				t.Errorf("%q: %v", line, doc.Issues())
			}
		}
	}
}

func TestDocumentLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("root = Divider()\n")
	for i := 1; i < maxComponents; i++ {
		fmt.Fprintf(&b, "c%d = Divider()\n", i)
	}
	for i := 0; i < maxStateKeys; i++ {
		fmt.Fprintf(&b, "$k%d = %d\n", i, i)
	}
	b.WriteString("extra = Divider()\n")                                // line 2001
	b.WriteString("c1 = Divider()\n")                                   // line 2002
	b.WriteString("m = McpMutation(root, tool=\"payments.confirm\")\n") // 2003
	b.WriteString("$extra = 1\n")                                       // 2004
	b.WriteString("$k1 = 1\n")                                          // 2005
	doc := Parse(b.String(), Options{Tools: []string{"payments.confirm"}})
	got := strings.Join(issueStrings(doc.Issues()), " ")
	want := "2001:document_too_large:error:extra 2002:duplicate_id:error:c1 2003:document_too_large:error:m 2004:document_too_large:error:$extra 2005:duplicate_id:error:$k1"
	if got != want {
		t.Errorf("issues:\n got %s\nwant %s", got, want)
	}
	if len(doc.Nodes()) != maxComponents || len(doc.StateKeys()) != maxStateKeys {
		t.Errorf("%d nodes, %d keys", len(doc.Nodes()), len(doc.StateKeys()))
	}
	// A larger limit, for measuring, accepts more.
	doc = Parse(b.String(), Options{Tools: []string{"payments.confirm"}, MaxComponents: 2000, MaxStateKeys: 2000})
	if got := strings.Join(issueStrings(doc.Issues()), " "); got != "2002:duplicate_id:error:c1 2005:duplicate_id:error:$k1 2003:mutation_target_not_interactive:error:m" {
		t.Errorf("with larger limits: %s", got)
	}
}

func TestLiveLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("root = Divider()\n")
	for i := 0; i < maxStateKeys; i++ {
		fmt.Fprintf(&b, "$k%d = %d\n", i, i)
	}
	p := NewParser(Options{})
	_, _ = p.WriteString(b.String())
	doc := p.End()
	res, err := p.Update("$extra = 1\n")
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied || len(res.Issues) != 1 || res.Issues[0].Code != "document_too_large" || res.Issues[0].Line != 1 {
		t.Errorf("update $extra: %+v", res)
	}
	if _, ok := doc.State("$extra"); ok {
		t.Error("$extra was applied")
	}
	res, _ = p.Update("$k0 = 2\n")
	if !res.Applied {
		t.Fatalf("update $k0: %+v", res)
	}
	if v, _ := doc.State("$k0"); v != 2.0 {
		t.Errorf("$k0 = %v", v)
	}
}

func TestParserLifecycle(t *testing.T) {
	p := NewParser(Options{})
	if _, err := p.Update("root = Divider()\n"); !errors.Is(err, ErrNotEnded) {
		t.Errorf("Update before End: %v", err)
	}
	_, _ = p.WriteString("root = Stack([a])\n")
	if !p.Document().Pending("a") || p.Document().Pending("root") {
		t.Error("Pending is wrong while streaming")
	}
	if p.Document().Missing() != nil {
		t.Error("Missing before End")
	}
	d1 := p.End()
	if d2 := p.End(); d1 != d2 || len(d2.Issues()) != 1 {
		t.Errorf("End again changed the document: %v", d2.Issues())
	}
	if n, err := p.Write([]byte("x")); n != 0 || !errors.Is(err, ErrEnded) {
		t.Errorf("Write after End = %d, %v", n, err)
	}
	if _, err := p.WriteString("x"); !errors.Is(err, ErrEnded) {
		t.Errorf("WriteString after End: %v", err)
	}
	if got := d1.Missing(); len(got) != 1 || got[0] != "a" {
		t.Errorf("Missing = %v", got)
	}
	if err := d1.SetState("$nope", 1); err == nil {
		t.Error("SetState of an undeclared key succeeded")
	}
	d3 := Parse("$n = 1\nroot = Text($n)\n", Options{})
	if err := d3.SetState("$n", []int{1}); err == nil {
		t.Error("SetState accepted a slice")
	}
	if err := d3.SetState("$n", 7); err != nil {
		t.Error(err)
	}
	if v, _ := d3.State("$n"); v != 7.0 {
		t.Errorf("$n = %#v, want 7.0", v)
	}
}

func TestIssueTable(t *testing.T) {
	if len(issueTable) != 34 {
		t.Errorf("%d issue codes, want 34", len(issueTable))
	}
	for code, info := range issueTable {
		want := SeverityError
		if code == "unknown_escape" || code == "newer_version" {
			want = SeverityWarning
		}
		if info.severity != want {
			t.Errorf("%s: severity %s", code, info.severity)
		}
	}
}

// TestCatalogMatchesSchema checks the committed catalog against the shared
// schema when it is present, so a changed schema can't go unnoticed.
func TestCatalogMatchesSchema(t *testing.T) {
	data, err := os.ReadFile("../../shared/omni-ir/conformance/schema.json")
	if err != nil {
		t.Skip("shared schema.json not present")
	}
	var s struct {
		FormatVersion string                     `json:"formatVersion"`
		Limits        map[string]int             `json:"limits"`
		Components    map[string]json.RawMessage `json:"components"`
		IssueCodes    map[string]json.RawMessage `json:"issueCodes"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.FormatVersion != catalogFormat {
		t.Errorf("schema format %s, catalog %s: run go generate", s.FormatVersion, catalogFormat)
	}
	if len(s.Components) != len(builtinComponents) || len(s.IssueCodes) != len(issueTable) {
		t.Errorf("schema has %d components and %d codes; catalog %d and %d: run go generate",
			len(s.Components), len(s.IssueCodes), len(builtinComponents), len(issueTable))
	}
	if s.Limits["lineLength"] != maxLineLength || s.Limits["components"] != maxComponents || s.Limits["nestingDepth"] != maxNesting {
		t.Errorf("limits differ: %v", s.Limits)
	}
}

func TestDeclareComponent(t *testing.T) {
	ok := ComponentDecl{Description: "A tile.", Props: map[string]PropDecl{"name": {Kind: "text"}}}
	if _, err := DeclareComponent("Tile", ok); err != nil {
		t.Fatalf("valid declaration refused: %v", err)
	}
	bad := []struct {
		name string
		decl ComponentDecl
	}{
		{"tile", ok},
		{"Text", ok},
		{"McpMutation", ok},
		{"App", ok},
		{"Tile", ComponentDecl{Props: ok.Props}},
		{"Tile", ComponentDecl{Description: strings.Repeat("x", 301), Props: ok.Props}},
		{"Tile", ComponentDecl{Description: "x", Props: map[string]PropDecl{"action": {Kind: "text"}}}},
		{"Tile", ComponentDecl{Description: "x", Props: map[string]PropDecl{"Name": {Kind: "text"}}}},
		{"Tile", ComponentDecl{Description: "x", Props: map[string]PropDecl{"name": {Kind: "colour"}}}},
		{"Tile", ComponentDecl{Description: "x", Props: map[string]PropDecl{"other": {Kind: "state", Holds: "text"}}}},
		{"Tile", ComponentDecl{Description: "x", Props: map[string]PropDecl{"value": {Kind: "state", Holds: "date"}}}},
		{"Tile", ComponentDecl{Description: "x", Props: map[string]PropDecl{"name": {Kind: "oneOf"}}}},
		{"Tile", ComponentDecl{Description: "x", Props: map[string]PropDecl{"name": {Kind: "list", Item: "bool"}}}},
		{"Tile", ComponentDecl{Description: "x", Field: true, Props: ok.Props}},
		{"Tile", ComponentDecl{Description: "x", Positional: []string{"nope"}, Props: ok.Props}},
		{"Tile", ComponentDecl{Description: "x", Positional: []string{"name", "name"}, Props: ok.Props}},
	}
	for i, b := range bad {
		if _, err := DeclareComponent(b.name, b.decl); err == nil {
			t.Errorf("case %d (%s): malformed declaration accepted", i, b.name)
		}
	}
	if _, err := DeclareComponents([]byte(`{"Tile": {"description": "x", "props": {}, "colour": 1}}`)); err == nil {
		t.Error("unknown declaration field accepted")
	}
}

func TestPictureFamilies(t *testing.T) {
	f, err := DeclarePictureFamily("item-", "digits", 6)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"item-1": true, "item-123456": true, "item-1234567": false, "item-": false, "item-a1": false, "items-1": false} {
		if f.Match(name) != want {
			t.Errorf("Match(%q) = %v", name, !want)
		}
	}
	g, _ := DeclarePictureFamily("p-", "letters-digits", 0)
	if !g.Match("p-abc123") || g.Match("p-ABC") {
		t.Error("letters-digits family")
	}
	for _, c := range []struct {
		prefix, id string
		max        int
	}{{"item", "digits", 6}, {"Item-", "digits", 6}, {"-", "digits", 6}, {"item-", "hex", 6}, {"item-", "digits", 64}, {"item-", "digits", -1}} {
		if _, err := DeclarePictureFamily(c.prefix, c.id, c.max); err == nil {
			t.Errorf("family %+v accepted", c)
		}
	}
}

func TestStreamingView(t *testing.T) {
	p := NewParser(Options{Components: []*Component{nil}, Pictures: []*PictureFamily{nil}})
	_, _ = p.WriteString("root = Stack([t])\nt = Text($msg)\nhalf = Text(\"no line end yet\")")
	doc := p.Document()
	if doc.Ended() || !doc.Pending("$msg") || doc.Pending("t") || doc.Node("half") != nil {
		t.Errorf("while streaming: ended=%v pending $msg=%v t=%v half=%v", doc.Ended(), doc.Pending("$msg"), doc.Pending("t"), doc.Node("half"))
	}
	b, err := json.Marshal(doc)
	if err != nil || !strings.Contains(string(b), `"missing":[]`) {
		t.Errorf("JSON while streaming: %s %v", b, err)
	}
	if got := Describe(doc, false); got != "Text: [loading]" {
		t.Errorf("outline while streaming: %q", got)
	}
	doc = p.End()
	if doc.Node("half") == nil {
		t.Error("the last line without a line ending was not processed")
	}
	if got := strings.Join(doc.Missing(), ","); got != "$msg" {
		t.Errorf("missing = %s", got)
	}
	if got := Describe(doc, false); got != "Text: [missing]" {
		t.Errorf("outline after End: %q", got)
	}
	if Describe(nil, true) != "" {
		t.Error("Describe(nil) is not empty")
	}
}

func TestMessagesHelp(t *testing.T) {
	tests := []struct{ line, want string }{
		{`root = text("hi")`, "did you mean Text?"},
		{`root = Text("hi", colour="red")`, "its props are currency, format, text, tone"},
		{`root = Text("hi", tone="loud")`, `one of "default", "muted", "strong"`},
		{`root = Text('hi')`, "double quotes"},
		{`$x = [[[[[[[[[1]]]]]]]]]`, "at most 8 levels"},
	}
	for _, tt := range tests {
		doc := Parse(tt.line+"\n", Options{})
		if len(doc.Issues()) == 0 || !strings.Contains(doc.Issues()[0].Message, tt.want) {
			t.Errorf("%s: %v, want a message with %q", tt.line, doc.Issues(), tt.want)
		}
	}
}

func TestJSONShapes(t *testing.T) {
	b, _ := json.Marshal([]Issue{{Line: 0, Code: "missing_root", Message: "m", Severity: SeverityError}, {Line: 3, Code: "syntax", Message: "s"}})
	if got := string(b); got != `[{"line":null,"code":"missing_root","message":"m"},{"line":3,"code":"syntax","message":"s"}]` {
		t.Errorf("issues JSON = %s", got)
	}
	doc := Parse(paymentScreen, Options{Tools: []string{"payments.confirm"}})
	ms := doc.Mutations()
	if len(ms) != 1 || ms[0].ID != "confirmPay" || ms[0].Target != "confirm" || ms[0].Line != 12 {
		t.Fatalf("Mutations = %+v", ms)
	}
	b, _ = json.Marshal(ms[0])
	if got := string(b); got != `{"id":"confirmPay","tool":"payments.confirm","params":{"amount":{"state":"$amount"},"note":{"state":"$note"}}}` {
		t.Errorf("mutation JSON = %s", got)
	}
	b, _ = json.Marshal(doc.Node("actions"))
	if got := string(b); got != `{"type":"Stack","props":{"direction":"row","gap":"sm"},"children":["confirm","cancel"]}` {
		t.Errorf("node JSON = %s", got)
	}
	c, err := DeclareComponent("Stepper", ComponentDecl{Description: "Choose how many.", Field: true,
		Props: map[string]PropDecl{"value": {Kind: "state", Holds: "number"}}})
	if err != nil || c.Name() != "Stepper" || c.Description() != "Choose how many." || !c.IsField() {
		t.Errorf("component %v %v", c, err)
	}
}

func TestZeroParser(t *testing.T) {
	var p Parser
	if _, err := p.Update("x = Divider()\n"); !errors.Is(err, ErrNotEnded) {
		t.Errorf("Update on a zero Parser: %v", err)
	}
	_, _ = p.WriteString("root = Divider()\n")
	if doc := p.End(); doc.Root() == nil || len(doc.Issues()) != 0 {
		t.Errorf("zero Parser: %v", doc.Issues())
	}
	var q Parser
	if doc := q.End(); len(doc.Issues()) != 1 || doc.Issues()[0].Code != "missing_root" {
		t.Errorf("ending an empty zero Parser: %v", doc.Issues())
	}
}

package screen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	paymentScreen,
	"# omni-ir 99.0\nroot = Stack([a])\r\na = Divider()\r\n",
	"root = Text(\"caf\xc3\xa9 \xe2\x98\x95\")\n$x = -0\n",
	"root = Card([Heading(\"Hi\")])\n$x = [[[[[[[[[1]]]]]]]]]\n",
	"root = Table([\"A\"], [r])\nr = TableRow([1, 2])\n",
	"root = List([i])\ni = ListItem(\"x\", image=\"cabin-pines\")\n",
	"root = Stack([a, a])\na = Stack([root])\nb = Stack([b])\n",
	"root = Text(\"\\q\\\"\")\nt = Text(\"open\n",
	"\xff\xfe\xe2\x82\n\r\n\x00root = Divider()",
	"root = BarChart(\"S\", [\"a\"], [s])\ns = Series(\"x\", [1, 2])\np = PieChart(\"P\", [s])\n",
	"$n = 1\nroot = Stack([i])\ni = Input($n, label=\"x\")\nj = Switch($m, label=\"y\")\n$m = \"no\"\n",
	"$x = " + strings.Repeat("[", 5000) + "\n",
}

func fuzzOptions() Options {
	tile, _ := DeclareComponent("Tile", ComponentDecl{Description: "A tile.", Positional: []string{"name", "children"},
		Props: map[string]PropDecl{"name": {Kind: "text"}, "photo": {Kind: "picture", Optional: true}}, Children: &ChildrenDecl{Max: 2}})
	fam, _ := DeclarePictureFamily("item-", "digits", 6)
	return Options{Tools: []string{"payments.confirm"}, Assets: []string{"cabin-pines"},
		Components: []*Component{tile}, Pictures: []*PictureFamily{fam}}
}

// FuzzParser checks that no input panics, that every chunking gives the same
// result, and that an outline never has a line break from stream text.
func FuzzParser(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(7))
	}
	opts := fuzzOptions()
	f.Fuzz(func(t *testing.T, data []byte, seed uint8) {
		whole := feed(data, 0, opts)
		want := snapshot(t, whole)
		// Pieces of varying sizes derived from seed.
		p := NewParser(opts)
		step := int(seed%17) + 1
		for i := 0; i < len(data); {
			n := min(step, len(data)-i)
			_, _ = p.Write(data[i : i+n])
			i += n
			step = step*5%17 + 1
		}
		if got := snapshot(t, p.End()); got != want {
			t.Fatalf("chunking changed the result:\n got %s\nwant %s", got, want)
		}
		for _, values := range []bool{false, true} {
			checkOutline(t, whole, Describe(whole, values))
		}
		checkConsistent(t, whole)
	})
}

// checkConsistent checks properties that tie the streaming checks to the
// whole-document check that updates use.
func checkConsistent(t *testing.T, doc *Document) {
	t.Helper()
	rejected := map[int]bool{}
	var endIssues []string
	for _, i := range doc.Issues() {
		info, ok := issueTable[i.Code]
		if !ok {
			t.Fatalf("unknown issue code %q", i.Code)
		}
		if info.severity != i.Severity {
			t.Fatalf("%s reported as %s", i.Code, i.Severity)
		}
		switch info.stage {
		case "line":
			if i.Severity == SeverityError {
				rejected[i.Line] = true
			}
		case "end":
			endIssues = append(endIssues, fmt.Sprintf("%d:%s:%s", i.Line, i.Code, i.ID))
		default:
			t.Fatalf("a stream reported %s, an issue of stage %s", i.Code, info.stage)
		}
	}
	for _, s := range doc.idx.order {
		if rejected[s.line] {
			t.Fatalf("line %d was rejected but defines %s", s.line, s.id())
		}
	}
	// Re-checking the accepted statements as a whole document finds no rule
	// broken when a line arrived, and the same end-of-stream issues.
	r := recheck(doc.idx.order, doc.idx.maxComp, doc.idx.maxState)
	var again []string
	for _, i := range r.issues {
		if issueTable[i.Code].stage != "end" {
			t.Fatalf("re-check found %s on line %d, which the stream accepted", i.Code, i.Line)
		}
		again = append(again, fmt.Sprintf("%d:%s:%s", i.Line, i.Code, i.ID))
	}
	if strings.Join(again, " ") != strings.Join(endIssues, " ") {
		t.Fatalf("end issues differ:\n stream %v\nrecheck %v", endIssues, again)
	}
	if strings.Join(r.missing, " ") != strings.Join(doc.Missing(), " ") {
		t.Fatalf("missing differs: %v vs %v", doc.Missing(), r.missing)
	}
}

// outlineHeads are the ways an outline line may start, after indentation.
var outlineHeads = []string{"[loading]", "[missing]", "Card", "Heading:", "Text:", "Input:", "Button:",
	"Divider", "Badge:", "Skeleton", "Image:", "Rating:", "DateInput:", "List", "Item:", "Message from ",
	"Select:", "Switch:", "Table:", "Row:", "Tabs", "Tab:", "Notice", "BarChart:", "LineChart:", "PieChart:",
	"Series:", "Slice:", "Tile"}

func checkOutline(t *testing.T, doc *Document, outline string) {
	t.Helper()
	if strings.ContainsAny(outline, "\r\v\f\u0085\u2028\u2029") {
		t.Fatalf("outline holds a line-breaking character: %q", outline)
	}
	if outline == "" {
		return // a root Stack with nothing in it adds no line
	}
	for _, line := range strings.Split(outline, "\n") {
		rest := strings.TrimLeft(line, " ")
		if (len(line)-len(rest))%2 != 0 {
			t.Fatalf("odd indentation: %q", line)
		}
		ok := false
		for _, h := range outlineHeads {
			if strings.HasPrefix(rest, h) {
				ok = true
				break
			}
		}
		if !ok {
			t.Fatalf("outline line %q doesn't start with a component", line)
		}
	}
}

// FuzzUpdate checks that an update never panics and that a rejected update
// leaves the screen exactly as it was.
func FuzzUpdate(f *testing.F) {
	base := "root = Card([status, eta, ret], title=\"Order\")\nstatus = Badge(\"Shipped\")\n$eta = \"Friday\"\neta = Text($eta)\n" +
		"ret = Button(\"Return\", action=\"requestReturn\")\nm = McpMutation(ret, tool=\"payments.confirm\", params={order: \"1\"})\n" +
		"$name = \"\"\nname = Input($name, label=\"Name\")\n"
	for _, s := range []string{"status = Badge(\"Delivered\")\n", "$eta = \"Today\"\n", "$name = \"x\"\n",
		"ret = Notice(\"Done\")\n", "root = Card([status])\n", "x = Nope()\n", "root = Card([status, status])\n",
		"status = Stack([root])\n", "# omni-ir 9.9\n\n", "m = McpMutation(status, tool=\"payments.confirm\")\n"} {
		f.Add(s)
	}
	opts := fuzzOptions()
	f.Fuzz(func(t *testing.T, update string) {
		p := NewParser(opts)
		_, _ = p.WriteString(base)
		doc := p.End()
		before, _ := json.Marshal(doc)
		res, err := p.Update(update)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := json.Marshal(doc)
		if !res.Applied && string(before) != string(after) {
			t.Fatalf("a rejected update changed the screen:\n%s\n%s", before, after)
		}
		if !res.Applied && len(res.Issues) == 0 {
			t.Fatal("a rejected update has no issue")
		}
		if res.Applied {
			if v, _ := doc.State("$name"); v != "" {
				t.Fatalf("an update changed a field's value to %v", v)
			}
			for _, i := range recheck(doc.idx.order, doc.idx.maxComp, doc.idx.maxState).issues {
				if issueTable[i.Code].stage != "end" {
					t.Fatalf("an applied update left %s on %s", i.Code, i.ID)
				}
			}
		}
		checkOutline(t, doc, Describe(doc, true))
	})
}

// TestDeepNestingFailsFast: 5,000 opening brackets on one line are rejected
// as syntax without recursing past the nesting limit (BenchmarkDeepNesting
// measures the time).
func TestDeepNestingFailsFast(t *testing.T) {
	for _, open := range []string{"[", "{a:", "a("} {
		line := "$x = " + strings.Repeat(open, 5000) + "\n"
		doc := Parse(line+"root = Divider()\n", Options{})
		if len(doc.Issues()) != 1 || doc.Issues()[0].Code != "syntax" {
			t.Errorf("%s: issues %v", open, doc.Issues())
		}
	}
}

func BenchmarkDeepNesting(b *testing.B) {
	line := []byte("$x = " + strings.Repeat("[", 5000) + "\n")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		p := NewParser(Options{})
		_, _ = p.Write(line)
		p.End()
	}
}

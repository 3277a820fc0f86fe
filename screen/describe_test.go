package screen

import (
	"strings"
	"testing"
)

const paymentScreen = `root = Card([title, merchant, amount, date, note, sep, actions])
title = Heading("Confirm payment")
merchant = Text("Blue Bottle Café, Oakland (CA)", tone="muted")
$amount = 42.50
amount = Text($amount, format="currency", currency="USD", tone="strong")
date = Text("2026-09-30", format="date")
$note = ""
note = Input($note, label="Note for merchant (optional)", placeholder="e.g. table 4, no rush")
sep = Divider()
actions = Stack([confirm, cancel], direction="row", gap="sm")
confirm = Button("Pay now", action="pay")
confirmPay = McpMutation(confirm, tool="payments.confirm", params={amount: $amount, note: $note})
cancel = Button("Cancel", variant="secondary")
`

func TestDescribePayment(t *testing.T) {
	doc := Parse(paymentScreen, Options{Tools: []string{"payments.confirm"}})
	if doc.HasErrors() {
		t.Fatalf("issues: %v", doc.Issues())
	}
	want := `Card
  Heading: Confirm payment
  Text: Blue Bottle Café, Oakland (CA)
  Text: 42.5 (currency, USD)
  Text: 2026-09-30 (date)
  Input: Note for merchant (optional)
  Divider
  Button: Pay now (action: payments.confirm)
  Button: Cancel`
	if got := Describe(doc, false); got != want {
		t.Errorf("Describe:\n%s\nwant:\n%s", got, want)
	}
	if err := doc.SetState("$note", "table\n4"); err != nil {
		t.Fatal(err)
	}
	got := Describe(doc, true)
	if !strings.Contains(got, "\n  Input: Note for merchant (optional) = \"table 4\"\n") {
		t.Errorf("Describe with values:\n%s", got)
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		values bool
		open   bool // leave the stream open
		want   string
	}{
		{"sign-in", `root = Card([title, email, actions])
title = Heading("Sign in")
$email = ""
email = Input($email, label="Email address", required=true, format="email")
actions = Stack([send])
send = Button("Email me a link", action="sendLink")
m = McpMutation(send, tool="auth.sendMagicLink", params={email: $email})
`, false, false, "Card\n  Heading: Sign in\n  Input: Email address (required, email)\n  Button: Email me a link (action: auth.sendMagicLink)"},
		{"hidden-field-value", "root = Stack([i, t])\n$n = \"secret\"\ni = Input($n, label=\"Name\")\nt = Text($n)\n", false, false,
			"Input: Name\nText: [hidden]"},
		{"shown-field-value", "root = Stack([i, t])\n$n = \"Ada  L.\"\ni = Input($n, label=\"Name\")\nt = Text($n)\n", true, false,
			"Input: Name = \"Ada L.\"\nText: Ada L."},
		{"loading", "root = Card([a, b])\na = Text(\"A\")\n", false, true, "Card\n  Text: A\n  [loading]"},
		{"missing", "root = Card([a, b])\na = Text(\"A\")\n", false, false, "Card\n  Text: A\n  [missing]"},
		{"no-root", "a = Text(\"A\")\n", false, false, "[missing]"},
		{"line-breaks-collapse", "root = Text(\"one\\ntwo \\n\\n three\")\n", false, false, "Text: one two three"},
		{"fields", `root = Card([d, s, w, r])
$d = "2026-01-02"
$s = "B"
$w = true
d = DateInput($d, label="When", required=true, min="2026-01-01", max="2026-12-31")
s = Select($s, label="Pick", options=["A", "B"], required=true)
w = Switch($w, label="Agree", required=true)
r = Rating(4.5)
`, true, false, "Card\n  DateInput: When (required, from 2026-01-01, until 2026-12-31) = \"2026-01-02\"\n  Select: Pick (required; options: A, B) = \"B\"\n  Switch: Agree (required) = on\n  Rating: 4.5 out of 5"},
		{"data", `root = Tabs([t1])
t1 = Tab("Overview", [l, tb, n, bar, pie, msg, im, bd])
l = List([i1])
i1 = ListItem("Cabin", detail="2 beds", trailing="$120")
tb = Table(["Name", "Qty"], [r1])
r1 = TableRow(["Tea", 2])
n = Notice("Paid", tone="success", title="Done")
bar = BarChart("Sales", ["Jul", "Aug"], [s1])
s1 = Series("2026", [1, 2.5])
pie = PieChart("Share", [p1])
p1 = Slice("Tea", 62)
msg = Message("Hi", from="assistant")
im = Image("cabin", alt="A cabin")
bd = Badge("New")
`, false, false, "Tabs\n  Tab: Overview\n    List\n      Item: Cabin · 2 beds · $120\n    Table: Name | Qty\n      Row: Tea | 2\n    Notice (success): Done: Paid\n    BarChart: Sales (labels: Jul, Aug)\n      Series: 2026: 1, 2.5\n    PieChart: Share\n      Slice: Tea: 62\n    Message from assistant: Hi\n    Image: A cabin\n    Badge: New"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(Options{Tools: []string{"auth.sendMagicLink"}, Assets: []string{"cabin"}})
			_, _ = p.WriteString(tt.stream)
			doc := p.Document()
			if !tt.open {
				doc = p.End()
			}
			if got := Describe(doc, tt.values); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s\nissues: %v", got, tt.want, doc.Issues())
			}
		})
	}
}

func TestJSNumber(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", 42.5: "42.5", -150: "-150", 3: "3", 1e21: "1e+21", 1e20: "100000000000000000000",
		1e-7: "1e-7", 0.000001: "0.000001", 123.456: "123.456", -0.5: "-0.5", 1.5e-10: "1.5e-10",
	} {
		if got := jsNumber(f); got != want {
			t.Errorf("jsNumber(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestFieldsReadBy(t *testing.T) {
	doc := Parse(paymentScreen+"$other = \"\"\nother = Input($other, label=\"Other\")\n", Options{Tools: []string{"payments.confirm"}})
	m := doc.Mutation("confirm")
	if m == nil {
		t.Fatal("no mutation for confirm")
	}
	var ids []string
	for _, n := range doc.FieldsReadBy(m) {
		ids = append(ids, n.ID)
	}
	if strings.Join(ids, ",") != "note" {
		t.Errorf("FieldsReadBy = %v, want [note]", ids)
	}
	if got := doc.FieldsReadBy(nil); got != nil {
		t.Errorf("FieldsReadBy(nil) = %v", got)
	}
}

func TestDescribeAppComponents(t *testing.T) {
	comps, err := DeclareComponents([]byte(`{
	  "Tile": {"description": "A product tile.", "positional": ["name", "children"],
	    "props": {"name": {"kind": "text"}, "price": {"kind": "number"}, "tags": {"kind": "list", "item": "text", "optional": true}},
	    "children": {"max": 2}},
	  "Stepper": {"description": "Choose how many.", "positional": ["value"],
	    "props": {"value": {"kind": "state", "holds": "number"}, "label": {"kind": "text"}, "max": {"kind": "number", "integer": true, "state": false}},
	    "field": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	doc := Parse(`root = Stack([t, q])
$name = "Tote"
t = Tile($name, [buy], price=24, tags=["New", "Sale"])
$n = 2
q = Stepper($n, label="How many", max=5, required=true)
buy = Button("Buy")
`, Options{Components: comps})
	if doc.HasErrors() {
		t.Fatalf("issues: %v", doc.Issues())
	}
	want := "Tile: Tote (price: 24, tags: New, Sale)\n  Button: Buy\nStepper: How many (required, max: 5)"
	if got := Describe(doc, false); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := Describe(doc, true); !strings.HasSuffix(got, "Stepper: How many (required, max: 5) = 2") {
		t.Errorf("with values:\n%s", got)
	}
	if fs := doc.FieldsReadBy(&Mutation{Params: map[string]Value{"n": StateRef("$n"), "x": 1.0}}); len(fs) != 1 || fs[0].ID != "q" {
		t.Errorf("FieldsReadBy app field = %v", fs)
	}
}

func TestFieldsReadByDocumentOrder(t *testing.T) {
	doc := Parse(`root = Stack([c, b, a, go])
$a = ""
$b = ""
$c = true
c = Switch($c, label="C")
b = Input($b, label="B")
a = Input($a, label="A")
also = Input($a, label="A again")
go = Button("Go", action="go")
m = McpMutation(go, tool="x.go", params={first: $a, second: $c, third: $b, lit: "$a"})
`, Options{Tools: []string{"x.go"}})
	var ids []string
	for _, n := range doc.FieldsReadBy(doc.Mutation("go")) {
		ids = append(ids, n.ID)
	}
	// Document order, not params order; a literal "$a" string reads nothing.
	if got := strings.Join(ids, ","); got != "c,b,a,also" {
		t.Errorf("FieldsReadBy = %s, want c,b,a,also", got)
	}
}

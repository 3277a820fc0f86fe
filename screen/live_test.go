package screen

import (
	"strings"
	"testing"
)

const orderScreen = `root = Card([status, name, ret], title="Order 1042")
status = Badge("Shipped")
$name = ""
name = Input($name, label="Name on the parcel")
ret = Button("Request a return", action="requestReturn")
m = McpMutation(ret, tool="orders.requestReturn", params={order: "1042", name: $name})
`

func endedOrder(t *testing.T) (*Parser, *Document) {
	t.Helper()
	p := NewParser(Options{Tools: []string{"orders.requestReturn"}})
	_, _ = p.WriteString(orderScreen)
	doc := p.End()
	if doc.HasErrors() {
		t.Fatalf("base screen: %v", doc.Issues())
	}
	return p, doc
}

func TestUpdateKeepsPersonEdits(t *testing.T) {
	p, doc := endedOrder(t)
	if err := doc.SetState("$name", "Ada"); err != nil {
		t.Fatal(err)
	}
	res, _ := p.Update("status = Badge(\"Delivered\")\nname = Input($name, label=\"Name\")\n")
	if !res.Applied {
		t.Fatalf("update rejected: %v", res.Issues)
	}
	if v, _ := doc.State("$name"); v != "Ada" {
		t.Errorf("$name = %v after an update, want the person's Ada", v)
	}
	res, _ = p.Update("$name = \"Bob\"\n")
	if res.Applied || len(res.Issues) != 1 || res.Issues[0].Code != "live_field_conflict" || res.Issues[0].Line != 1 {
		t.Errorf("setting a field's key: %+v", res)
	}
	if n := doc.Node("name"); n == nil || n.Props["label"] != "Name" || n.Line != 2 {
		t.Errorf("replaced field = %+v", n)
	}
}

func TestUpdateRemovesSubtree(t *testing.T) {
	p := NewParser(Options{})
	_, _ = p.WriteString("root = Stack([box, keep])\nbox = Card([a, b])\na = Text(\"A\")\nb = Stack([c])\nc = Text(\"C\")\nkeep = Text(\"K\")\n$s = 1\n")
	doc := p.End()
	res, _ := p.Update("root = Stack([keep])\n")
	if !res.Applied {
		t.Fatal(res.Issues)
	}
	var ids []string
	for _, n := range doc.Nodes() {
		ids = append(ids, n.ID)
	}
	if got := strings.Join(ids, ","); got != "root,keep" {
		t.Errorf("nodes after removal: %s", got)
	}
	if _, ok := doc.State("$s"); !ok {
		t.Error("state was removed")
	}
	// The removed ids are free again: adding one back is an addition.
	res, _ = p.Update("root = Stack([keep, a])\na = Badge(\"new\")\n")
	if !res.Applied || doc.Node("a").Type != "Badge" {
		t.Errorf("re-adding a removed id: %+v", res)
	}
	if got := Describe(doc, false); got != "Text: K\nBadge: new" {
		t.Errorf("outline after updates:\n%s", got)
	}
}

func TestUpdateLineChecks(t *testing.T) {
	p, doc := endedOrder(t)
	long := "status = Badge(\"" + strings.Repeat("x", maxLineLength) + "\")\n"
	tests := []struct {
		text  string
		issue string
	}{
		{long, "1:line_too_long"},
		{"status = Badge('x')\n", "1:syntax"},
		{"\n\nstatus = Badge(\"x\")\nstatus = Badge(\"y\")\n", "4:duplicate_id"},
		{"ret = Button(\"Return\", action=\"requestReturn\")\nm = McpMutation(ret, tool=\"orders.unknown\")\n", "2:unknown_tool"},
		{"root = McpMutation(ret, tool=\"orders.requestReturn\")\n", "1:missing_root"}, // nothing is reachable from a root that is not a component
		{"root = Card([status, name, ret, x], title=\"Order 1042\")\nx = Table([\"A\"], [r])\nr = TableRow([1, 2])\n", "3:table_mismatch"},
		{"$extra = [1]\n", "1:invalid_props"},
	}
	before := snapshot(t, doc)
	for _, tt := range tests {
		res, err := p.Update(tt.text)
		if err != nil {
			t.Fatal(err)
		}
		got := issueStrings(res.Issues)
		found := false
		for _, g := range got {
			if strings.HasPrefix(g, tt.issue+":") {
				found = true
			}
		}
		if res.Applied || !found {
			t.Errorf("%.50q: applied=%v issues %v, want %s", tt.text, res.Applied, got, tt.issue)
		}
		if snapshot(t, doc) != before {
			t.Errorf("%.50q: a rejected update changed the screen", tt.text)
		}
	}
}

func TestUpdateEmpty(t *testing.T) {
	p, doc := endedOrder(t)
	before := snapshot(t, doc)
	for _, text := range []string{"", "\n", "# nothing to say\n"} {
		res, _ := p.Update(text)
		if !res.Applied || len(res.Issues) != 0 {
			t.Errorf("%q: %+v", text, res)
		}
	}
	if snapshot(t, doc) != before {
		t.Error("an empty update changed the screen")
	}
}

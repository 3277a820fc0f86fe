package screen

import (
	"reflect"
	"sync"
	"testing"
)

// TestPropsAfterEachAccess checks that every way a document hands out nodes
// gives each its props, whether the nodes arrived before or after an
// earlier read, and after a live update.
func TestPropsAfterEachAccess(t *testing.T) {
	want := map[string]Value{"tone": "muted"}
	tests := []struct {
		name string
		read func(d *Document) *Node
	}{
		{"Node", func(d *Document) *Node { return d.Node("t") }},
		{"Nodes", func(d *Document) *Node {
			for _, n := range d.Nodes() {
				if n.ID == "t" {
					return n
				}
			}
			return nil
		}},
		{"Root", func(d *Document) *Node {
			d.Root()
			return d.Node("t")
		}},
		{"Describe", func(d *Document) *Node {
			Describe(d, false)
			return d.idx.get("t").node
		}},
		{"MarshalJSON", func(d *Document) *Node {
			if _, err := d.MarshalJSON(); err != nil {
				t.Fatal(err)
			}
			return d.idx.get("t").node
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(Options{})
			_, _ = p.WriteString("root = Stack([t, u])\n")
			if n := p.Document().Node("root"); n == nil || n.Props == nil || len(n.Props) != 0 {
				t.Fatalf("root before t arrived: %+v", n)
			}
			_, _ = p.WriteString("t = Text(\"Hi\", tone=\"muted\")\n")
			n := tc.read(p.Document())
			if n == nil {
				t.Fatal("no node t")
			}
			if got := map[string]Value{"tone": n.Props["tone"]}; !reflect.DeepEqual(got, want) || n.Props["text"] != "Hi" {
				t.Errorf("t.Props = %v", n.Props)
			}
			_, _ = p.WriteString("u = Text(\"There\")\n")
			doc := p.End()
			if u := doc.Node("u"); u == nil || u.Props["text"] != "There" {
				t.Fatalf("u after End: %+v", u)
			}
			res, err := p.Update("v = Text(\"New\", tone=\"strong\")\nroot = Stack([t, u, v])\n")
			if err != nil || !res.Applied {
				t.Fatalf("update: %v %v", err, res.Issues)
			}
			if v := tc.read(doc); v == nil || doc.Node("v") == nil || doc.Node("v").Props["tone"] != "strong" {
				t.Errorf("v after the update: %+v", doc.Node("v"))
			}
		})
	}
}

func TestFieldsReadByGivesProps(t *testing.T) {
	p := NewParser(Options{Tools: []string{"notes.save"}})
	_, _ = p.WriteString("root = Stack([f, b])\nf = Input($note, label=\"Note\", required=true)\n" +
		"b = Button(\"Save\", action=\"save\")\nm = McpMutation(b, tool=\"notes.save\", params={note: $note})\n$note = \"\"\n")
	doc := p.End()
	if len(doc.Issues()) != 0 {
		t.Fatal(doc.Issues())
	}
	fields := doc.FieldsReadBy(doc.Mutation("b"))
	if len(fields) != 1 || fields[0].Props["required"] != true || fields[0].Props["value"] != StateRef("$note") {
		t.Fatalf("fields = %+v", fields)
	}
}

// TestConcurrentReaders reads one document from several goroutines at
// once; run with -race, it checks that building the props maps on first
// read is safe.
func TestConcurrentReaders(t *testing.T) {
	p := NewParser(perfOptions())
	for _, l := range perfScreen(400) {
		_, _ = p.Write(l)
	}
	doc := p.End()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			switch i % 2 {
			case 0:
				for _, n := range doc.Nodes() {
					if n.Type == "Text" && n.Props["tone"] != "muted" {
						t.Errorf("%s: %v", n.ID, n.Props)
					}
				}
			default:
				if n := doc.Node("pay"); n == nil || n.Props["action"] != "pay" {
					t.Errorf("pay: %+v", n)
				}
			}
		})
	}
	wg.Wait()
}

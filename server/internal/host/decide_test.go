package host

import (
	"encoding/json"
	"testing"
)

func TestEditJSON(t *testing.T) {
	d := &Decision{Key: "k", Binding: "1", Edits: []EditField{
		{Name: "n", Label: "Amount", Kind: "number"},
		{Name: "b", Label: "Active", Kind: "boolean"},
		{Name: "s", Label: "Plan", Kind: "select", Options: []EditOption{{Value: "pro", Label: "Pro"}}},
		{Name: "t", Label: "Note", Kind: "text"},
	}}
	for _, c := range []struct {
		name, text, want string
		ok               bool
	}{
		{"n", " 12.5 ", "12.5", true},
		{"n", "twelve", "", false},
		{"n", "Inf", "", false},
		{"n", "NaN", "", false},
		{"b", "true", "true", true},
		{"b", "maybe", "", false},
		{"s", "pro", `"pro"`, true},
		{"t", `say "hi"`, `"say \"hi\""`, true},
		{"x", "1", "", false},
	} {
		got, err := d.EditJSON(c.name, c.text)
		if (err == nil) != c.ok || c.ok && string(got) != c.want {
			t.Errorf("EditJSON(%q, %q) = %s, %v; want %s", c.name, c.text, got, err, c.want)
		}
	}
	if d.ID() != "k@1" || len(d.Editable()) != 4 || d.Anchor() == d.ID() {
		t.Errorf("ID %q, Editable %v, Anchor %q", d.ID(), d.Editable(), d.Anchor())
	}
}

// FuzzEditJSON checks that whatever a person types, the edit is either
// refused or valid JSON of the field's kind.
func FuzzEditJSON(f *testing.F) {
	for _, s := range []string{"", "0", "-1e308", "1e400", "true", "no", "pro", "\x00", "\"", "１２"} {
		f.Add(s)
	}
	d := &Decision{Edits: []EditField{{Name: "n", Kind: "number"}, {Name: "b", Kind: "boolean"}, {Name: "t", Kind: "text"}}}
	f.Fuzz(func(t *testing.T, text string) {
		for _, name := range []string{"n", "b", "t"} {
			raw, err := d.EditJSON(name, text)
			if err != nil {
				continue
			}
			var v any
			if json.Unmarshal(raw, &v) != nil {
				t.Fatalf("EditJSON(%q, %q) = %s, not JSON", name, text, raw)
			}
			switch v.(type) {
			case float64:
				if name != "n" {
					t.Fatalf("%s gave a number", name)
				}
			case bool:
				if name != "b" {
					t.Fatalf("%s gave a boolean", name)
				}
			case string:
				if name != "t" {
					t.Fatalf("%s gave a string", name)
				}
			default:
				t.Fatalf("EditJSON(%q, %q) = %s", name, text, raw)
			}
		}
	})
}

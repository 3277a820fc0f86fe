package screens

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/tool"
)

// show_screen's advertised limit is the one the part enforces.
func TestShowScreenLimitIsAdvertised(t *testing.T) {
	s, err := tool.SchemaFor(reflect.TypeFor[showScreenArgs](), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Properties["screen"].MaxLength; m == nil || *m != maxScreenChars {
		t.Fatalf("screen maxLength %v, want %d", m, maxScreenChars)
	}
}

// show_screen's output schema takes both of its answers as they are
// written on the wire, issues included (a line number, or null for an
// issue of no line), and refuses an answer of neither shape.
func TestShowScreenOutputSchema(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(showScreenOutput()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("out.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("out.json")
	if err != nil {
		t.Fatal(err)
	}
	issues := []screen.Issue{{Line: 3, Code: "unknown_component", Message: "no such component"}, {Code: "missing_root", Message: "no root"}}
	for _, tc := range []struct {
		name string
		v    any
		ok   bool
	}{
		{"shown", shownScreen{Screen: "s1", URL: "http://x/screens/s1", Components: 2, Rejected: issues[:1], Outline: "Card"}, true},
		{"shown with nothing rejected", shownScreen{Screen: "s1", URL: "u", Components: 1, Rejected: []screen.Issue{}, Outline: "Card"}, true},
		{"refused", rejectedScreen{Code: "screen_rejected", Message: "fix it", Issues: issues}, true},
		{"neither", map[string]any{"screen": 7}, false},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); (err == nil) != tc.ok {
			t.Errorf("%s: %s: valid = %v, want %v (%v)", tc.name, b, err == nil, tc.ok, err)
		}
	}
}

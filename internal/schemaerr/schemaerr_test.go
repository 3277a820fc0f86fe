package schemaerr

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestLeaves(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"object","properties":{"a":{"type":"string","maxLength":1},"b":{"enum":["x"]}},"required":["c"]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"a":"long","b":"y"}`))
	var ve *jsonschema.ValidationError
	if !errors.As(s.Validate(v), &ve) {
		t.Fatal("the value was not refused")
	}
	got := map[string]bool{}
	for _, l := range Leaves(ve) {
		if len(l.Causes) != 0 {
			t.Errorf("leaf %v has causes", l)
		}
		got[strings.Join(l.InstanceLocation, ".")] = true
	}
	for _, want := range []string{"", "a", "b"} {
		if !got[want] {
			t.Errorf("no failure at %q among %v", want, got)
		}
	}
}

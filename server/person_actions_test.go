package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
)

// enumStrings returns every string any enum in schema v offers.
func enumStrings(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "enum" {
				for _, e := range x.([]any) {
					if s, ok := e.(string); ok {
						out = append(out, s)
					}
				}
				continue
			}
			out = append(out, enumStrings(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, enumStrings(x)...)
		}
	}
	return out
}

// An agent is not offered what only a person may do: no tool it lists
// has an argument value for applying, clearing, undoing or discarding a
// proposal, or for approving, declining or publishing. Sending one anyway
// is refused with the code that says a person must.
func TestAgentIsNotOfferedPersonActions(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	person := []string{"apply", "clear", "undo", "discard", "approve", "decline", "publish"}
	var execute bool
	for _, tl := range list.Tools {
		var schema any
		if err := json.Unmarshal(assenttest.MustJSON(tl.InputSchema), &schema); err != nil {
			t.Fatal(err)
		}
		offered := enumStrings(schema)
		for _, a := range person {
			if slices.Contains(offered, a) {
				t.Errorf("%s offers the person-only action %q to an agent", tl.Name, a)
			}
		}
		if tl.Name == "controls_execute" {
			execute = true
			if !slices.Contains(offered, "stage") {
				t.Errorf("controls_execute does not offer stage: %v", offered)
			}
		}
	}
	if !execute {
		t.Fatal("controls_execute is not listed")
	}
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	for _, a := range []string{"apply", "undo"} {
		out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": a, "identity": plan})
		if !isErr || out["reason"] != "human_confirmation_required" {
			t.Errorf("agent %s: %v", a, out)
		}
	}
}

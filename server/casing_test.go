package server_test

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/assenttest"
)

// contractNames are the field names fixed by a contract outside assent
// (docs/http.md, "JSON field names"): the control contract, the Omni-IR
// transport and MCP itself. Every other field of a tool's result is
// snake_case.
var contractNames = []string{
	// The control contract.
	"formId", "controlId", "durationMs", "validationMessage", "stagedValue", "stagedAt",
	"valueRedacted", "stagedValueRedacted", "principalId", "sessionId", "subjectType", "subjectId",
	// The Omni-IR transport and MCP Apps.
	"stopReason", "minLength", "maxLength", "maxItems", "resourceUri", "prefersBorder",
	// MCP.
	"structuredContent", "isError", "progressToken",
}

// propertyNames collects the property names a JSON Schema declares, at
// any depth, with the path where each is declared.
func propertyNames(schema any, path string, out map[string]string) {
	switch s := schema.(type) {
	case map[string]any:
		if props, ok := s["properties"].(map[string]any); ok {
			for name, sub := range props {
				out[name] = path + "." + name
				propertyNames(sub, path+"."+name, out)
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			propertyNames(s[k], path+"[]", out)
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if list, ok := s[k].([]any); ok {
				for _, sub := range list {
					propertyNames(sub, path, out)
				}
			}
		}
		if defs, ok := s["$defs"].(map[string]any); ok {
			for _, sub := range defs {
				propertyNames(sub, path, out)
			}
		}
	}
}

// No MCP tool's result mixes casings: every field its output schema names
// is snake_case, or a name a contract fixes.
func TestToolResultsHaveOneCasing(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.AppsSession(f.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) < 15 {
		t.Fatalf("only %d tools listed", len(res.Tools))
	}
	var bad []string
	for _, tl := range res.Tools {
		raw, err := json.Marshal(tl.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema any
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		names := map[string]string{}
		propertyNames(schema, tl.Name, names)
		for name, where := range names {
			if name != strings.ToLower(name) && !slices.Contains(contractNames, name) {
				bad = append(bad, where)
			}
		}
	}
	// Real results too: their keys at any depth.
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"runtime_status", map[string]any{}},
		{"controls_list", map[string]any{}},
		{"controls_inspect", map[string]any{"identity": map[string]any{"formId": "profile", "controlId": "plan"}}},
		{"controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "pro"}},
		{"flows_list", map[string]any{}},
		{"flows_inspect", map[string]any{"instance": demo.ExpenseID}},
		{"flows_prescribe", map[string]any{"instance": demo.ExpenseID}},
		{"inbox_wait", map[string]any{"items": []any{map[string]any{"proposal": map[string]any{"formId": "profile", "controlId": "plan"}}}, "timeout_ms": 0}},
	} {
		out, isErr := assenttest.CallTool(t, cs, call.tool, call.args)
		if isErr {
			t.Fatalf("%s: %v", call.tool, out)
		}
		keys := map[string]string{}
		jsonKeys(out, call.tool, keys)
		if len(keys) < 2 {
			t.Fatalf("%s answered %v", call.tool, out)
		}
		for name, where := range keys {
			if name != strings.ToLower(name) && !slices.Contains(contractNames, name) {
				bad = append(bad, where)
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("fields of tool results that are neither snake_case nor fixed by a contract:\n%s", strings.Join(bad, "\n"))
	}
}

// jsonKeys collects the object keys of a decoded JSON value, at any depth,
// with the path where each is.
func jsonKeys(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			out[k] = path + "." + k
			jsonKeys(sub, path+"."+k, out)
		}
	case []any:
		for _, sub := range x {
			jsonKeys(sub, path+"[]", out)
		}
	}
}

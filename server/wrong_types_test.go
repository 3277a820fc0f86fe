package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/internal/assenttest"
)

// An argument of the wrong JSON type is refused, in every tool family, as
// invalid_params naming the argument and the JSON type it takes, never
// with a Go type or a decoder's words.
func TestWrongJSONTypesNameFieldAndType(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	cases := []struct {
		tool     string
		args     map[string]any
		field    string
		expected string
	}{
		{"controls_execute", map[string]any{"action": "explain", "identity": []any{"profile", "plan"}}, "identity", "object"},
		{"controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "pro", "revision": "3"}, "revision", "integer"},
		{"controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": 7, "controlId": "plan"}, "value": "pro"}, "identity.formId", "string"},
		{"controls_inspect", map[string]any{"identity": "profile/plan"}, "identity", "object"},
		{"controls_list", map[string]any{"formId": []any{"profile"}}, "formId", "string"},
		{"actors_run_spawn", map[string]any{"recipe": "demo-player", "values": []any{"a"}}, "values", "object"},
		{"actors_inspect", map[string]any{"target": 1, "view": "status"}, "target", "string"},
		{"actors_control_apply", map[string]any{"target": "run:x", "action": true}, "action", "string"},
		{"actors_tool_register", map[string]any{"name": "agent_x", "expose": "yes"}, "expose", "boolean"},
		{"flows_start", map[string]any{"program": "expense-approval", "phase": "draft", "facts": []any{"x"}}, "facts", "object"},
		{"flows_prescribe", map[string]any{"instance": map[string]any{"id": "x"}}, "instance", "string"},
		{"flows_inspect", map[string]any{"instance": 42}, "instance", "string"},
		{"flows_apply", map[string]any{"prescription": []any{}}, "prescription", "string"},
		{"inbox_wait", map[string]any{"items": map[string]any{"approval": "a"}}, "items", "array"},
		{"show_screen", map[string]any{"screen": 12}, "screen", "string"},
	}
	for _, c := range cases {
		t.Run(c.tool+"/"+c.field, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for _, ct := range res.Content {
				if tc, ok := ct.(*mcp.TextContent); ok {
					text.WriteString(tc.Text)
				}
			}
			all := text.String() + string(assenttest.MustJSON(res.StructuredContent))
			for _, leak := range []string{"Go value", "unmarshal", "struct {", "json:", "map[string]"} {
				if strings.Contains(all, leak) {
					t.Errorf("the refusal leaks %q: %s", leak, all)
				}
			}
			var body struct {
				Error struct {
					Code string         `json:"code"`
					Data map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(text.String()), &body); err != nil || !res.IsError {
				t.Fatalf("not an error in the one shape: %v %s", err, all)
			}
			e := body.Error
			if e.Code != "invalid_params" || e.Data["field"] != c.field || !strings.Contains(fmt.Sprint(e.Data["expected"]), c.expected) {
				t.Errorf("refusal %+v; want invalid_params on %q expecting %s", e, c.field, c.expected)
			}
		})
	}
}

// The HTTP API answers a body field of the wrong JSON type the same way:
// the field, in the body's own names, and the JSON type it takes.
func TestHTTPWrongJSONTypesNameFieldAndType(t *testing.T) {
	f := assenttest.StartDemo(t)
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	cases := []struct {
		path     string
		body     map[string]any
		field    string
		expected string
	}{
		{"/v1/controls/execute", map[string]any{"action": "explain", "identity": []any{1}}, "identity", "object"},
		{"/v1/controls/execute", map[string]any{"action": 5, "identity": plan}, "action", "string"},
		{"/v1/controls/execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": 7, "controlId": "plan"}}, "identity.formId", "string"},
		{"/v1/runs", map[string]any{"template": "echo", "values": []any{1}}, "values", "object"},
		{"/v1/runs/inspect", map[string]any{"target": 1}, "target", "string"},
		{"/v1/flows/instances", map[string]any{"program": 1}, "program", "string"},
	}
	for _, c := range cases {
		t.Run(c.path+"/"+c.field, func(t *testing.T) {
			code, body, raw := f.API("POST", c.path, f.Token, c.body)
			for _, leak := range []string{"Go value", "Go struct", "unmarshal", "json:", "map[string]", "executeArgs"} {
				if strings.Contains(raw, leak) {
					t.Errorf("the refusal leaks %q: %s", leak, raw)
				}
			}
			e, _ := body["error"].(map[string]any)
			data, _ := e["data"].(map[string]any)
			if code != 400 || e["code"] != "invalid_request" || data["field"] != c.field || data["expected"] != c.expected {
				t.Errorf("%d %s; want invalid_request on %q expecting %s", code, raw, c.field, c.expected)
			}
		})
	}
}

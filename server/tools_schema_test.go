package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
)

func compileOutputSchema(t *testing.T, tl *mcp.Tool) *jsonschema.Schema {
	t.Helper()
	raw, err := json.Marshal(tl.OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: outputSchema is not JSON: %v", tl.Name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("out.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("out.json")
	if err != nil {
		t.Fatalf("%s: outputSchema does not compile: %v", tl.Name, err)
	}
	return s
}

// Every listed tool states the shape of its structured result, and an
// ordinary client is not offered tools meant for an MCP App view only.
func TestToolListOutputSchemasAndAppOnlyTools(t *testing.T) {
	f := assenttest.Start(t, nil)
	pay := screens.Tool{Tool: confirm.Tool{
		Name:   "pay.now",
		Params: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`),
		Handler: func(context.Context, confirm.Request) (confirm.Result, error) {
			return confirm.Result{}, nil
		},
	}}
	if err := f.Srv.Screens().RegisterTool(pay); err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.OutputSchema == nil {
			t.Errorf("%s has no outputSchema", tl.Name)
			continue
		}
		compileOutputSchema(t, tl)
		if server.AppOnly(tl) {
			t.Errorf("app-only tool %s is listed to a client without MCP Apps support", tl.Name)
		}
		if tl.Name == "pay.now" {
			t.Errorf("pay.now listed to a client without MCP Apps support")
		}
	}

	apps, err := f.AppsSession(f.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer apps.Close()
	list, err = apps.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var view *mcp.Tool
	for _, tl := range list.Tools {
		if tl.Name == "pay.now" {
			view = tl
		}
	}
	if view == nil || !server.AppOnly(view) {
		t.Fatalf("a client with MCP Apps support does not see pay.now with its _meta: %+v", view)
	}
}

// The structured result of every tool called with empty arguments conforms
// to the tool's outputSchema unless the result is an error, and its text
// carries data.
func TestToolResultsConformToOutputSchema(t *testing.T) {
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
	ctx := context.Background()
	for _, tl := range list.Tools {
		if tl.Annotations != nil && !tl.Annotations.ReadOnlyHint {
			continue
		}
		if tl.Name == "inbox_wait" {
			continue // blocks until something is decided
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tl.Name, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			continue
		}
		if len(res.Content) == 0 {
			t.Errorf("%s: result has no content", tl.Name)
		} else if tc, ok := res.Content[0].(*mcp.TextContent); !ok || len(tc.Text) < 2 {
			t.Errorf("%s: result text is empty", tl.Name)
		}
		if res.StructuredContent == nil {
			continue
		}
		raw, _ := json.Marshal(res.StructuredContent)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := compileOutputSchema(t, tl).Validate(v); err != nil {
			t.Errorf("%s: structuredContent does not conform to outputSchema: %v", tl.Name, err)
		}
	}
}

// Results that create something a person should see carry its page, as an
// absolute URL on the server's BaseURL, and conform to the tool's schema.
func TestToolResultsCarryURLs(t *testing.T) {
	const base = "http://assent.test:8080"
	f := assenttest.StartDemo(t, func(c *server.Config) { c.BaseURL = base + "/" })
	builder, _, err := auth.IssueToken(context.Background(), f.DB, store.KindAgent, "builder", []string{"command.execute"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := f.MCPSession(builder, "")
	if err != nil {
		t.Fatal(err)
	}
	defer trusted.Close()
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := trusted.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		schemas[tl.Name] = tl
	}
	tests := []struct {
		tool   string
		args   map[string]any
		prefix string
		as     *mcp.ClientSession
	}{
		{"controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "pro"}, base + "/inbox", cs},
		{"show_screen", map[string]any{"screen": "root = Heading(\"Hello\")\n"}, base + "/screens/", cs},
		{"flows_prescribe", map[string]any{"instance": demo.ExpenseID}, base + "/flows/instances/" + demo.ExpenseID, cs},
		{"actors_run_spawn", map[string]any{"template": "true", "as": "run:u1"}, base + "/runs/u1", trusted},
		{"actors_run_spawn", map[string]any{"template": "true", "as": "run:u2"}, base + "/runs/proposals/", cs},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			res, err := tt.as.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			raw, _ := json.Marshal(res.StructuredContent)
			var out map[string]any
			json.Unmarshal(raw, &out)
			if u, _ := out["url"].(string); !strings.HasPrefix(u, tt.prefix) {
				t.Errorf("url = %q, want prefix %q", u, tt.prefix)
			}
			tc, ok := res.Content[0].(*mcp.TextContent)
			if !ok || len(tc.Text) < 2 {
				t.Errorf("result text is empty")
			}
			tl := schemas[tt.tool]
			if tl == nil {
				t.Fatalf("%s is not listed", tt.tool)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := compileOutputSchema(t, tl).Validate(v); err != nil {
				t.Errorf("structuredContent does not conform to outputSchema: %v", err)
			}
		})
	}
}

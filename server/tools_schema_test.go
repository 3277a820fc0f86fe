package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
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

// exampleOrder is the order in which the tools' examples are called where
// one example needs what another makes: the Run the spawn example starts
// is the one the control example kills, and the Flow instance the start
// example makes is the one the inspect and prescribe examples name.
var exampleOrder = []string{"actors_run_spawn", "actors_control_apply", "flows_start", "flows_inspect", "flows_prescribe"}

// Every tool assent provides declares an example call; called with it, the
// tool answers without an error, with text, and its structuredContent
// conforms to its outputSchema. flows_apply's example names a
// prescription id, which only a prescribe answer gives: it is called with
// the prescription of the prescribe example's answer.
func TestToolExamplesConformToOutputSchema(t *testing.T) {
	f := assenttest.StartDemo(t)
	builder, _, err := auth.IssueToken(context.Background(), f.DB, store.KindAgent, "builder", []string{"command.execute", "state.write"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(builder, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]*mcp.Tool{}
	var names []string
	for _, tl := range list.Tools {
		listed[tl.Name] = tl
		if !slices.Contains(exampleOrder, tl.Name) {
			names = append(names, tl.Name)
		}
	}
	names = append(slices.Clone(exampleOrder), names...)
	ctx := context.Background()
	var prescription string
	called := 0
	for _, name := range names {
		tl := listed[name]
		if tl == nil {
			t.Errorf("%s is not listed", name)
			continue
		}
		def, ok := f.Srv.Tools().Lookup(name)
		if !ok {
			t.Errorf("%s is listed but not registered", name)
			continue
		}
		if def.Owner != "" {
			continue // registered at run time by a principal, not assent's own
		}
		if def.Example == nil {
			t.Errorf("%s declares no example call", name)
			continue
		}
		var args map[string]any
		if err := json.Unmarshal(def.Example, &args); err != nil {
			t.Errorf("%s: example %s is not an object: %v", name, def.Example, err)
			continue
		}
		if name == "flows_apply" {
			if prescription == "" {
				t.Errorf("flows_prescribe's example gave no prescription to apply")
				continue
			}
			args["prescription"] = prescription
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Errorf("%s %s: %v %s", name, def.Example, err, assenttest.MustJSON(res))
			continue
		}
		called++
		if len(res.Content) == 0 {
			t.Errorf("%s: result has no content", name)
		} else if tc, ok := res.Content[0].(*mcp.TextContent); !ok || len(tc.Text) < 2 {
			t.Errorf("%s: result text is empty", name)
		}
		if res.StructuredContent == nil {
			t.Errorf("%s: result has no structuredContent", name)
			continue
		}
		raw, _ := json.Marshal(res.StructuredContent)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := compileOutputSchema(t, tl).Validate(v); err != nil {
			t.Errorf("%s: structuredContent %s does not conform to outputSchema: %v", name, raw, err)
		}
		if name == "flows_prescribe" {
			var out struct {
				Decision struct {
					Prescription struct {
						ID string `json:"id"`
					} `json:"prescription"`
				} `json:"decision"`
			}
			json.Unmarshal(raw, &out)
			prescription = out.Decision.Prescription.ID
		}
	}
	if called < len(exampleOrder)+1 {
		t.Fatalf("only %d tools answered their examples", called)
	}
	t.Logf("%d tools answered their examples", called)
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

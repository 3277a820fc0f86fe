package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// nextChecker validates the next actions of tool results against the
// tools a session is offered.
type nextChecker struct {
	t       *testing.T
	cs      *mcp.ClientSession
	schemas map[string]*jsonschema.Schema
	seen    int
}

func newNextChecker(t *testing.T, cs *mcp.ClientSession) *nextChecker {
	t.Helper()
	nc := &nextChecker{t: t, cs: cs}
	nc.list()
	return nc
}

// list reads the tools the session is offered now.
func (nc *nextChecker) list() {
	t := nc.t
	t.Helper()
	list, err := nc.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	nc.schemas = map[string]*jsonschema.Schema{}
	for _, tl := range list.Tools {
		raw, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("in.json", doc); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("in.json")
		if err != nil {
			t.Fatalf("%s: input schema: %v", tl.Name, err)
		}
		nc.schemas[tl.Name] = s
	}
}

// call calls name and checks every next action anywhere in its answer.
func (nc *nextChecker) call(cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	nc.t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		nc.t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	_ = json.Unmarshal(assenttest.MustJSON(res.StructuredContent), &out)
	nc.walk(name, out)
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			var v any
			if json.Unmarshal([]byte(tc.Text), &v) == nil {
				nc.walk(name, v)
			}
		}
	}
	return out
}

func (nc *nextChecker) walk(from string, v any) {
	nc.t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "next_actions" {
				nc.check(from, x)
				continue
			}
			nc.walk(from, x)
		}
	case []any:
		for _, x := range v {
			nc.walk(from, x)
		}
	}
}

func (nc *nextChecker) check(from string, v any) {
	nc.t.Helper()
	list, ok := v.([]any)
	if !ok {
		nc.t.Errorf("%s: next_actions is %T, not a list", from, v)
		return
	}
	for _, x := range list {
		a, ok := x.(map[string]any)
		if !ok {
			nc.t.Errorf("%s: next action %v is not a tool call", from, x)
			continue
		}
		name, _ := a["tool"].(string)
		s, ok := nc.schemas[name]
		if !ok {
			nc.list() // the call may have registered a tool
			s, ok = nc.schemas[name]
		}
		if !ok {
			nc.t.Errorf("%s: next action names %q, which is not a tool this caller is offered", from, a["tool"])
			continue
		}
		args, ok := a["arguments"].(map[string]any)
		if !ok {
			nc.t.Errorf("%s: next action %s has no arguments object: %v", from, name, a)
			continue
		}
		if err := s.Validate(args); err != nil {
			nc.t.Errorf("%s: next action %s%v does not fit %s's input schema: %v", from, name, args, name, err)
		}
		nc.seen++
	}
}

// Every next action a tool answer suggests names a tool the agent is
// offered, with arguments that tool's input schema accepts, along the
// paths of Runs, Recipes, tools and command proposals.
func TestNextActionsAreCallableTools(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := context.Background()
	agent, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	builderTok, _, err := auth.IssueToken(ctx, f.DB, store.KindAgent, "builder", []string{"command.execute"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	builder, err := f.MCPSession(builderTok, "")
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close()
	nc, nb := newNextChecker(t, agent), newNextChecker(t, builder)

	// An agent without command.execute files proposals.
	spawn := nc.call(agent, "actors_run_spawn", map[string]any{"template": "echo next", "as": "run:next1"})
	reg := nc.call(agent, "actors_tool_register", map[string]any{"name": "agent_hello", "template": "echo hello", "description": "says hello"})
	for _, target := range []string{"runtime", "recipes"} {
		for _, view := range []string{"status", "runs", "triage", "summary"} {
			nc.call(agent, "actors_inspect", map[string]any{"target": target, "view": view})
		}
	}
	cookie, csrf := f.SignIn()
	for _, p := range []map[string]any{spawn, reg} {
		id, _ := p["proposal"].(string)
		if id == "" {
			t.Fatalf("no proposal filed: %v", p)
		}
		nc.call(agent, "actors_inspect", map[string]any{"target": "proposal:" + id, "view": "status"})
		f.Decide("/runs/proposals/"+id+"/approve", url.Values{"csrf": {csrf}}, cookie)
		nc.call(agent, "actors_inspect", map[string]any{"target": "proposal:" + id, "view": "status"})
	}
	for _, view := range []string{"status", "schema"} {
		nc.call(agent, "actors_inspect", map[string]any{"target": "tool:agent_hello", "view": view})
	}

	// An agent trusted with commands runs and steers its own.
	nb.call(builder, "actors_run_spawn", map[string]any{"template": "sleep 30", "as": "run:next2", "control": "pause"})
	nb.call(builder, "actors_control_apply", map[string]any{"target": "run:next2", "action": "pause"})
	for _, view := range []string{"status", "recipe", "trace", "control"} {
		nb.call(builder, "actors_inspect", map[string]any{"target": "run:next2", "view": view})
	}
	nb.call(builder, "actors_tool_register", map[string]any{"name": "builder_hello", "template": "echo {who}", "args": "who", "description": "greets"})
	nb.call(builder, "actors_tool_register", map[string]any{"name": "builder_plain", "template": "echo plain", "description": "plain"})
	nb.call(builder, "actors_inspect", map[string]any{"target": "tool:builder_hello", "view": "status"})
	nb.call(builder, "actors_inspect", map[string]any{"target": "runtime", "view": "triage"})
	nb.call(builder, "actors_control_apply", map[string]any{"target": "run:next2", "action": "stop"})
	testwait.EventuallyC(t, 15*time.Second, func(c *testwait.C) {
		st := nb.call(builder, "actors_inspect", map[string]any{"target": "run:next2", "view": "status"})
		if st["status"] == "running" {
			c.Errorf("still running: %v", st)
		}
	}, "run next2 ending")
	if nc.seen+nb.seen < 10 {
		t.Errorf("only %d next actions checked; the paths above give more", nc.seen+nb.seen)
	}
	t.Logf("%d next actions checked", nc.seen+nb.seen)
}

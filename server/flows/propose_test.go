package flows_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
)

// An agent proposes a program over MCP with flows_program_propose, by the
// path of POST /v1/flows/programs: each bad input is refused with the code
// the route gives it, a good one is filed as a proposal with its deadline,
// proposing it again files nothing new, and a service granted flow.load
// loads it active.
func TestFlowsProgramProposeTool(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	unknownField := strings.Replace(sneakProgram, `"owned_resources": [],`, `"owned_resources": [], "surprise": 1,`, 1)
	for _, tc := range []struct {
		name     string
		program  string
		reason   string
		deadline int64
		code     string
	}{
		{"not JSON", "{", "", 0, ""},
		{"an unknown field", unknownField, "", 0, ""},
		{"a reason over 500 characters", sneakProgram, strings.Repeat("é", 501), 0, "invalid_value"},
		{"a reason with a control character", sneakProgram, "pay\x07faster", 0, "invalid_value"},
		{"a deadline past 30 days", sneakProgram, "", 30*24*3600 + 1, "invalid_request"},
		{"a negative deadline", sneakProgram, "", -5, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := url.Values{}
			if tc.reason != "" {
				q.Set("reason", tc.reason)
			}
			if tc.deadline != 0 {
				q.Set("deadline_seconds", fmt.Sprint(tc.deadline))
			}
			status, body, raw := f.API("POST", "/v1/flows/programs?"+q.Encode(), f.Token, []byte(tc.program))
			routeCode := assenttest.ErrCode(body)
			if status < 400 || routeCode == "" {
				t.Fatalf("the route took it: %d %s", status, raw)
			}
			args := map[string]any{"program": tc.program}
			if tc.reason != "" {
				args["reason"] = tc.reason
			}
			if tc.deadline != 0 {
				args["deadline_seconds"] = tc.deadline
			}
			out, isErr := assenttest.CallTool(t, cs, "flows_program_propose", args)
			if !isErr || string(errorOf(t, out).Code) != routeCode {
				t.Fatalf("flows_program_propose = %v, want the route's %s", out, routeCode)
			}
			if tc.code != "" && routeCode != tc.code {
				t.Fatalf("code %s, want %s", routeCode, tc.code)
			}
		})
	}
	if out, isErr := assenttest.CallTool(t, cs, "flows_program_propose", map[string]any{}); !isErr || errorOf(t, out).Code != "invalid_params" {
		t.Fatalf("no program: %v", out)
	}

	args := map[string]any{"program": sneakProgram, "reason": "pay suppliers faster", "deadline_seconds": 3600}
	before := time.Now()
	out, isErr := assenttest.CallTool(t, cs, "flows_program_propose", args)
	fp, _ := out["fingerprint"].(string)
	due, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(out["deadline"]))
	if isErr || out["status"] != "proposed" || !strings.HasPrefix(fp, "sha256:") || due.Before(before.Add(time.Hour-time.Second)) || due.After(time.Now().Add(time.Hour)) {
		t.Fatalf("propose: %v", out)
	}
	next := fmt.Sprint(out["next_actions"])
	if !strings.Contains(next, "inbox_wait") || !strings.Contains(next, fp) || !strings.Contains(fmt.Sprint(out["url"]), "/inbox#section-flow-programs") {
		t.Fatalf("the answer does not say how to wait: %v", out)
	}
	if d := f.Srv.Flows().ProgramProposalDeadline(t.Context(), fp); d.Sub(due).Abs() >= time.Millisecond {
		t.Fatalf("stored deadline %s, answered %s", d, due)
	}
	// The route sees the same proposal, with its reason.
	if code, body, raw := f.API("GET", "/v1/flows/programs/"+fp, f.Token, nil); code != 200 || !strings.Contains(raw, "proposed") {
		t.Fatalf("GET the proposal: %d %v", code, body)
	}
	again, isErr := assenttest.CallTool(t, cs, "flows_program_propose", args)
	if isErr || again["status"] != "proposed" || again["fingerprint"] != fp {
		t.Fatalf("propose again: %v", again)
	}
	loads, err := f.Srv.Flows().Kernel().ProgramLoads(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range loads {
		if l.Fingerprint == fp {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d loads of %s, want 1", n, fp)
	}

	// The bounds on an agent's proposals hold over MCP as over HTTP.
	f.Srv.Flows().SetLimits(flows.Limits{ProgramBytes: 256, ProgramTransitions: 20, PendingPrograms: 2, PendingApprovals: 2})
	big := strings.Replace(sneakProgram, `"program_id": "sneak"`, `"program_id": "sneak-big"`, 1)
	if code, body, raw := f.API("POST", "/v1/flows/programs", f.Token, []byte(big)); code != 413 || assenttest.ErrCode(body) != "limit_exceeded" {
		t.Fatalf("the route took a program over the limit: %d %s", code, raw)
	}
	if out, isErr := assenttest.CallTool(t, cs, "flows_program_propose", map[string]any{"program": big}); !isErr || errorOf(t, out).Code != "limit_exceeded" {
		t.Fatalf("flows_program_propose took a program over the limit: %v", out)
	}
	f.Srv.Flows().SetLimits(flows.DefaultLimits)

	svcTok, _ := f.Issue(store.KindService, "deployer", "flow.load", "tool.invoke")
	scs, err := f.MCPSession(svcTok, "")
	if err != nil {
		t.Fatal(err)
	}
	defer scs.Close()
	other := strings.Replace(sneakProgram, `"program_id": "sneak"`, `"program_id": "sneak-loaded"`, 1)
	out, isErr = assenttest.CallTool(t, scs, "flows_program_propose", map[string]any{"program": other, "deadline_seconds": 60})
	if isErr || out["status"] != "active" || out["deadline"] != nil || strings.Contains(fmt.Sprint(out["next_actions"]), "inbox_wait") {
		t.Fatalf("a service granted flow.load: %v", out)
	}
}

// A program an agent proposes over MCP waits in a person's inbox with the
// agent's reason, and inbox_wait hears the person's approval, after which
// the agent starts an instance of it.
func TestFlowsProgramProposeReachesAPerson(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "flows_program_propose", map[string]any{"program": sneakProgram, "reason": "pay suppliers faster"})
	fp, _ := out["fingerprint"].(string)
	if isErr || fp == "" {
		t.Fatalf("propose: %v", out)
	}
	_, person := f.Issue(store.KindHuman, "approver")
	cookie, csrf := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	for _, want := range []string{"/web/flows/programs/" + fp + "/approve", "pay suppliers faster"} {
		if !strings.Contains(inbox, want) {
			t.Fatalf("inbox lacks %q:\n%s", want, inbox)
		}
	}
	waited := make(chan map[string]any, 1)
	go func() {
		out, _ := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"program": fp}}, "timeout_ms": 30000})
		waited <- out
	}()
	if loc, page := f.Decide("/web/flows/programs/"+fp+"/approve", url.Values{"csrf": {csrf}}, cookie); loc != "/flows" {
		t.Fatalf("approve: %s\n%s", loc, page)
	}
	got := <-waited
	items, _ := got["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["status"] != "approved" {
		t.Fatalf("inbox_wait: %v", got)
	}
	if code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "sneak", "phase": "start"}); code != 201 {
		t.Fatalf("start after approval: %d %s", code, raw)
	}
}

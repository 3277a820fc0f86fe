package server_test

import (
	"bytes"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/assenttest"
)

// inboxItem returns the open decision of the signed-in person whose id
// starts with prefix and contains part.
func inboxItem(t *testing.T, f *assenttest.Kit, prefix, part string) api.InboxItem {
	t.Helper()
	cookie, _ := f.SignIn()
	var in api.Inbox
	if c := session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in); c != 200 {
		t.Fatalf("GET /v1/inbox: %d", c)
	}
	for _, it := range in.Items {
		if strings.HasPrefix(it.ID, prefix) && strings.Contains(it.ID, part) {
			return it
		}
	}
	t.Fatalf("no inbox item %s…%s in %+v", prefix, part, in.Items)
	return api.InboxItem{}
}

// An agent's reason for a command or tool proposal is kept with it and
// shown to the person as written (escaped, hidden characters revealed):
// on the card, in the JSON inbox, on the proposal's page and in its
// status. A reason over the limit is refused as invalid_value and files
// nothing.
func TestCommandProposalCarriesReason(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	why := "the <b>nightly</b> export failed\u202e; rerun it"
	out, isErr := assenttest.CallTool(t, cs, "actors_run_spawn", map[string]any{"template": "echo export", "as": "run:why1", "reason": why})
	id, _ := out["proposal"].(string)
	if isErr || id == "" {
		t.Fatalf("spawn: %v", out)
	}
	wantShown := "the &lt;b&gt;nightly&lt;/b&gt; export failed"
	st, _ := assenttest.CallTool(t, cs, "actors_inspect", map[string]any{"target": "proposal:" + id, "view": "status"})
	if st["why"] != strings.TrimSpace(why) {
		t.Errorf("status why = %v", st["why"])
	}
	if it := inboxItem(t, f, "command_proposal", id); it.Why != why {
		t.Errorf("inbox item why = %q, want %q", it.Why, why)
	}
	cookie, _ := f.SignIn()
	for _, path := range []string{"/inbox", "/runs/proposals/" + id} {
		page, _ := io.ReadAll(f.Get(path, cookie).Body)
		if !strings.Contains(string(page), wantShown) || strings.Contains(string(page), "<b>nightly") || strings.Contains(string(page), "\u202e") {
			t.Errorf("%s does not show the reason escaped, with its hidden character revealed", path)
		}
		if !strings.Contains(string(page), "Why") {
			t.Errorf("%s has no Why", path)
		}
	}

	out, _ = assenttest.CallTool(t, cs, "actors_tool_register", map[string]any{"name": "agent_why", "template": "echo hi", "description": "hi", "reason": "to greet"})
	tid, _ := out["proposal"].(string)
	if it := inboxItem(t, f, "command_proposal", tid); tid == "" || it.Why != "to greet" {
		t.Errorf("tool proposal: %v, inbox why %q", out, it.Why)
	}

	long := strings.Repeat("x", 501)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"actors_run_spawn", map[string]any{"template": "echo x", "as": "run:why2", "reason": long}},
		{"actors_tool_register", map[string]any{"name": "agent_long", "template": "echo x", "description": "x", "reason": long}},
		{"actors_run_spawn", map[string]any{"template": "echo x", "as": "run:why3", "reason": "bell\a"}},
	} {
		out, isErr := assenttest.CallTool(t, cs, c.tool, c.args)
		if !isErr || !strings.Contains(string(assenttest.MustJSON(out)), "invalid_value") {
			t.Errorf("%s with a bad reason: %v", c.tool, out)
		}
	}
	if c, body, _ := f.API("POST", "/v1/runs", f.Token, map[string]any{"template": "echo x", "as": "run:why4", "reason": long}); c == 202 || assenttest.ErrCode(body) != "invalid_value" {
		t.Errorf("HTTP spawn with a long reason: %d %v", c, body)
	}
	if c, body, _ := f.API("GET", "/v1/proposals?status=pending", f.Token, nil); c != 200 || len(body["proposals"].([]any)) != 2 {
		t.Errorf("pending proposals after the refusals: %d %v", c, body)
	}
}

// An agent's reason for a staged value is kept with the proposal, across
// a restart, and shown as written on the card, in the JSON inbox and in
// the control's snapshot. A reason over the limit is invalid_value and
// stages nothing; a reason with another command is refused.
func TestStagedValueCarriesReason(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "pro", "reason": long(501)})
	if !isErr || out["reason"] != "invalid_value" {
		t.Fatalf("stage with a long reason: %v", out)
	}
	out, isErr = assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "explain", "identity": plan, "reason": "why not"})
	if !isErr || out["reason"] != "invalid_request" {
		t.Fatalf("explain with a reason: %v", out)
	}
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": plan})
	if staged := snap["state"].(map[string]any)["staged"]; staged != nil {
		t.Fatalf("a refused stage staged %v", staged)
	}
	why := "the team grew to <i>twelve</i>\u200b people"
	out, isErr = assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "pro", "reason": why})
	if isErr || out["ok"] != true {
		t.Fatalf("stage: %v", out)
	}
	cs.Close()

	f = f.Restart(nil)
	cs, err = f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	snap, _ = assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": plan})
	staged, _ := snap["state"].(map[string]any)["staged"].(map[string]any)
	if staged["why"] != why {
		t.Errorf("after a restart the staged proposal is %v, want why %q", staged, why)
	}
	if it := inboxItem(t, f, "control_proposal", "plan"); it.Why != why {
		t.Errorf("inbox item why = %q", it.Why)
	}
	cookie, _ := f.SignIn()
	page, _ := io.ReadAll(f.Get("/inbox", cookie).Body)
	if !strings.Contains(string(page), "the team grew to &lt;i&gt;twelve&lt;/i&gt;") || strings.Contains(string(page), "\u200b") {
		t.Errorf("the inbox does not show the reason escaped, its hidden character revealed")
	}
}

func long(n int) string { return strings.Repeat("y", n) }

// What a person writes when deciding a command proposal — a note with an
// approval, the reason of a decline — reaches the agent where it looks
// next: actors_inspect of the proposal.
func TestCommandProposalDecisionWordsReachAgent(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cookie, csrf := f.SignIn()
	cases := []struct {
		run, decision, note, status string
	}{
		{"words1", "approve", "fine, but only this once", "approved"},
		{"words2", "decline", "not during the audit <b>week</b>", "declined"},
	}
	for _, c := range cases {
		out, _ := assenttest.CallTool(t, cs, "actors_run_spawn", map[string]any{"template": "echo " + c.run, "as": "run:" + c.run})
		id, _ := out["proposal"].(string)
		it := inboxItem(t, f, "command_proposal", id)
		var o api.InboxOutcome
		if code := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision", api.InboxDecision{Decision: c.decision, Note: c.note}, &o); code != 200 || o.Status != c.status {
			t.Fatalf("%s %s: %d %+v", c.decision, id, code, o)
		}
		st, _ := assenttest.CallTool(t, cs, "actors_inspect", map[string]any{"target": "proposal:" + id, "view": "status"})
		notes, _ := st["notes"].([]any)
		if st["status"] != c.status || len(notes) != 1 {
			t.Fatalf("%s: status %v, notes %v", c.decision, st["status"], st["notes"])
		}
		n := notes[0].(map[string]any)
		if n["text"] != c.note || n["decision"] != c.decision || n["by"] != f.Boot.Owner.ID {
			t.Errorf("%s: note %v", c.decision, n)
		}
		if c.decision == "decline" && st["reason"] != c.note {
			t.Errorf("decline reason %v", st["reason"])
		}
	}
}

// A person's note on approving a Flow approval, and the reason of a
// decline, reach the agent in flows_inspect of that approval.
func TestFlowApprovalDecisionWordsReachAgent(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cookie, csrf := f.SignIn()
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	aprID := approvalOf(t, out).ID
	it := inboxItem(t, f, "flow_approval", aprID)
	note := "approved; file the receipt by Friday"
	var o api.InboxOutcome
	if code := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision", api.InboxDecision{Decision: "approve", Note: note}, &o); code != 200 || o.Status != "approved" {
		t.Fatalf("approve: %d %+v", code, o)
	}
	v, isErr := assenttest.CallTool(t, cs, "flows_inspect", map[string]any{"instance": demo.ExpenseID, "approval": aprID})
	notes, _ := v["approval_notes"].([]any)
	if isErr || len(notes) != 1 || notes[0].(map[string]any)["text"] != note || notes[0].(map[string]any)["decision"] != "approve" {
		t.Fatalf("flows_inspect approval_notes: %v", v["approval_notes"])
	}
}

// An agent's reason for proposing a program is kept with the proposal and
// shown as written on its card and in the JSON inbox; a reason over the
// limit is refused invalid_value before anything is proposed.
func TestProgramProposalCarriesReason(t *testing.T) {
	f := assenttest.StartDemo(t)
	src, err := os.ReadFile("../examples/flows/expense-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	prog := bytes.Replace(src, []byte(`"program_id": "expense-approval"`), []byte(`"program_id": "expense-why"`), 1)
	if c, body, _ := f.API("POST", "/v1/flows/programs?reason="+url.QueryEscape(long(501)), f.Token, prog); c == 202 || assenttest.ErrCode(body) != "invalid_value" {
		t.Fatalf("proposal with a long reason: %d %v", c, body)
	}
	if c, body, _ := f.API("GET", "/v1/flows/programs", f.Token, nil); c != 200 || strings.Contains(string(assenttest.MustJSON(body)), "expense-why") {
		t.Fatalf("a refused proposal was stored: %d %v", c, body)
	}
	why := "refunds over 200 EUR need a <b>second</b> look"
	c, body, _ := f.API("POST", "/v1/flows/programs?reason="+url.QueryEscape(why), f.Token, prog)
	fp, _ := dig(body, "program", "fingerprint").(string)
	if c != 202 || fp == "" {
		t.Fatalf("proposal: %d %v", c, body)
	}
	if it := inboxItem(t, f, "flow_program", fp); it.Why != why {
		t.Errorf("inbox item why = %q, want %q", it.Why, why)
	}
	cookie, _ := f.SignIn()
	page, _ := io.ReadAll(f.Get("/inbox", cookie).Body)
	if !strings.Contains(string(page), "need a &lt;b&gt;second&lt;/b&gt; look") {
		t.Error("the inbox does not show the program's reason, escaped")
	}
}

// dig walks nested JSON objects.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

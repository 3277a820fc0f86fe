package server_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// inspectNotes calls controls_inspect on the demo's plan as the session's
// agent and returns the notes of its answer.
func inspectNotes(t *testing.T, cs *mcp.ClientSession) []heardNote {
	t.Helper()
	out, isErr := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": map[string]any{"formId": "profile", "controlId": "plan"}})
	if isErr {
		t.Fatalf("controls_inspect: %v", out)
	}
	ans := assenttest.As[struct {
		Identity struct {
			FormID string `json:"formId"`
		} `json:"identity"`
		Notes []heardNote `json:"notes"`
	}](t, out)
	if ans.Identity.FormID != "profile" {
		t.Fatalf("controls_inspect lost the snapshot: %v", out)
	}
	return ans.Notes
}

// A person discards an agent's proposal with a reason: the agent that
// staged it reads the reason with controls_inspect after the proposal is
// gone, and another agent never reads it.
func TestControlsInspectNotesOfTheProposer(t *testing.T) {
	f := assenttest.StartDemo(t)
	csA, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer csA.Close()
	_, person := f.Issue(store.KindHuman, "person")
	// Agent B is the person's to oversee, so its proposals are routed to
	// them (agent A is the workspace's own, every person's).
	tokB, _, err := f.Srv.AddAgent(t.Context(), "other", []string{"state.write"}, person.ID)
	if err != nil {
		t.Fatal(err)
	}
	csB, err := f.MCPSession(tokB, "")
	if err != nil {
		t.Fatal(err)
	}
	defer csB.Close()
	cookie, csrf := f.SignInAs(person.ID)

	// discard declines the open proposal on the plan with reason.
	discard := func(reason string) {
		t.Helper()
		var in api.Inbox
		session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in)
		ctl, ok := byKind(in, "control_proposal")
		if !ok {
			t.Fatalf("no proposal in the inbox: %+v", in)
		}
		var o api.InboxOutcome
		if c := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(ctl.ID)+"/decision", api.InboxDecision{Decision: "decline", Note: reason}, &o); c != 200 || o.Status != "declined" {
			t.Fatalf("discard: %d %+v", c, o)
		}
	}

	if n := inspectNotes(t, csA); len(n) != 0 {
		t.Fatalf("notes before anything was written: %+v", n)
	}
	stage(t, csA, "pro")
	discard("Pro is over our budget.")
	a := inspectNotes(t, csA)
	if len(a) != 1 || a[0].Text != "Pro is over our budget." || a[0].By != person.ID || a[0].Decision != "decline" {
		t.Errorf("agent A reads %+v, want the reason of the discard", a)
	}
	if b := inspectNotes(t, csB); len(b) != 0 {
		t.Errorf("agent B reads notes on A's proposal: %+v", b)
	}

	// B's own proposal, discarded with its own reason: each reads only
	// the words on what it staged.
	if out, isErr := assenttest.CallTool(t, csB, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "team"}); isErr {
		t.Fatalf("B stages: %v", out)
	}
	discard("Not now, B.")
	if b := inspectNotes(t, csB); len(b) != 1 || b[0].Text != "Not now, B." {
		t.Errorf("agent B reads %+v", b)
	}
	for _, n := range inspectNotes(t, csA) {
		if strings.Contains(n.Text, "B.") {
			t.Errorf("agent A reads B's note: %+v", n)
		}
	}
	// The notes are kept by the store: a restarted server still shows them.
	f2 := f.Restart(nil)
	cs2, err := f2.MCPSession(f2.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	if a := inspectNotes(t, cs2); len(a) != 1 || a[0].Text != "Pro is over our budget." {
		t.Errorf("agent A after a restart reads %+v", a)
	}
}

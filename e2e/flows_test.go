package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// signInAs signs a person other than the owner in through a fresh one-time
// link.
func (a *app) signInAs(ctx context.Context, p store.Principal) {
	a.t.Helper()
	link, err := server.NewSignInLink(context.Background(), a.db, p.ID, a.http.URL, time.Now())
	if err != nil {
		a.t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("signin-continue")),
		chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name")),
	)
	if err != nil {
		a.t.Fatalf("sign in: %v", err)
	}
	if who := text(a.t, ctx, chromedp.ID("who-name")); who != p.Name {
		a.t.Fatalf("signed in as %q, want %q", who, p.Name)
	}
}

// TestAgentAsksPersonApprovesExpense: an agent over MCP asks for the next
// step of the demo expense and gets FRONTIER awaiting a person; the
// person's open inbox shows the approval request live, with the program
// fingerprint; the person approves in the browser; the agent sees the
// approval's outcome and the receipt.
func TestAgentAsksPersonApprovesExpense(t *testing.T) {
	a := newApp(t, true)
	// A person whose token grants what the approve transition needs besides
	// human.approve, which approving adds for this one admission.
	_, person, err := server.IssueToken(context.Background(), a.db, store.KindHuman, "approver", []string{"state.write"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	a.signInAs(ctx, person)
	agent := a.agent()

	out, isErr := call(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"})
	decision, _ := out["decision"].(map[string]any)
	approval, _ := out["approval"].(map[string]any)
	if isErr || decision["kind"] != "FRONTIER" || decision["awaiting"] != "human" || approval == nil {
		t.Fatalf("prescribe: %v", out)
	}
	aprID := approval["id"].(string)
	fingerprint := approval["program_fingerprint"].(string)

	// The inbox, already open, shows the request by itself.
	approve := `#section-flow-approvals form[action="/web/flows/approvals/` + aprID + `/approve"] button`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(approve))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("the approval request did not appear: %v", err)
	}
	item := text(t, ctx, chromedp.CSS("#section-flow-approvals .item"))
	for _, want := range []string{"expense-approval/approve", "approve_expense", "a person approved the expense", fingerprint, "human.approve, state.write", "agent"} {
		if !strings.Contains(item, want) {
			t.Errorf("approval card lacks %q: %s", want, item)
		}
	}
	screenshot(t, ctx, "approval")

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(approve)), chromedp.WaitVisible(chromedp.ID("flow-receipts"))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("approve: %v", err)
	}
	if phase := text(t, ctx, chromedp.ID("flow-phase")); phase != "approved" {
		t.Fatalf("phase after approval = %q", phase)
	}
	notice := text(t, ctx, chromedp.ID("notice"))
	screenshot(t, ctx, "approved")

	// The programs page draws the phase graph the transition moved along.
	if err := chromedp.Do(ctx, chromedp.Navigate(a.http.URL+"/flows"), chromedp.WaitVisible(chromedp.CSS(".flow-graph svg"))); err != nil {
		t.Fatalf("programs page: %v", err)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll(".flow-graph svg .node").length`); n < 8 {
		t.Fatalf("the phase graphs have %d nodes", n)
	}
	screenshot(t, ctx, "programs")

	view, isErr := call(t, agent, "flows_inspect", map[string]any{"instance": "expense-1001", "approval": aprID})
	got, _ := view["approval"].(map[string]any)
	receipts, _ := view["receipts"].([]any)
	if isErr || got["status"] != "approved" || got["decider"] != person.ID || len(receipts) != 1 {
		t.Fatalf("inspect: %v", view)
	}
	rc := receipts[0].(map[string]any)
	if rc["id"] != got["receipt"] || rc["transition"] != "expense-approval/approve" || rc["revision"] != 1.0 || !strings.Contains(notice, rc["id"].(string)) {
		t.Fatalf("receipt %v, approval %v, notice %q", rc, got, notice)
	}
}

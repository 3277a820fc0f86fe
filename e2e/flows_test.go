package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// signInAs signs a person other than the owner in through a fresh one-time
// link.
func (a *app) signInAs(ctx context.Context, p store.Principal) {
	a.T.Helper()
	link, err := auth.NewSignInLink(context.Background(), a.DB.Sessions(), p.ID, a.HTTP.URL, time.Now())
	if err != nil {
		a.T.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("signin-continue")),
		chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name")),
	)
	if err != nil {
		a.T.Fatalf("sign in: %v", err)
	}
	if who := text(a.T, ctx, chromedp.ID("who-name")); who != p.Name {
		a.T.Fatalf("signed in as %q, want %q", who, p.Name)
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
	_, person, err := auth.IssueToken(context.Background(), a.DB, store.KindHuman, "approver", []string{"state.write"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	a.signInAs(ctx, person)
	agent := a.agent()

	out, isErr := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"})
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
	// The card leads with the decision; the person opens its technical
	// details to see the transition, operation, fingerprint and grants.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#section-flow-approvals .item details > summary"))); err != nil {
		t.Fatalf("open the technical details: %v", err)
	}
	item := text(t, ctx, chromedp.CSS("#section-flow-approvals .item"))
	for _, want := range []string{"expense-approval/approve", "approve_expense", "a person approved the expense", fingerprint, "human.approve, state.write", "agent"} {
		if !strings.Contains(item, want) {
			t.Errorf("approval card lacks %q: %s", want, item)
		}
	}
	screenshot(t, ctx, "approval")

	// After the decision the person is still in the inbox, with the
	// outcome's banner; the instance page shows the new phase.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(approve)), chromedp.WaitVisible(chromedp.ID("notice"))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("approve: %v", err)
	}
	if path := eval[string](t, ctx, `location.pathname`); path != "/inbox" {
		t.Fatalf("after approving, the page is %s, not the inbox", path)
	}
	notice := text(t, ctx, chromedp.ID("notice"))
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/flows/instances/expense-1001"), chromedp.WaitVisible(chromedp.ID("flow-receipts"))); err != nil {
		t.Fatalf("instance page: %v", err)
	}
	if phase := text(t, ctx, chromedp.ID("flow-phase")); phase != "approved" {
		t.Fatalf("phase after approval = %q", phase)
	}
	screenshot(t, ctx, "approved")

	// The programs page draws the phase graph the transition moved along.
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/flows"), chromedp.WaitVisible(chromedp.CSS(".flow-graph svg"))); err != nil {
		t.Fatalf("programs page: %v", err)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll(".flow-graph svg .node").length`); n < 8 {
		t.Fatalf("the phase graphs have %d nodes", n)
	}
	screenshot(t, ctx, "programs")

	view, isErr := assenttest.CallTool(t, agent, "flows_inspect", map[string]any{"instance": "expense-1001", "approval": aprID})
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

// TestExpenseCardReadsLikeTheDecision: the person reads the demo expense's
// approval card in the browser: its first line is the decision with the
// amount, what it is for and the masked payee, it says what the pay step
// will send, and it links to the instance, whose page shows the same card
// and takes a decline with a reason.
func TestExpenseCardReadsLikeTheDecision(t *testing.T) {
	a := newApp(t, true)
	_, person, err := auth.IssueToken(context.Background(), a.DB, store.KindHuman, "approver", []string{"state.write"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	agent := a.agent()
	out, isErr := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"})
	approval, _ := out["approval"].(map[string]any)
	if isErr || approval == nil {
		t.Fatalf("prescribe: %v", out)
	}
	aprID := approval["id"].(string)

	ctx := browser(t)
	a.signInAs(ctx, person)
	card := `#section-flow-approvals .item:has(form[action="/web/flows/approvals/` + aprID + `/decline"])`
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"), chromedp.WaitVisible(chromedp.CSS(card))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("the approval card did not appear: %v", err)
	}
	const sentence = "Approve 1,250.00 EUR for Conference travel, Lisbon, paid to PT50 0002 0123 1234 5678 9123 4"
	if first := text(t, ctx, chromedp.CSS(card+" h3")); first != sentence {
		t.Fatalf("the card's first line is %q, want %q", first, sentence)
	}
	item := text(t, ctx, chromedp.CSS(card))
	if !strings.Contains(item, "send 1,250.00 EUR to PT50 0002 0123 1234 5678 9123 4 through payments_send") || !strings.Contains(item, "First payment to this account") {
		t.Fatalf("card: %s", item)
	}
	screenshot(t, ctx, "expense-card")

	// The card's link opens the instance, which can decide too.
	reason := `#flow-approvals form[action="/web/flows/approvals/` + aprID + `/decline"] input[name="reason"]`
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(card+` .item-link a`)),
		chromedp.WaitVisible(chromedp.CSS(reason)),
	)
	if err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("open the instance: %v", err)
	}
	if first := text(t, ctx, chromedp.CSS("#flow-approvals h3")); first != sentence {
		t.Fatalf("the instance page's card reads %q", first)
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(reason), "Lisbon trip was cancelled"),
		chromedp.Click(chromedp.CSS(`#flow-approvals form[action="/web/flows/approvals/`+aprID+`/decline"] button`)),
		chromedp.WaitVisible(chromedp.ID("flow-closed-approvals")),
	)
	if err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("decline: %v", err)
	}
	if closed := text(t, ctx, chromedp.ID("flow-closed-approvals")); !strings.Contains(closed, "declined") || !strings.Contains(closed, "Lisbon trip was cancelled") {
		t.Fatalf("decided approvals: %s", closed)
	}
	view, _ := assenttest.CallTool(t, agent, "flows_inspect", map[string]any{"instance": "expense-1001", "approval": aprID})
	if got, _ := view["approval"].(map[string]any); got["status"] != "declined" || got["reason"] != "Lisbon trip was cancelled" || got["summary"] != sentence {
		t.Fatalf("the agent sees %v", got)
	}
}

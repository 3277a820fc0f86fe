package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// TestPersonEditsExpenseAmountBeforeApproving: an agent asks a person to
// approve a reimbursement of 1500.00 EUR. Ada opens the card's "Edit
// before approving", sees the agent's amount prefilled with its unit and
// the payee by name, changes the amount to 1100 and approves. What is
// applied is her amount, and the agent's inbox_wait reports the approval
// with changes, old → new.
func TestPersonEditsExpenseAmountBeforeApproving(t *testing.T) {
	a := newApp(t, false)
	a.StartReimbursement("reimbursement-7", 1)
	_, ada, err := auth.IssueToken(context.Background(), a.DB, store.KindHuman, "Ada", []string{"state.write"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	agent := a.agent()
	out, isErr := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "reimbursement-7", "transition": "approve",
		"parameters": map[string]any{"amount": "1500.00", "payee": "hotel-lisboa"}})
	approval, _ := out["approval"].(map[string]any)
	if isErr || approval == nil {
		t.Fatalf("prescribe: %v", out)
	}
	aprID := approval["id"].(string)

	amount := `details.edit input[name="value:amount"]`
	ctx := browser(t)
	a.signInAs(ctx, ada)
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"), chromedp.WaitReady(chromedp.CSS(amount))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("the approval's edit form is not in Ada's inbox: %v", err)
	}
	form := eval[string](t, ctx, `document.querySelector('details.edit').textContent`)
	if !strings.Contains(form, "Amount") || !strings.Contains(form, "EUR") {
		t.Fatalf("the edit form does not show the amount with its unit: %q", form)
	}
	if v := eval[string](t, ctx, `document.querySelector('`+amount+`').value`); v != "1500.00" {
		t.Fatalf("the amount is prefilled with %q, want the agent's 1500.00", v)
	}
	if p := eval[string](t, ctx, `document.querySelector('details.edit select[name="value:payee"]').selectedOptions[0].text`); p != "Hotel Lisboa" {
		t.Fatalf("the payee shows as %q, want its name", p)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`details.edit summary`)),
		chromedp.WaitVisible(chromedp.CSS(amount)),
		chromedp.Clear(chromedp.CSS(amount)),
		chromedp.SendKeys(chromedp.CSS(amount), "1100"),
		chromedp.Click(chromedp.CSS(`details.edit button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("notice")),
	); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("Ada changes the amount and approves: %v", err)
	}
	if n := text(t, ctx, chromedp.ID("notice")); !strings.Contains(n, "Approved with your changes") {
		t.Fatalf("notice after approving with a change: %q", n)
	}
	screenshot(t, ctx, "approved-with-changes")

	wait, isErr := assenttest.CallTool(t, agent, "inbox_wait", map[string]any{"items": []any{map[string]any{"approval": aprID}}, "timeout_ms": 2000})
	items, _ := wait["items"].([]any)
	if isErr || len(items) != 1 {
		t.Fatalf("inbox_wait: %v", wait)
	}
	o, _ := items[0].(map[string]any)
	changed, _ := o["changed"].([]any)
	reason, _ := o["reason"].(string)
	if o["status"] != "approved" || !strings.HasPrefix(reason, "approved with changes") || len(changed) != 1 || changed[0] != `amount: "1500.00" → "1100"` {
		t.Fatalf("the agent hears %v; want approved with changes, amount 1500.00 → 1100", o)
	}
	if o["decided_by"] != ada.ID {
		t.Fatalf("decided by %v, want Ada", o["decided_by"])
	}
}

// TestEditAndQuorumCardsPassAxe: the inbox with an approval's edit form
// (after one person changed it, needing two people) and a question that
// needs two people, with one answer given, and the instance page with the
// same form, have no axe-core violation at 1280 and 390 px.
func TestEditAndQuorumCardsPassAxe(t *testing.T) {
	script := axeScript(t)
	a := newApp(t, false)
	a.StartReimbursement("reimbursement-8", 2)
	people := map[string]store.Principal{}
	for _, name := range []string{"Ada", "Ben"} {
		_, p, err := auth.IssueToken(context.Background(), a.DB, store.KindHuman, name, []string{"state.write"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := a.DB.Groups().AddGroupMember(context.Background(), store.GroupMember{Group: "finance", PrincipalID: p.ID, AddedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		people[name] = p
	}
	agent := a.agent()
	out, isErr := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "reimbursement-8", "transition": "approve",
		"parameters": map[string]any{"amount": "1500.00", "payee": "hotel-lisboa"}})
	apr, _ := out["approval"].(map[string]any)
	if isErr || apr == nil {
		t.Fatalf("prescribe: %v", out)
	}
	if out, isErr := assenttest.CallTool(t, agent, "approvals_request", map[string]any{"question": "Ship order 42?", "group": "finance", "quorum": 2}); isErr {
		t.Fatalf("approvals_request: %v", out)
	}
	// Ada changes the amount and approves, and answers the question.
	if _, _, err := a.Srv.Flows().ApproveEdited(context.Background(), people["Ada"], apr["id"].(string), map[string]string{"amount": "1200"}, 0); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	a.signInAs(ctx, people["Ada"])
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"),
		chromedp.Click(chromedp.CSS(`#section-questions form button.primary`)), chromedp.WaitVisible(chromedp.ID("notice"))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("Ada answers yes: %v", err)
	}
	a.signInAs(ctx, people["Ben"])
	for _, width := range []int64{1280, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/inbox", "/flows/instances/reimbursement-8"} {
			if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+p), chromedp.WaitReady("main"),
				chromedp.Click(chromedp.CSS(`details.edit summary`))); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if p == "/inbox" {
				c := eval[string](t, ctx, `document.body.innerText`)
				if !strings.Contains(c, "Changed by Ada: Amount 1500.00 EUR → 1200 EUR") || !strings.Contains(c, "Answered by Ada: yes · needs 1 more person") {
					t.Fatalf("Ben's inbox does not show Ada's change and answer:\n%s", c)
				}
			}
			time.Sleep(300 * time.Millisecond)
			for _, v := range axeCheck(t, ctx, script) {
				var where []string
				for _, n := range v.Nodes {
					where = append(where, fmt.Sprint(n.Target)+": "+n.Summary)
				}
				t.Errorf("%s at %d px: %s (%s)\n  %s", p, width, v.ID, v.Help, strings.Join(where, "\n  "))
			}
		}
	}
}

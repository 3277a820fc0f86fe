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

// TestTwoPeopleApproveLargeExpense: the demo's expense over the two-person
// limit waits for two different people. Ada approves in the browser: her
// approval is recorded, nothing is paid, and her card says who approved
// and that one more person is needed, with no Approve button for her.
// Ben then approves in the browser and the step is applied.
func TestTwoPeopleApproveLargeExpense(t *testing.T) {
	a := newApp(t, true)
	people := map[string]store.Principal{}
	for _, name := range []string{"Ada", "Ben"} {
		_, p, err := auth.IssueToken(context.Background(), a.DB, store.KindHuman, name, []string{"state.write"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		people[name] = p
	}
	out, isErr := assenttest.CallTool(t, a.agent(), "flows_prescribe", map[string]any{"instance": "expense-1002"})
	approval, _ := out["approval"].(map[string]any)
	if isErr || approval == nil {
		t.Fatalf("prescribe: %v", out)
	}
	aprID := approval["id"].(string)
	approve := `form[action="/web/flows/approvals/` + aprID + `/approve"] button`
	card := `document.querySelector('form[action="/web/flows/approvals/` + aprID + `/decline"]').closest('.item').innerText`
	phase := func() string {
		inst, err := a.Srv.Flows().Kernel().Instance(context.Background(), "expense-1002")
		if err != nil {
			t.Fatal(err)
		}
		return inst.Phase
	}

	ctx := browser(t)
	a.signInAs(ctx, people["Ada"])
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"), chromedp.WaitVisible(chromedp.CSS(approve))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("the approval is not in Ada's inbox: %v", err)
	}
	if c := eval[string](t, ctx, card); !strings.Contains(c, "Needs 2 different people to approve") {
		t.Fatalf("the card does not say it needs two people: %s", c)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(approve)), chromedp.WaitVisible(chromedp.ID("notice"))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("Ada approves: %v", err)
	}
	if n := text(t, ctx, chromedp.ID("notice")); !strings.Contains(n, "Your approval is recorded") || !strings.Contains(n, "needs 1 more person") {
		t.Fatalf("notice after Ada's approval: %q", n)
	}
	if c := eval[string](t, ctx, card); !strings.Contains(c, "Approved by Ada · needs 1 more person") || !strings.Contains(c, "You approved this") {
		t.Fatalf("Ada's card after her approval: %s", c)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('`+approve+`').length`); n != 0 {
		t.Fatal("Ada is still offered Approve")
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('input[name="id"][type="checkbox"][value*="`+aprID+`"]').length`); n != 0 {
		t.Fatal("Ada can still select the approval to approve it with others")
	}
	screenshot(t, ctx, "one-of-two")
	if p := phase(); p != "submitted" {
		t.Fatalf("one person's approval moved the expense to %s", p)
	}

	a.signInAs(ctx, people["Ben"])
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"), chromedp.WaitVisible(chromedp.CSS(approve))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("the approval is not in Ben's inbox: %v", err)
	}
	if c := eval[string](t, ctx, card); !strings.Contains(c, "Approved by Ada · needs 1 more person") {
		t.Fatalf("Ben's card does not show Ada's approval: %s", c)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(approve)), chromedp.WaitVisible(chromedp.ID("notice"))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("Ben approves: %v", err)
	}
	if n := text(t, ctx, chromedp.ID("notice")); !strings.Contains(n, "Approved") || !strings.Contains(n, "rcp-") {
		t.Fatalf("notice after Ben's approval: %q", n)
	}
	if p := phase(); p != "approved" {
		t.Fatalf("after two people the expense is %s", p)
	}
}

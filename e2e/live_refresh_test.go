package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/internal/assenttest"
)

// While the agent's player ticks (a Trace event every 50 ms) and the inbox
// waits on a person, the person types a decline reason: the inbox is not
// redrawn under their hands, the text stays, and focus stays in the field.
func TestTypingSurvivesLiveRefresh(t *testing.T) {
	exe := buildAssent(t)
	a := newApp(t, true)
	pointDemoRecipe(t, a.Dir, exe)
	agent := a.agent()
	startPlayer(t, a, agent)
	out, _ := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"})
	approval, _ := out["approval"].(map[string]any)
	if approval == nil {
		t.Fatalf("prescribe: %v", out)
	}
	reason := `#section-flow-approvals form[action="/web/flows/approvals/` + approval["id"].(string) + `/decline"] input[name="reason"]`

	ctx := browser(t)
	// The owner supervises the agent, so its Trace events reach the page.
	a.signIn(ctx)
	const typed = "Not a business expense"
	if err := chromedp.Do(ctx,
		chromedp.Navigate(a.HTTP.URL+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS(reason)),
		chromedp.SendKeys(chromedp.CSS(reason), typed),
		chromedp.Sleep(2500*time.Millisecond),
	); err != nil {
		screenshot(t, ctx, "typing")
		t.Fatal(err)
	}
	got := eval[string](t, ctx, `document.querySelector(`+jsString(reason)+`).value`)
	focused := eval[bool](t, ctx, `document.activeElement === document.querySelector(`+jsString(reason)+`)`)
	if got != typed || !focused {
		screenshot(t, ctx, "typing")
		t.Fatalf("after 2.5 s of the player ticking the reason reads %q (focused %v), want %q still in focus", got, focused, typed)
	}
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBoundaryCloseButtonShowsWhatItSends is the attack: with an agent's
// token only, a screen's "Close" button is wired to the demo's
// people-only accounts.signUp with Eve's details, which the page never
// shows. The person's click opens the runtime's dialog, which lists every
// value the click would send; Cancel sends nothing.
func TestBoundaryCloseButtonShowsWhatItSends(t *testing.T) {
	a := newApp(t, true)
	stream := "root = Card([note, actions])\nnote = Text(\"Your report is ready.\")\nactions = Stack([close], direction=\"row\")\n" +
		"close = Button(\"Close\", action=\"close\")\n" +
		"closeIt = McpMutation(close, tool=\"accounts.signUp\", params={name: \"Eve\", email: \"eve@evil.example\", plan: \"Team\", terms: true})\n"
	code, out, raw := a.API("POST", "/v1/screens", a.Boot.AgentToken, []byte(stream))
	id, _ := out["id"].(string)
	if code >= 300 || id == "" {
		t.Fatalf("show: %d %s", code, raw)
	}
	ctx := browser(t)
	a.signIn(ctx)
	a.openScreen(ctx, id)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("b-close"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the runtime's dialog", `document.getElementById("confirm-dialog").open`)
	sentence := js[string](t, ctx, `document.getElementById("confirm-sentence").textContent`)
	for _, want := range []string{"accounts.signUp", `email = "eve@evil.example"`, `name = "Eve"`, `plan = "Team"`, "terms = true"} {
		if !strings.Contains(sentence, want) {
			t.Errorf("the dialog %q lacks %q", sentence, want)
		}
	}
	screenshot(t, ctx, "close-button-dialog")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("confirm-cancel"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the dialog to close", `!document.getElementById("confirm-dialog").open`)
	time.Sleep(300 * time.Millisecond)
	if created := eval[bool](t, ctx, `!!document.getElementById("n-welcome")`); created {
		t.Fatal("Cancel created the account")
	}
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/chromedp/chromedp"
)

// TestHighlightOutlivesRedraws: an agent's highlight stays on the field for
// its duration even when the screen is redrawn meanwhile.
func TestHighlightOutlivesRedraws(t *testing.T) {
	a := newApp(t, false)
	a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	agent := a.agent()
	out, _ := assenttest.CallTool(t, agent, "show_screen", map[string]any{"screen": payStream})
	id := out["screen"].(string)
	a.openScreen(ctx, id)
	if out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "highlight", "identity": map[string]any{"formId": id, "controlId": "email"}, "durationMs": 8000}); isErr {
		t.Fatalf("highlight: %v", out)
	}
	waitFor(t, ctx, "the highlight", `document.getElementById("n-email").classList.contains("o-highlight")`)
	start := time.Now()
	// A proposal on another field redraws the screen.
	if out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": id, "controlId": "note"}, "value": "table 4"}); isErr {
		t.Fatalf("stage: %v", out)
	}
	waitFor(t, ctx, "the redraw", `document.querySelector("#s-note .o-staged-value")?.textContent === "table 4"`)
	time.Sleep(2*time.Second - time.Since(start))
	if !js[bool](t, ctx, `document.getElementById("n-email").classList.contains("o-highlight")`) {
		screenshot(t, ctx, "highlight-lost")
		t.Fatal("the highlight was gone 2 s into an 8 s highlight")
	}
}

// TestNarrowPagesDoNotScrollSideways: at a phone's 390 px width no page is
// wider than the viewport, and times read in the local form.
func TestNarrowPagesDoNotScrollSideways(t *testing.T) {
	a := newApp(t, true)
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	a.signIn(ctx)
	agent := a.agent()
	if out, isErr := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"}); isErr {
		t.Fatalf("prescribe: %v", out)
	}
	out, isErr := assenttest.CallTool(t, agent, "show_screen", map[string]any{"screen": payStreamWide})
	if isErr {
		t.Fatalf("show_screen: %v", out)
	}
	id := out["screen"].(string)
	for _, path := range []string{"/inbox", "/runs", "/flows", "/flows/instances/expense-1001", "/screens", "/screens/" + id, "/rules", "/no/such/page"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+path), chromedp.WaitReady("main")); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		time.Sleep(300 * time.Millisecond) // let the screen and the times draw
		if w := js[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			screenshot(t, ctx, "wide"+strings.ReplaceAll(path, "/", "-"))
			t.Errorf("%s is %d px wide at a 390 px viewport", path, w)
		}
	}
	// Tables become cards: each row a block, each value under its
	// column's name, no column left off screen.
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/flows/instances/expense-1001"), chromedp.WaitReady("#flow-facts")); err != nil {
		t.Fatal(err)
	}
	if d := js[string](t, ctx, `getComputedStyle(document.querySelector("#flow-facts tbody tr")).display`); d != "block" {
		t.Errorf("a Facts row on a phone is drawn as %q, want a block", d)
	}
	if c := js[string](t, ctx, `getComputedStyle(document.querySelector("#flow-facts tbody td"), "::before").content`); c != `"Status"` {
		t.Errorf("a Facts cell on a phone is labelled %s, want \"Status\"", c)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/screens"), chromedp.WaitReady("time[datetime]")); err != nil {
		t.Fatal(err)
	}
	iso := js[string](t, ctx, `document.querySelector("time[datetime]").getAttribute("datetime")`)
	shown := js[string](t, ctx, `document.querySelector("time[datetime]").textContent`)
	year := iso[:4]
	if _, err := time.Parse(time.RFC3339, iso); err != nil {
		t.Fatalf("datetime %q is not ISO: %v", iso, err)
	}
	if shown == iso || strings.Contains(shown, "T") || !strings.Contains(shown, year) {
		t.Fatalf("the time reads %q for %q; want a local, readable form", shown, iso)
	}
}

// payStreamWide is a screen with a long unbroken word and a wide value.
const payStreamWide = `root = Card([title, words, amount])
title = Heading("Supercalifragilisticexpialidocious-and-then-some-more-words-without-spaces")
words = Text("https://example.com/a/very/long/path/that/does/not/break/anywhere/at/all/on/a/phone/screen")
$amount = 1234567.5
amount = Text($amount, format="currency", currency="USD", tone="strong")
`

// TestInboxBadgeFollowsEvents: a proposal from an agent shows in the
// navigation's Inbox count without reloading the page.
func TestInboxBadgeFollowsEvents(t *testing.T) {
	a := newApp(t, false)
	a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	agent := a.agent()
	out, _ := assenttest.CallTool(t, agent, "show_screen", map[string]any{"screen": payStream})
	id := out["screen"].(string)
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/flows"), chromedp.WaitVisible(chromedp.ID("who-name"))); err != nil {
		t.Fatal(err)
	}
	const badge = `(document.querySelector('nav a[href="/inbox"]').textContent)`
	before := js[string](t, ctx, badge)
	waitFor(t, ctx, "the event stream", `document.body.dataset.live === "1"`)
	if out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": id, "controlId": "note"}, "value": "table 4"}); isErr {
		t.Fatalf("stage: %v", out)
	}
	waitFor(t, ctx, "the badge", badge+` !== `+jsString(before))
}

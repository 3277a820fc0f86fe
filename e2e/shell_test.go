package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSignInReachesInbox signs in through a one-time link, reaches the
// inbox, and checks that the same link does not work twice.
func TestSignInReachesInbox(t *testing.T) {
	a := newApp(t, false)
	ctx := browser(t)
	link := a.signInLink()
	err := chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("signin-continue")),
		chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if h1 := text(t, ctx, chromedp.CSS("main h1")); h1 != "Inbox" {
		t.Fatalf("landed on %q", h1)
	}
	if who := text(t, ctx, chromedp.ID("who-name")); who != "owner" {
		t.Fatalf("header shows %q", who)
	}
	if empty := text(t, ctx, chromedp.ID("inbox-empty")); !strings.Contains(empty, "Nothing needs you") {
		t.Fatalf("empty inbox says %q", empty)
	}
	screenshot(t, ctx, "inbox")

	// Keyboard: the skip link is the first stop.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
		t.Fatal(err)
	}
	if focused := eval[string](t, ctx, `document.activeElement.textContent`); focused != "Skip to content" {
		t.Errorf("first tab stop is %q", focused)
	}

	// The link was spent: using it again in a fresh browser fails.
	ctx2 := browser(t)
	err = chromedp.Do(ctx2,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("signin-continue")),
		chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("signin-error")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if msg := text(t, ctx2, chromedp.ID("signin-error")); !strings.Contains(msg, "already been used") {
		t.Fatalf("second use says %q", msg)
	}
}

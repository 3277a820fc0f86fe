package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/server"
)

// app is a running assent server on a fresh data directory, its BaseURL
// its real address (see package assenttest).
type app struct{ *assenttest.Kit }

func newApp(t *testing.T, withDemo bool) *app {
	t.Helper()
	return newAppIn(t, t.TempDir(), withDemo, nil)
}

// newAppIn starts a server on the data directory dir (created when
// missing; it may be relative) with a configuration mod may change, and
// with the demo application when withDemo is set.
func newAppIn(t *testing.T, dir string, withDemo bool, mod func(*server.Config)) *app {
	t.Helper()
	start := assenttest.StartIn
	if withDemo {
		start = assenttest.StartDemoIn
	}
	return &app{start(t, dir, func(c *server.Config) {
		c.RateLimit = -1
		if mod != nil {
			mod(c)
		}
	})}
}

// issue makes a token for a new principal on a's store.
func (a *app) issue(kind, name string, grants ...string) string {
	a.T.Helper()
	tok, _, err := auth.IssueToken(context.Background(), a.DB, kind, name, grants, time.Now())
	if err != nil {
		a.T.Fatal(err)
	}
	return tok
}

// signInLink returns a fresh one-time link for the owner.
func (a *app) signInLink() string {
	a.T.Helper()
	link, err := auth.NewSignInLink(context.Background(), a.DB.Sessions(), a.Boot.Owner.ID, a.HTTP.URL, time.Now())
	if err != nil {
		a.T.Fatal(err)
	}
	return link
}

// browser starts headless Chromium and returns a tab context.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.New(t, 90*time.Second)
}

// screenshot saves a full-page PNG under the test's temp dir (and under
// $ASSENT_SCREENSHOTS when set) and returns its path.
func screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	// A page that is being redrawn (a live refresh, a form's answer) has
	// no layout for a moment, and the browser refuses to capture it then:
	// try again for a little while before calling it a failure.
	var png []byte
	var err error
	for try := 0; ; try++ {
		if png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil || try == 10 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := t.TempDir()
	if d := os.Getenv("ASSENT_SCREENSHOTS"); d != "" {
		dir = d
		os.MkdirAll(dir, 0o755)
	}
	p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 {
		t.Fatalf("screenshot %s is only %d bytes", p, len(png))
	}
	return p
}

// signIn opens a fresh sign-in link and continues to the inbox.
func (a *app) signIn(ctx context.Context) {
	a.T.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(a.signInLink()),
		chromedp.WaitVisible(chromedp.ID("signin-continue")),
		chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name")),
	)
	if err != nil {
		a.T.Fatalf("sign in: %v", err)
	}
	who := text(a.T, ctx, chromedp.ID("who-name"))
	if who != a.Boot.Owner.Name {
		a.T.Fatalf("signed in as %q, want %q", who, a.Boot.Owner.Name)
	}
}

// text returns the text of the element sel selects.
func text[S chromedp.Selectable](t testing.TB, ctx context.Context, sel S) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("text of %v: %v", sel, err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

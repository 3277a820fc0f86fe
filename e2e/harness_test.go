package e2e

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
)

// app is a running assent server on a fresh data directory.
type app struct {
	t    *testing.T
	srv  *server.Server
	db   *sqlite.DB
	http *httptest.Server
	boot auth.Bootstrap
	// dir is the data directory, as the server was given it.
	dir string
}

func newApp(t *testing.T, demo bool) *app {
	t.Helper()
	return newAppIn(t, t.TempDir(), func(c *server.Config) { c.Demo = demo })
}

// newAppIn starts a server on the data directory dir (created when
// missing; it may be relative) with a configuration mod may change.
func newAppIn(t *testing.T, dir string, mod func(*server.Config)) *app {
	t.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The base URL is only known once listening; start the listener first.
	hs := httptest.NewUnstartedServer(nil)
	base := "http://" + hs.Listener.Addr().String()
	cfg := server.Config{DataDir: dir, Store: db, BaseURL: base, RateLimit: -1}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = srv.Handler()
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		srv.Close()
		hs.Close()
		db.Close()
	})
	return &app{t: t, srv: srv, db: db, http: hs, boot: boot, dir: dir}
}

// issue makes a token for a new principal on a's store.
func (a *app) issue(kind, name string, grants ...string) string {
	a.t.Helper()
	tok, _, err := auth.IssueToken(context.Background(), a.db, kind, name, grants, time.Now())
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

// signInLink returns a fresh one-time link for the owner.
func (a *app) signInLink() string {
	a.t.Helper()
	link, err := auth.NewSignInLink(context.Background(), a.db, a.boot.Owner.ID, a.http.URL, time.Now())
	if err != nil {
		a.t.Fatal(err)
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
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
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
	a.t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(a.signInLink()),
		chromedp.WaitVisible(chromedp.ID("signin-continue")),
		chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name")),
	)
	if err != nil {
		a.t.Fatalf("sign in: %v", err)
	}
	who := text(a.t, ctx, chromedp.ID("who-name"))
	if who != a.boot.Owner.Name {
		a.t.Fatalf("signed in as %q, want %q", who, a.boot.Owner.Name)
	}
}

// text returns the text of the element sel selects.
func text[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S) string {
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

package server_test

import (
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/store"
)

// The manifest names the app, opens the inbox standalone, takes its
// colours from the style sheet, and lists icons of the sizes they are.
func TestAppManifest(t *testing.T) {
	f := assenttest.StartDemo(t)
	resp := f.Get("/manifest.webmanifest", nil)
	body := assenttest.ReadAll(resp)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/manifest+json" {
		t.Fatalf("manifest: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var m struct {
		Name, ShortName, StartURL, Scope, Display, ThemeColor, BackgroundColor string
		Icons                                                                  []struct{ Src, Sizes, Type, Purpose string }
	}
	if err := json.Unmarshal([]byte(strings.NewReplacer("short_name", "shortName", "start_url", "startURL", "theme_color", "themeColor", "background_color", "backgroundColor").Replace(body)), &m); err != nil {
		t.Fatalf("manifest is not JSON: %v\n%s", err, body)
	}
	if m.Name != "assent" || m.ShortName == "" || m.StartURL != "/inbox" || m.Scope != "/" || m.Display != "standalone" {
		t.Errorf("manifest: %+v", m)
	}
	css := assenttest.ReadAll(f.Get("/static/app.css", nil))
	bg := regexp.MustCompile(`--bg:\s*(#[0-9a-fA-F]{6})`).FindStringSubmatch(css)
	if bg == nil || m.BackgroundColor != bg[1] || m.ThemeColor != bg[1] {
		t.Errorf("colours %q and %q, the style sheet's background %v", m.ThemeColor, m.BackgroundColor, bg)
	}
	sizes := map[string]bool{}
	for _, ic := range m.Icons {
		resp := f.Get(ic.Src, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ic.Type || ic.Type != "image/png" {
			t.Fatalf("icon %s: %d %q", ic.Src, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		cfg, err := png.DecodeConfig(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("icon %s: %v", ic.Src, err)
		}
		if got := itoa(cfg.Width) + "x" + itoa(cfg.Height); got != ic.Sizes {
			t.Errorf("icon %s is %s, the manifest says %s", ic.Src, got, ic.Sizes)
		}
		sizes[ic.Sizes+" "+ic.Purpose] = true
	}
	for _, want := range []string{"192x192 any", "512x512 any", "512x512 maskable"} {
		if !sizes[want] {
			t.Errorf("no icon %s in %v", want, sizes)
		}
	}
	// Every page links the manifest and an icon for the home screen.
	page := assenttest.ReadAll(f.Get("/", nil))
	for _, want := range []string{`<link rel="manifest" href="/manifest.webmanifest">`, `<meta name="theme-color" content="` + bg[1] + `"`, `<link rel="apple-touch-icon" href="/static/icon-192.png">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the front page lacks %s", want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The service worker is served as a script that is never cached by HTTP,
// names its cache after the release, and precaches only files that
// exist and carry nobody's data; the offline page it falls back to is
// the same for everyone.
func TestServiceWorkerServed(t *testing.T) {
	f := assenttest.StartDemo(t)
	resp := f.Get("/sw.js", nil)
	js := assenttest.ReadAll(resp)
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Content-Type") != "text/javascript; charset=utf-8" || h.Get("Cache-Control") != "no-cache" || h.Get("Service-Worker-Allowed") != "/" {
		t.Fatalf("/sw.js: %d %v", resp.StatusCode, h)
	}
	if strings.Contains(js, "__ASSENT_SHELL_VERSION__") || !regexp.MustCompile(`"assent-shell-" \+ "[0-9a-f]{16}"`).MatchString(js) {
		t.Errorf("the worker's cache is not named after the release:\n%s", js)
	}
	list := regexp.MustCompile(`(?s)const SHELL = \[(.*?)\];`).FindStringSubmatch(js)
	if list == nil {
		t.Fatal("no SHELL list in /sw.js")
	}
	cookie, _ := f.SignIn()
	shell := regexp.MustCompile(`"(/[^"]*)"`).FindAllStringSubmatch(list[1], -1)
	shell = append(shell, []string{"", "/offline"})
	for _, m := range shell {
		p := m[1]
		if strings.HasPrefix(p, "/v1/") || p == "/inbox" || p == "/" {
			t.Errorf("the worker precaches %s, which carries a person's data", p)
		}
		anon := f.Get(p, nil)
		a := assenttest.ReadAll(anon)
		if anon.StatusCode != 200 {
			t.Errorf("precached %s: %d", p, anon.StatusCode)
		}
		// Signed in or not, the shell is the same bytes.
		if b := assenttest.ReadAll(f.Get(p, cookie)); b != a {
			t.Errorf("%s differs for a signed-in person; the worker must not cache it", p)
		}
	}
	off := f.Get("/offline", nil)
	page := assenttest.ReadAll(off)
	if !strings.Contains(page, "You are offline") || !strings.Contains(off.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("/offline: %v\n%s", off.Header, page)
	}
	// A page's policy lets it register the worker and read the manifest
	// (worker-src and manifest-src fall back to these).
	csp := f.Get("/", nil).Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("page policy %q would block the worker", csp)
	}
}

// In Chromium at a phone's size (360×740): the service worker registers,
// the inbox (and every page of the menu) has no horizontal scroll, and
// once the device is offline a navigation shows the offline page instead
// of the browser's error. ASSENT_SCREENSHOT_DIR, when set, is where the
// test leaves its screenshots.
func TestAppOfflineBrowser(t *testing.T) {
	ctx := browsertest.New(t, 90*time.Second)
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "phone")
	link, err := auth.NewSignInLink(context.Background(), f.DB.Sessions(), person.ID, f.URL(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Something to decide, so the inbox shows a card.
	stage(t, cs, "pro")
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile),
		chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("signin-continue")), chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name")),
		chromedp.Navigate(f.URL()+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS("#"+cardAnchor("control_proposal:profile/plan"))),
	); err != nil {
		t.Fatalf("sign in and open the inbox: %v", err)
	}
	scope, err := chromedp.Run(ctx, chromedp.Evaluate[string]("navigator.serviceWorker.ready.then(r => r.scope)", chromedp.EvalAwaitPromise))
	if err != nil || scope != f.URL()+"/" {
		t.Fatalf("service worker ready: %q %v", scope, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("ASSENT_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "inbox-360.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if w, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth")); err != nil || w > 360 {
		t.Errorf("the inbox is %d px wide at 360 px (%v)", w, err)
	}
	// Unfolded, the card's technical details and forms still fit.
	if w, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('details').forEach(d => d.open = true), document.documentElement.scrollWidth")); err != nil || w > 360 {
		t.Errorf("with its details open the inbox is %d px wide at 360 px (%v)", w, err)
	}
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil && os.Getenv("ASSENT_SCREENSHOT_DIR") != "" {
		os.WriteFile(filepath.Join(os.Getenv("ASSENT_SCREENSHOT_DIR"), "inbox-open-360.png"), shot, 0o644)
	}
	// The other pages a person reaches from the menu fit as well.
	for _, p := range []string{"/runs", "/flows", "/screens", "/audit", "/settings/notifications"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(f.URL()+p), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		w, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('details').forEach(d => d.open = true), document.documentElement.scrollWidth"))
		if err != nil || w > 360 {
			t.Errorf("%s is %d px wide at 360 px (%v)", p, w, err)
		}
		if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil && os.Getenv("ASSENT_SCREENSHOT_DIR") != "" {
			os.WriteFile(filepath.Join(os.Getenv("ASSENT_SCREENSHOT_DIR"), strings.ReplaceAll(p[1:], "/", "-")+"-360.png"), shot, 0o644)
		}
	}

	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	// Cut the page and its service worker off the network: each is a
	// target of its own. (cdproto generates only the successor of
	// Network.emulateNetworkConditions, which leaves the worker's fetches
	// alone, so the command is called by name.)
	goOffline := func(ctx context.Context) {
		t.Helper()
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			t.Fatal(err)
		}
		cmd := cdp.Command[offlineParams, cdp.Empty]{Method: "Network.emulateNetworkConditions"}
		if _, err := chromedp.Call(ctx, cmd, offlineParams{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
			t.Fatalf("going offline: %v", err)
		}
	}
	goOffline(ctx)
	targets, err := chromedp.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	workers := 0
	for _, tg := range targets {
		if tg.Type == "service_worker" && strings.HasPrefix(tg.URL, f.URL()+"/sw.js") {
			wctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(tg.TargetID))
			defer cancel()
			goOffline(wctx)
			workers++
		}
	}
	if workers != 1 {
		t.Fatalf("%d service workers of this server among %d targets", workers, len(targets))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(f.URL()+"/inbox"), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
		t.Fatalf("navigating offline: %v", err)
	}
	if h, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1"))); !strings.Contains(h, "You are offline") {
		t.Errorf("offline, /inbox shows %q", h)
	}
	if body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(body, "inbox again when the connection is back") || strings.Contains(body, "Proposed by") {
		t.Errorf("offline page: %q", body)
	}
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil && os.Getenv("ASSENT_SCREENSHOT_DIR") != "" {
		os.WriteFile(filepath.Join(os.Getenv("ASSENT_SCREENSHOT_DIR"), "offline-360.png"), shot, 0o644)
	}
}

// offlineParams are the parameters of Network.emulateNetworkConditions.
type offlineParams struct {
	Offline            bool    `json:"offline"`
	Latency            float64 `json:"latency"`
	DownloadThroughput float64 `json:"downloadThroughput"`
	UploadThroughput   float64 `json:"uploadThroughput"`
}

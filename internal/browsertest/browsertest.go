// Package browsertest starts headless Chromium for tests that look at a
// page as a person does.
//
// A test that needs a browser calls New; without Chromium it is skipped,
// unless ASSENT_REQUIRE_BROWSER is set (as CI sets it), where it fails, so
// a missing install step cannot pass unnoticed. ASSENT_CHROMIUM names the
// binary when it is not on PATH.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the browser's path, or skips (or fails) t.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ASSENT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ASSENT_REQUIRE_BROWSER") != "" {
		t.Fatal("Chromium is not installed but ASSENT_REQUIRE_BROWSER is set (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed (apt-get install chromium); skipping the browser test")
	return ""
}

// New starts headless Chromium and returns a tab's context, closed when the
// test ends. Every action in the tab gives up after timeout. extra adds to
// the browser's options.
func New(t testing.TB, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

package view

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/render"
)

// firstLine is the first complete line of the payment screen.
const firstLine = "root = Card([title, amount, note, actions])\n"

// afterPaint resolves once the frame that draws what the page just changed
// has been painted.
const afterPaint = `new Promise(function (resolve) { requestAnimationFrame(function () { setTimeout(resolve, 0); }); })`

// BenchmarkFirstPaint measures, in Chromium, the time from the first
// complete line of a screen to the frame that paints it:
//
//   - view: the line reaches the view (the host's tool-input-partial), which
//     parses and draws it in the page;
//   - web: the web renderer's work for the same line — the Go parser and
//     screen/render on the server — and the page painting the HTML it made
//     (the network between them left out).
//
// The figure is ms/paint, measured from the Go side around the whole step;
// each step starts from a freshly loaded page.
func BenchmarkFirstPaint(b *testing.B) {
	ctx := browsertest.New(b, 10*time.Minute)
	css, _ := os.ReadFile(screenCSS)
	viewPage := Page(Config{Tools: []string{"billing.pay"}, CSS: string(css)})
	webPage := []byte(`<!doctype html><html><head><meta charset="utf-8"><style>` + string(css) +
		`</style></head><body><main><div id="screen-region"></div></main><script>document.documentElement.dataset.ready = "true";</script></body></html>`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", DefaultCSP)
		if r.URL.Path == "/web" {
			w.Write(webPage)
			return
		}
		w.Write(viewPage)
	}))
	b.Cleanup(srv.Close)
	load := func(b *testing.B, path string) {
		b.StopTimer()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path), chromedp.WaitReady(`html[data-ready="true"]`)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.Run("view", func(b *testing.B) {
		line := strings.ReplaceAll(firstLine, "\n", `\n`)
		var total time.Duration
		for b.Loop() {
			load(b, "/view")
			start := time.Now()
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`assentView.input({screen: "`+line+`"}, false), `+afterPaint, chromedp.EvalAwaitPromise)); err != nil {
				b.Fatal(err)
			}
			total += time.Since(start)
			if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("n-root")`)); !ok {
				b.Fatal("the view did not draw the first line")
			}
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/paint")
	})
	b.Run("web", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			load(b, "/web")
			start := time.Now()
			p := screen.NewParser(screen.Options{Tools: []string{"billing.pay"}})
			p.WriteString(firstLine)
			var html strings.Builder
			if err := render.WriteHTML(&html, render.Build(p.Document(), render.Options{}).Root); err != nil {
				b.Fatal(err)
			}
			expr := `document.getElementById("screen-region").innerHTML = ` + jsString(html.String()) + `, ` + afterPaint
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise)); err != nil {
				b.Fatal(err)
			}
			total += time.Since(start)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/paint")
	})
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\u2028", `\u2028`, "\u2029", `\u2029`)
	return `"` + r.Replace(s) + `"`
}

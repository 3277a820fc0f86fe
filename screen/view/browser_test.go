package view

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/screen/internal/conformance"
)

// openView serves the view as a page of its own and opens it in Chromium,
// once its engine is running.
func openView(t *testing.T, cfg Config) context.Context {
	t.Helper()
	ctx := browsertest.New(t, 120*time.Second)
	page := Page(cfg)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// The policy a host applies by default: nothing from the network.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'unsafe-inline'; img-src data:")
		w.Write(page)
	}))
	t.Cleanup(srv.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL), chromedp.WaitReady(`html[data-ready="true"]`)); err != nil {
		t.Fatalf("the view did not start: %v", err)
	}
	return ctx
}

// runCases is run in the page: each case through the view's engine, fed
// whole or in pieces of chunk characters.
const runCases = `(function (cases, chunk) {
  const out = [];
  for (const c of cases) {
    const s = omniScreen.open(JSON.stringify({tools: c.tools, assets: c.assets || [], components: c.components || null, families: c.pictures || null}));
    if (chunk <= 0) {
      s.write(c.text);
    } else {
      const chars = Array.from(c.text);
      for (let i = 0; i < chars.length; i += chunk) s.write(chars.slice(i, i + chunk).join(""));
    }
    s.end();
    const updates = (c.updates || []).map(function (u) { return JSON.parse(s.update(u)); });
    out.push({doc: JSON.parse(s.doc()), issues: JSON.parse(s.issues()), updates: updates});
  }
  return JSON.stringify(out);
})`

// TestConformanceInTheView runs the shared screen conformance cases, and
// our own, through the view's engine in Chromium, fed whole and in pieces.
func TestConformanceInTheView(t *testing.T) {
	shared, err := conformance.Load(filepath.Join("..", conformance.SharedDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	own, err := conformance.Load(filepath.Join("..", "testdata", "cases", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(own) == 0 {
		t.Fatal("no cases of our own in ../testdata/cases")
	}
	if len(shared) == 0 {
		t.Logf("no shared cases at %s: running our own only", conformance.SharedDir)
	}
	ctx := openView(t, Config{})
	type input struct {
		Text       string          `json:"text"`
		Tools      []string        `json:"tools"`
		Assets     []string        `json:"assets"`
		Components json.RawMessage `json:"components,omitempty"`
		Pictures   json.RawMessage `json:"pictures,omitempty"`
		Updates    []string        `json:"updates"`
	}
	total := 0
	for _, f := range append(shared, own...) {
		var inputs []input
		for i := range f.Cases {
			c := &f.Cases[i]
			text, err := c.Text()
			if err != nil {
				t.Fatalf("%s/%s: %v", f.Name, c.ID, err)
			}
			in := input{Text: text, Tools: c.ToolNames(), Assets: c.Assets, Components: c.Components, Pictures: c.Pictures, Updates: []string{}}
			for _, u := range c.Updates {
				ut, err := conformance.Text(u.Input)
				if err != nil {
					t.Fatalf("%s/%s: %v", f.Name, c.ID, err)
				}
				in.Updates = append(in.Updates, ut)
			}
			inputs = append(inputs, in)
		}
		arg, _ := json.Marshal(inputs)
		for _, chunk := range []int{0, 1, 5, 13} {
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("%s(%s, %d)", runCases, arg, chunk)))
			if err != nil {
				t.Fatalf("%s chunk %d: %v", f.Name, chunk, err)
			}
			var got []conformance.Outcome
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				t.Fatalf("%s chunk %d: %v", f.Name, chunk, err)
			}
			if len(got) != len(f.Cases) {
				t.Fatalf("%s: %d outcomes for %d cases", f.Name, len(got), len(f.Cases))
			}
			for i := range f.Cases {
				c := &f.Cases[i]
				t.Run(fmt.Sprintf("%s/%s/chunk%d", f.Name, c.ID, chunk), func(t *testing.T) { conformance.Check(t, c, got[i]) })
			}
		}
		total += len(f.Cases)
	}
	t.Logf("%d cases, each fed whole and in pieces of 1, 5 and 13 characters", total)
}

// TestViewStreamsAsSpecified feeds the view as a host does (SPEC 10.26):
// whole lines only while the text grows, a new parser when the text does
// not begin with what was written, nothing after the complete input, and
// a neutral notice, not the issues, when lines were rejected (10.27).
func TestViewStreamsAsSpecified(t *testing.T) {
	ctx := openView(t, Config{})
	run := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr+", null")); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(function(){ const e = document.querySelector(%q); return e ? e.textContent : "<none>"; })()`, sel)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	wait := func(what, expr string) {
		t.Helper()
		for range 100 {
			if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](expr)); ok {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("waiting for %s", what)
	}
	// A half line is not written: the heading's text would be cut.
	run(`assentView.input({screen: "root = Card([h, t])\nh = Heading(\"Ord"}, false)`)
	wait("the card", `!!document.querySelector("#n-root")`)
	if pending, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#n-h").classList.contains("o-pending")`)); !pending {
		t.Fatalf("a half line was drawn: %q", text("#n-h"))
	}
	run(`assentView.input({screen: "root = Card([h, t])\nh = Heading(\"Order 7\")\n"}, false)`)
	wait("the heading", `document.querySelector("#n-h") && document.querySelector("#n-h").textContent === "Order 7"`)
	// Text that does not begin with what was written starts again.
	run(`assentView.input({screen: "root = Card([x])\nx = Text(\"Another\")\n"}, false)`)
	wait("the new stream", `!!document.querySelector("#n-x") && !document.querySelector("#n-h")`)
	// The complete input ends it; the one bad line is not shown, and the
	// person reads a neutral notice, not the issue.
	run(`assentView.input({screen: "root = Card([x])\nx = Text(\"Another\")\nthis is not a statement\n"}, true)`)
	wait("the notice", `!document.getElementById("view-notice").hidden`)
	if got := text("#view-notice"); got != "Some parts could not be shown." {
		t.Fatalf("notice reads %q", got)
	}
	if got := text("#n-x"); got != "Another" {
		t.Fatalf("the accepted part reads %q", got)
	}
	// Later input is ignored.
	run(`assentView.input({screen: "root = Text(\"late\")\n"}, true)`)
	time.Sleep(200 * time.Millisecond)
	if got := text("#n-x"); got != "Another" {
		t.Fatalf("later input changed the screen: %q", got)
	}
	timings, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`assentView.timings`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("engine running %.0f ms after navigation; first input to first paint %.1f ms", timings["engineReady"], timings["firstPaint"]-timings["firstInput"])
}

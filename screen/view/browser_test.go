package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/field"
	"github.com/assent-run/assent/screen/internal/conformance"
	"github.com/assent-run/assent/screen/render"
)

// DefaultCSP is the policy an MCP Apps host applies to a view that
// declares none: no network, no eval, no WebAssembly.
const DefaultCSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:; connect-src 'none'"

// openView serves the view as a page of its own under the default policy
// and opens it in Chromium. A violation of the policy fails the test.
func openView(t *testing.T, cfg Config) context.Context {
	t.Helper()
	ctx := browsertest.New(t, 120*time.Second)
	page := Page(cfg)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", DefaultCSP)
		w.Write(page)
	}))
	t.Cleanup(srv.Close)
	// A script blocked by the policy leaves the page not ready.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitReady(`html[data-ready="true"]`)); err != nil {
		t.Fatalf("the view did not start: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.cspViolations = []; document.addEventListener("securitypolicyviolation", function (e) { cspViolations.push(e.violatedDirective + " " + e.blockedURI); }); null`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.cspViolations || []`)); err == nil && len(v) > 0 {
			t.Errorf("the view broke the default policy: %v", v)
		}
	})
	return ctx
}

// runCases is run in the page: each case through the view's engine, fed
// whole or in pieces of chunk characters.
const runCases = `(function (cases, chunk) {
  const out = [];
  for (const c of cases) {
    const s = omniScreen.open({tools: c.tools, assets: c.assets || [], components: c.components || null, families: c.pictures || null});
    if (chunk <= 0) {
      s.write(c.text);
    } else {
      const chars = Array.from(c.text);
      for (let i = 0; i < chars.length; i += chunk) s.write(chars.slice(i, i + chunk).join(""));
    }
    const partial = s.draw().html;
    s.end();
    const updates = (c.updates || []).map(function (u) { return JSON.parse(JSON.stringify(s.update(u))); });
    const o = s.outcome();
    o.updates = updates;
    o.html = s.draw().html;
    o.partial = partial;
    out.push(o);
  }
  return JSON.stringify(out);
})`

// goOutcome is what the Go reader makes of c, fed whole, and the web
// renderer's HTML of the screen, before the stream ended and after.
func goOutcome(t *testing.T, c *conformance.Case, text string, updates []string) (conformance.Outcome, [2]string) {
	t.Helper()
	opts := screen.Options{Tools: c.ToolNames(), Assets: c.Assets}
	if len(c.Components) > 0 {
		opts.Components, _ = screen.DeclareComponents(c.Components)
	}
	if len(c.Pictures) > 0 {
		opts.Pictures, _ = screen.DeclarePictures(c.Pictures)
	}
	tools := map[string]bool{}
	for _, n := range c.ToolNames() {
		tools[n] = true
	}
	draw := func(doc *screen.Document) string {
		var html strings.Builder
		if err := render.WriteHTML(&html, render.Build(doc, render.Options{Tool: func(n string) bool { return tools[n] }}).Root); err != nil {
			t.Fatal(err)
		}
		return html.String()
	}
	p := screen.NewParser(opts)
	p.WriteString(text)
	partial := draw(p.Document())
	doc := p.End()
	var out struct {
		Doc     *screen.Document `json:"doc"`
		Issues  []screen.Issue   `json:"issues"`
		Updates []any            `json:"updates"`
	}
	out.Updates = []any{}
	for _, u := range updates {
		res, err := p.Update(u)
		if err != nil {
			t.Fatal(err)
		}
		issues := res.Issues
		if issues == nil {
			issues = []screen.Issue{}
		}
		out.Updates = append(out.Updates, map[string]any{"applied": res.Applied, "issues": issues})
	}
	out.Doc, out.Issues = doc, doc.Issues()
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var o conformance.Outcome
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o, [2]string{partial, draw(doc)}
}

// sameMarkup is run in the page: each pair of HTML texts, parsed and
// written again as a canonical form (attributes sorted, white space
// between elements left out), so that the view's drawing and the web
// renderer's compare as documents.
const sameMarkup = `(function (pairs) {
  function norm(html) {
    const t = document.createElement("template");
    t.innerHTML = html;
    function walk(n) {
      if (n.nodeType === 3) return /^\s*$/.test(n.nodeValue) ? "" : JSON.stringify(n.nodeValue);
      let s = "";
      if (n.nodeType === 1) s = "<" + n.localName + " " + Array.from(n.attributes).map(function (a) { return a.name + "=" + JSON.stringify(a.value); }).sort().join(" ") + ">";
      for (const c of n.childNodes) s += walk(c);
      return n.nodeType === 1 ? s + "</" + n.localName + ">" : s;
    }
    return walk(t.content);
  }
  return JSON.stringify(pairs.map(function (p) { return [norm(p[0]), norm(p[1])]; }));
})`

// sameOutcome reports how the view's outcome differs from the Go reader's:
// the same issues (line, code and words, in order), the same document, the same
// update outcomes.
func sameOutcome(t *testing.T, view, gr conformance.Outcome) {
	t.Helper()
	var vd, gd any
	_ = json.Unmarshal(view.Doc, &vd)
	_ = json.Unmarshal(gr.Doc, &gd)
	if !reflect.DeepEqual(vd, gd) {
		t.Errorf("the view's document differs from the Go reader's:\nview %s\n  go %s", view.Doc, gr.Doc)
	}
	if g, w := issueKeys(view.Issues), issueKeys(gr.Issues); !reflect.DeepEqual(g, w) {
		t.Errorf("the view's issues differ from the Go reader's:\nview %v\n  go %v", g, w)
	}
	if len(view.Updates) != len(gr.Updates) {
		t.Fatalf("%d update outcomes in the view, %d in Go", len(view.Updates), len(gr.Updates))
	}
	for i := range view.Updates {
		v, g := view.Updates[i], gr.Updates[i]
		if v.Applied != g.Applied || !reflect.DeepEqual(issueKeys(v.Issues), issueKeys(g.Issues)) {
			t.Errorf("update %d: view applied=%v %v, go applied=%v %v", i, v.Applied, issueKeys(v.Issues), g.Applied, issueKeys(g.Issues))
		}
	}
}

func issueKeys(issues []conformance.Issue) []string {
	out := []string{}
	for _, i := range issues {
		line := 0
		if i.Line != nil {
			line = *i.Line
		}
		out = append(out, fmt.Sprintf("%d:%s %s", line, i.Code, i.Message))
	}
	return out
}

// TestConformanceInTheView runs the shared screen conformance cases, and
// our own, through the view's engine in Chromium under the default policy
// of MCP Apps hosts, fed whole and in pieces, and through the Go reader:
// each outcome must be what the case expects and what the Go reader made.
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
		var fromGo []conformance.Outcome
		var goHTML [][2]string
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
			o, html := goOutcome(t, c, text, in.Updates)
			fromGo = append(fromGo, o)
			goHTML = append(goHTML, html)
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
			if chunk == 0 {
				names := make([]string, len(f.Cases))
				for i := range f.Cases {
					names[i] = f.Name + "/" + f.Cases[i].ID
				}
				compareMarkup(t, ctx, names, got, goHTML)
			}
			for i := range f.Cases {
				c := &f.Cases[i]
				t.Run(fmt.Sprintf("%s/%s/chunk%d", f.Name, c.ID, chunk), func(t *testing.T) {
					conformance.Check(t, c, got[i])
					sameOutcome(t, got[i], fromGo[i])
				})
			}
		}
		total += len(f.Cases)
	}
	t.Logf("%d cases, each fed whole and in pieces of 1, 5 and 13 characters", total)
}

// compareMarkup checks that the view draws each case's screen as the web
// renderer does.
func compareMarkup(t *testing.T, ctx context.Context, names []string, got []conformance.Outcome, goHTML [][2]string) {
	t.Helper()
	var pairs [][2]string
	for i := range got {
		pairs = append(pairs, [2]string{got[i].Partial, goHTML[i][0]}, [2]string{got[i].HTML, goHTML[i][1]})
	}
	arg, _ := json.Marshal(pairs)
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("%s(%s)", sameMarkup, arg)))
	if err != nil {
		t.Fatal(err)
	}
	var norm [][2]string
	if err := json.Unmarshal([]byte(raw), &norm); err != nil {
		t.Fatal(err)
	}
	for i, p := range norm {
		if p[0] != p[1] {
			when := "once the stream ended"
			if i%2 == 0 {
				when = "while the stream was open"
			}
			t.Errorf("%s: %s, the view draws the screen unlike the web renderer:\nview %s\n web %s", names[i/2], when, p[0], p[1])
		}
	}
}

// TestFieldChecksInTheView runs the shared field cases, and our own,
// through the view's field checks and through package field: both must
// give the case's answer.
func TestFieldChecksInTheView(t *testing.T) {
	type fieldCase struct {
		ID        string         `json:"id"`
		Component string         `json:"component"`
		Props     map[string]any `json:"props"`
		Value     any            `json:"value"`
		Expect    *field.Problem `json:"expect"`
	}
	var cases []fieldCase
	for _, path := range []string{filepath.Join("..", "..", "..", "shared", "omni-ir", "conformance", "fields", "fields.json"), filepath.Join("..", "field", "testdata", "fields.json")} {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			t.Logf("no field cases at %s", path)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Cases []fieldCase `json:"cases"`
		}
		if err := json.Unmarshal(data, &file); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cases = append(cases, file.Cases...)
	}
	if len(cases) == 0 {
		t.Fatal("no field cases")
	}
	ctx := openView(t, Config{})
	arg, _ := json.Marshal(cases)
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`JSON.stringify(%s.map(function (c) { return omniScreen.fieldCheck(c.component, c.props || {}, c.value === undefined ? null : c.value); }))`, arg)))
	if err != nil {
		t.Fatal(err)
	}
	var got []*field.Problem
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	canon := func(p *field.Problem) string { b, _ := json.Marshal(p); return string(b) }
	for i, c := range cases {
		want := canon(c.Expect)
		if g := canon(got[i]); g != want {
			t.Errorf("%s: the view says %s, want %s", c.ID, g, want)
		}
		if g := canon(field.Check(c.Component, c.Props, c.Value)); g != want {
			t.Errorf("%s: package field says %s, want %s", c.ID, g, want)
		}
	}
	t.Logf("%d field cases", len(cases))
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
		testwait.Eventually(t, 5*time.Second, func() bool {
			ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
			return ok
		}, what)
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

// TestViewMatchesGoOnMutatedStreams feeds the view and the Go reader
// streams made by cutting, repeating and splicing the conformance cases at
// random (a fixed seed, so a failure repeats), in pieces, and compares what
// each made of them: the view is a second reader, and the cases alone do
// not reach every path the two must agree on.
func TestViewMatchesGoOnMutatedStreams(t *testing.T) {
	shared, _ := conformance.Load(filepath.Join("..", conformance.SharedDir, "*.json"))
	own, err := conformance.Load(filepath.Join("..", "testdata", "cases", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var seeds []*conformance.Case
	var texts []string
	for _, f := range append(shared, own...) {
		for i := range f.Cases {
			if text, err := f.Cases[i].Text(); err == nil && len(text) < 4000 {
				seeds = append(seeds, &f.Cases[i])
				texts = append(texts, text)
			}
		}
	}
	pieces := []string{`"`, `(`, `)`, `[`, `]`, `{`, `}`, `,`, `=`, `:`, `$x`, "\n", "\r\n", `#`, `\`, `\n`, ` `, "\t", `é`, "😀", `1e5`, `-`, `.5`, `root`,
		`Text("a")`, `McpMutation(`, `$k = ""`, `x = Button("b", action="go")`, `null`, `true`, `__proto__`, "\ufeff"}
	rng := rand.New(rand.NewPCG(23, 7))
	type input struct {
		Text       string          `json:"text"`
		Tools      []string        `json:"tools"`
		Assets     []string        `json:"assets"`
		Components json.RawMessage `json:"components,omitempty"`
		Pictures   json.RawMessage `json:"pictures,omitempty"`
	}
	var inputs []input
	var cases []*conformance.Case
	for range 2000 {
		i := rng.IntN(len(seeds))
		r := []rune(texts[i])
		for range 1 + rng.IntN(3) {
			at := rng.IntN(len(r) + 1)
			switch rng.IntN(4) {
			case 0: // cut
				end := min(len(r), at+rng.IntN(12))
				r = append(r[:at:at], r[end:]...)
			case 1: // splice a piece in
				r = append(r[:at:at], append([]rune(pieces[rng.IntN(len(pieces))]), r[at:]...)...)
			case 2: // repeat a stretch
				end := min(len(r), at+rng.IntN(60))
				r = append(r[:end:end], append(slices.Clone(r[at:end]), r[end:]...)...)
			case 3: // take a stretch of another case
				o := []rune(texts[rng.IntN(len(texts))])
				from := rng.IntN(len(o) + 1)
				r = append(r[:at:at], append(o[from:min(len(o), from+rng.IntN(80))], r[at:]...)...)
			}
		}
		c := seeds[i]
		inputs = append(inputs, input{Text: string(r), Tools: c.ToolNames(), Assets: c.Assets, Components: c.Components, Pictures: c.Pictures})
		cases = append(cases, seeds[i])
	}
	ctx := openView(t, Config{})
	arg, _ := json.Marshal(inputs)
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("%s(%s, %d)", runCases, arg, 3)))
	if err != nil {
		t.Fatal(err)
	}
	var got []conformance.Outcome
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	failed := 0
	names := make([]string, len(inputs))
	goHTML := make([][2]string, len(inputs))
	for i, in := range inputs {
		var want conformance.Outcome
		want, goHTML[i] = goOutcome(t, cases[i], in.Text, nil)
		names[i] = fmt.Sprintf("input %d %q", i, in.Text)
		ok := t.Run(fmt.Sprint(i), func(t *testing.T) {
			sameOutcome(t, got[i], want)
		})
		if !ok {
			failed++
			t.Logf("input %d: %q", i, in.Text)
			if failed > 5 {
				t.Fatal("more than five differ")
			}
		}
	}
	compareMarkup(t, ctx, names, got, goHTML)
}

// TestViewTellsTheModelWithoutSecrets: after a field changes, the view
// tells the model the screen as the person sees it, through the host
// (ui/update-model-context), with a value that feeds a secret param of a
// button's tool hidden.
func TestViewTellsTheModelWithoutSecrets(t *testing.T) {
	ctx := openView(t, Config{Tools: []string{"acct.login"}, Secret: map[string][]string{"acct.login": {"pin"}}})
	stream := "root = Card([user, pin, go])\n$user = \"\"\nuser = Input($user, label=\"User\")\n$pin = \"\"\npin = Input($pin, label=\"PIN\")\ngo = Button(\"Sign in\", action=\"login\")\ngoIt = McpMutation(go, tool=\"acct.login\", params={user: $user, pin: $pin})\n"
	arg, _ := json.Marshal(stream)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.told = []; window.addEventListener("message", function (e) { if (e.data && e.data.method === "ui/update-model-context") told.push(e.data.params); }); assentView.input({screen: `+string(arg)+`}, true), null`)); err != nil {
		t.Fatal(err)
	}
	fill := `(function (id, v) { const f = document.getElementById(id); f.value = v; f.dispatchEvent(new Event("input", {bubbles: true})); f.dispatchEvent(new Event("change", {bubbles: true})); return null; })`
	for _, step := range []string{fill + `("f-user", "ann")`, fill + `("f-pin", "4321")`} {
		testwait.Eventually(t, 5*time.Second, func() bool {
			ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("f-pin")`))
			return ok
		}, "the PIN field")
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](step)); err != nil {
			t.Fatal(err)
		}
	}
	var told string
	testwait.EventuallyC(t, 5*time.Second, func(c *testwait.C) {
		if told, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`told.length ? told[told.length - 1].content[0].text : ""`)); !strings.Contains(told, "PIN") {
			c.Errorf("the model was told %q", told)
		}
	}, "the model told of the PIN")
	if !strings.Contains(told, `User = "ann"`) || !strings.Contains(told, "PIN = "+render.WordHidden) || strings.Contains(told, "4321") {
		t.Fatalf("the model was told %q", told)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// axeScript returns axe-core's script (e2e/axe, set up with
// `npm ci --prefix e2e/axe`), or skips t when it is not installed and the
// browser is not required.
func axeScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("axe", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("ASSENT_REQUIRE_BROWSER") != "" {
			t.Fatal("axe-core is not installed but ASSENT_REQUIRE_BROWSER is set: run npm ci --prefix e2e/axe")
		}
		t.Skip("axe-core is not installed (npm ci --prefix e2e/axe); skipping")
	}
	return string(b)
}

// axeViolation is the part of an axe result a failure message needs.
type axeViolation struct {
	ID    string `json:"id"`
	Help  string `json:"help"`
	Nodes []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// axeCheck injects axe-core into the open page, runs it and returns its
// violations.
func axeCheck(t *testing.T, ctx context.Context, script string) []axeViolation {
	t.Helper()
	run := `(async () => { if (!window.axe) { eval(` + jsString(script) + `); }
		const r = await axe.run(document, {resultTypes: ["violations"]});
		return JSON.stringify(r.violations); })()`
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](run, func(p *runtime.EvaluateParams) { yes := true; p.AwaitPromise = &yes }))
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	var v []axeViolation
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("axe result %q: %v", raw, err)
	}
	return v
}

// TestPagesPassAxe: every page a person reaches — the inbox with its
// cards (a control's card also right after Apply), the audit log, tools, Runs and a Run, a Run proposal, screens and a
// screen, Flows and a Flow instance, sign-in, signed-out and not-found —
// has no axe-core violation at a desktop's 1280 px and a phone's 390 px.
func TestPagesPassAxe(t *testing.T) {
	script := axeScript(t)
	a := newApp(t, true)
	a.payTool()
	ctx := browser(t)
	agent := a.agent()
	if out, isErr := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"}); isErr {
		t.Fatalf("prescribe: %v", out)
	}
	out, isErr := assenttest.CallTool(t, agent, "show_screen", map[string]any{"screen": payStreamWide})
	if isErr {
		t.Fatalf("show_screen: %v", out)
	}
	screen := out["screen"].(string)
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	stage := func(v string) {
		t.Helper()
		if out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": v}); isErr {
			t.Fatalf("stage: %v", out)
		}
	}
	stage("pro")
	code, v := a.execAPI("POST", "/v1/runs", a.Boot.AgentToken, map[string]any{"template": "echo hello", "run_id": "axe-proposed"})
	if code >= 300 || v["proposal"] == nil {
		t.Fatalf("proposing a Run: %d %v", code, v)
	}
	proposal := v["proposal"].(string)
	runner := a.issue(store.KindAgent, "runner", "command.execute")
	if code, v := a.execAPI("POST", "/v1/runs", runner, map[string]any{"template": "echo one; echo two; sleep 30", "run_id": "axe-run"}); code >= 300 {
		t.Fatalf("starting a Run: %d %v", code, v)
	}

	pages := []string{"/inbox", "/audit", "/tools", "/runs", "/runs/axe-run", "/runs/proposals/" + proposal,
		"/screens", "/screens/" + screen, "/flows", "/flows/instances/expense-1001", "/rules", "/no/such/page"}
	for _, width := range []int64{1280, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
			t.Fatal(err)
		}
		check := func(name string) {
			t.Helper()
			time.Sleep(300 * time.Millisecond) // let scripts draw times and screens
			for _, v := range axeCheck(t, ctx, script) {
				var where []string
				for _, n := range v.Nodes {
					where = append(where, fmt.Sprint(n.Target)+": "+n.Summary)
				}
				t.Errorf("%s at %d px: %s (%s)\n  %s", name, width, v.ID, v.Help, strings.Join(where, "\n  "))
			}
		}
		// Signed out, then the sign-in page, then every page signed in.
		if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"), chromedp.WaitReady("main")); err != nil {
			t.Fatal(err)
		}
		check("signed out")
		if err := chromedp.Do(ctx, chromedp.Navigate(a.signInLink()), chromedp.WaitVisible(chromedp.ID("signin-continue"))); err != nil {
			t.Fatal(err)
		}
		check("sign-in")
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("signin-continue")), chromedp.WaitVisible(chromedp.ID("who-name"))); err != nil {
			t.Fatal(err)
		}
		for _, p := range pages {
			if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+p), chromedp.WaitReady("main")); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			check(p)
			if os.Getenv("ASSENT_SCREENSHOTS") != "" {
				screenshot(t, ctx, fmt.Sprintf("%s-%d", strings.ReplaceAll(strings.Trim(p, "/"), "/", "-"), width))
			}
		}
		// A control's card right after Apply, offering its Undo.
		if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"),
			chromedp.Click(chromedp.CSS(`#section-proposals form[action="/web/controls/apply"] button`)),
			chromedp.WaitVisible(chromedp.CSS(".undo-offer button.undo"))); err != nil {
			t.Fatalf("apply: %v", err)
		}
		check("the undo offer")
		if os.Getenv("ASSENT_SCREENSHOTS") != "" {
			screenshot(t, ctx, fmt.Sprintf("undo-%d", width))
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".undo-offer button.undo"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the undo", `(document.querySelector(".undo-offer")?.textContent || "").includes("Undone")`)
		stage("team")
		// Signed out again for the next width, once the signed-out page
		// has loaded: a navigation begun while the sign-out's redirect is
		// still under way would be aborted by it.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form[action="/signout"] button`))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the signed-out page", `document.title.startsWith("Sign in") && document.readyState === "complete"`)
	}
}

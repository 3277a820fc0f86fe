package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/run"
)

// pointDemoRecipe rewrites the demo-player Recipe of data directory dir to
// execute exe, the real assent binary (the server wrote it for the binary
// running now, which in tests is the test binary).
func pointDemoRecipe(t *testing.T, dir, exe string) {
	t.Helper()
	p := filepath.Join(dir, "recipes", "demo-player.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var recipe map[string]any
	if err := json.Unmarshal(b, &recipe); err != nil {
		t.Fatal(err)
	}
	tpl, _ := recipe["template"].(string)
	_, rest, ok := strings.Cut(tpl, " run demo-service")
	if !ok {
		t.Fatalf("demo-player template %q does not run the demo service", tpl)
	}
	recipe["template"] = "exec " + run.ShellQuote(shareWithRuns(t, dir, exe)) + " run demo-service" + rest
	b, _ = json.Marshal(recipe)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// shareWithRuns copies the binary exe into bin/ of the data directory dir
// and returns the copy's absolute path: a Run in namespaces of its own
// has a /tmp of its own, where exe (built in a test's directory) is not,
// and of the data directory sees only its own directory and bin/.
func shareWithRuns(t *testing.T, dir, exe string) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(bin, "assent")
	if err := os.WriteFile(shared, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return shared
}

// reloadUntil reloads url until the JavaScript condition expr holds, for
// up to 30 seconds.
func reloadUntil(t *testing.T, ctx context.Context, url, what, expr string) {
	t.Helper()
	done := false
	defer func() {
		if !done {
			screenshot(t, ctx, "timeout")
		}
	}()
	testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
		err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("run-status")))
		if err != nil || !eval[bool](t, ctx, expr) {
			c.Errorf("%s: %v; status %q", expr, err, text(t, ctx, chromedp.ID("run-status")))
		}
	}, what)
	done = true
}

// An agent starts the demo player; the person finds it on the Runs page,
// opens it, pauses it with the Recipe's own Control, sees the service say
// it is paused, and resumes it. The journal names the person as sender.
func TestRunsPagePausesAnAgentsPlayer(t *testing.T) {
	exe := buildAssent(t)
	a := newApp(t, true)
	pointDemoRecipe(t, a.Dir, exe)
	ctx := browser(t)

	cs := a.agent()
	startPlayer(t, a, cs)

	a.signIn(ctx)
	err := chromedp.Do(ctx,
		chromedp.Navigate(a.HTTP.URL+"/runs?status=running"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/runs/demo-player"]`)),
	)
	if err != nil {
		screenshot(t, ctx, "list")
		t.Fatalf("the agent's Run is not on the Runs page: %v", err)
	}
	if list := text(t, ctx, chromedp.ID("run-list")); !strings.Contains(list, "demo-player") || !strings.Contains(list, "started by "+a.Boot.Agent.Name) {
		t.Fatalf("the Runs page says %q", list)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="/runs/demo-player"]`)), chromedp.WaitVisible(chromedp.ID("control-pause"))); err != nil {
		screenshot(t, ctx, "run")
		t.Fatalf("the Run page has no pause button: %v", err)
	}
	page := a.HTTP.URL + "/runs/demo-player"
	// The player is up once its Trace shows its events; a Control sent
	// before it reads its FIFO is refused as not ready.
	reloadUntil(t, ctx, page, "the player to start", `document.querySelector("#run-detail").textContent.includes("player.")`)

	for _, step := range []struct{ button, status string }{
		{"control-pause", "running (paused)"},
		{"control-resume", "running"},
	} {
		submit(t, ctx, step.button)
		if n := eval[int](t, ctx, `document.querySelectorAll("#notice").length`); n != 0 {
			t.Fatalf("press %s: %s", step.button, text(t, ctx, chromedp.ID("notice")))
		}
		reloadUntil(t, ctx, page, step.status, `document.getElementById("run-status").textContent.trim() === `+jsString(step.status))
	}
	senders := eval[[]string](t, ctx, `[...document.querySelectorAll("td.sender")].map(e => e.textContent)`)
	if len(senders) < 2 || senders[0] != a.Boot.Owner.Name || senders[1] != a.Boot.Owner.Name {
		t.Fatalf("the Control journal names %v as senders, want the person", senders)
	}
	screenshot(t, ctx, "resumed")
}

// submit presses the form button id and waits for the page the form posts
// to, so that a navigation after it cannot cancel the post in flight.
func submit(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	eval[bool](t, ctx, `window.assentBeforeSubmit = true`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID(id))); err != nil {
		t.Fatalf("press %s: %v", id, err)
	}
	done := false
	defer func() {
		if !done {
			screenshot(t, ctx, "submit")
		}
	}()
	testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
		// The old document answers true until it is replaced; during the
		// switch the evaluation may fail, which is not an answer.
		loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.assentBeforeSubmit === undefined && document.readyState === "complete"`))
		if err != nil || !loaded {
			c.Errorf("not loaded: %v", err)
		}
	}, "press "+id+": the page it posts to loaded")
	done = true
}

// startPlayer has the agent of session cs start the demo player, ticking
// every 50 ms, and kills it when the test ends.
func startPlayer(t *testing.T, a *app, cs *mcp.ClientSession) {
	t.Helper()
	out, isErr := assenttest.CallTool(t, cs, "actors_run_spawn", map[string]any{"recipe": "demo-player", "values": map[string]any{"interval": 0.05}})
	if isErr || out["status"] != "running" {
		t.Fatalf("the agent's spawn: %v", out)
	}
	t.Cleanup(func() {
		r, _ := http.NewRequest("POST", a.HTTP.URL+"/v1/runs/demo-player/kill", nil)
		r.Header.Set("Authorization", "Bearer "+a.Boot.AgentToken)
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
		}
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

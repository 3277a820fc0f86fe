package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/view"
	"github.com/assent-run/assent/server/screens"
)

// appBridge bundles the official MCP Apps host bridge (e2e/apphost, set up
// with `npm ci --prefix e2e/apphost`) and returns the script.
func appBridge(t *testing.T) []byte {
	t.Helper()
	dir, _ := filepath.Abs("apphost")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "ext-apps")); err != nil {
		if os.Getenv("ASSENT_REQUIRE_BROWSER") != "" {
			t.Fatal("the MCP Apps host is not installed but ASSENT_REQUIRE_BROWSER is set: run npm ci --prefix e2e/apphost")
		}
		t.Skip("the MCP Apps host is not installed (npm ci --prefix e2e/apphost); skipping")
	}
	out := filepath.Join(t.TempDir(), "bridge.js")
	cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", "esbuild"), "entry.js", "--bundle", "--format=iife", "--global-name=ExtApps", "--outfile="+out, "--log-level=warning")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bundling the app bridge: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appsAgent connects the first agent with a client that declares MCP Apps
// support, as a host does.
func (a *app) appsAgent() *mcp.ClientSession {
	a.T.Helper()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension("io.modelcontextprotocol/ui", map[string]any{"mimeTypes": []string{view.MIMEType}})
	return a.connect(a.Boot.AgentToken, &mcp.ClientOptions{Capabilities: caps})
}

// inView evaluates expr in the view's frame (a sandboxed frame of another
// origin, which the host page's own scripts cannot read).
func inView[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	var world runtime.ExecutionContextID
	_, err := chromedp.Run(ctx, chromedp.Action[struct{}](func(ctx context.Context, tg *chromedp.Target) (struct{}, error) {
		tree, err := cdp.Call(ctx, tg, page.GetFrameTree, cdp.Empty{})
		if err != nil {
			return struct{}{}, err
		}
		if len(tree.FrameTree.ChildFrames) == 0 {
			return struct{}{}, errNoFrame
		}
		w, err := cdp.Call(ctx, tg, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: tree.FrameTree.ChildFrames[0].Frame.ID, WorldName: "test"})
		world = w.ExecutionContextID
		return struct{}{}, err
	}))
	if err != nil {
		t.Fatalf("reaching the view's frame: %v", err)
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, func(p *runtime.EvaluateParams) { p.ContextID = world }))
	if err != nil {
		t.Fatalf("in the view: %s: %v", expr, err)
	}
	return v
}

type frameError string

func (e frameError) Error() string { return string(e) }

const errNoFrame = frameError("the host page has no frame yet")

// waitInView polls expr in the view until it is true.
func waitInView(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	testwait.Eventually(t, 20*time.Second, func() bool { return inView[bool](t, ctx, expr) }, fmt.Sprintf("%s in the view (%s)", what, expr))
}

// defaultCSP is the policy an MCP Apps host applies to a view that
// declares none: no network, no eval, no WebAssembly.
const defaultCSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:; connect-src 'none'"

// appsHost is a host page on the official MCP Apps bridge (apphost/host.html)
// that draws viewHTML under exactly the default policy and forwards the
// view's tool calls to assent through hostMCP.
type appsHost struct {
	ctx     context.Context
	srv     *httptest.Server
	mu      sync.Mutex
	calls   []mcp.CallToolParams
	blocked []string // policy violations in the view
}

func (h *appsHost) reached() []mcp.CallToolParams {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func startAppsHost(t *testing.T, hostMCP *mcp.ClientSession, viewHTML string, bridgeJS []byte) *appsHost {
	t.Helper()
	h := &appsHost{}
	hostPage, err := os.ReadFile(filepath.Join("apphost", "host.html"))
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(hostPage)
		case "/bridge.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Write(bridgeJS)
		case "/view":
			// Exactly the policy hosts apply by default; the same policy,
			// report-only, tells the test of anything it blocked.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Security-Policy", defaultCSP)
			w.Header().Set("Content-Security-Policy-Report-Only", defaultCSP+"; report-uri /csp-report")
			w.Write([]byte(viewHTML))
		case "/csp-report":
			b, _ := io.ReadAll(io.LimitReader(r.Body, 8<<10))
			h.mu.Lock()
			h.blocked = append(h.blocked, string(b))
			h.mu.Unlock()
		case "/call":
			var p mcp.CallToolParams
			if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			h.mu.Lock()
			h.calls = append(h.calls, p)
			h.mu.Unlock()
			out, err := hostMCP.CallTool(r.Context(), &p)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			json.NewEncoder(w).Encode(out)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.blocked) > 0 {
			t.Errorf("the view broke the default policy: %v", h.blocked)
		}
	})
	h.ctx = browsertest.New(t, 120*time.Second,
		// Reach into the sandboxed frame from the test: keep it in the
		// page's process.
		chromedp.Flag("disable-features", "IsolateSandboxedIframes,site-per-process,IsolateOrigins"),
		chromedp.Flag("disable-site-isolation-trials", true))
	if err := chromedp.Do(h.ctx, chromedp.Navigate(h.srv.URL)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, h.ctx, "the view's handshake", `window.host.initialized === true`)
	return h
}

const noteStream = `root = Card([title, amount, note, actions])
title = Heading("Table note")
$amount = 1250
amount = Text($amount, format="currency", currency="USD")
$note = ""
note = Input($note, label="Note for the kitchen", required=true, maxLength=40)
actions = Stack([save, pay], direction="row")
save = Button("Save note", action="save", variant="primary")
saveIt = McpMutation(save, tool="orders.note", params={note: $note})
pay = Button("Pay", action="pay")
payIt = McpMutation(pay, tool="billing.pay", params={amount: $amount, note: $note})
`

// TestScreenViewInAnAppsHost draws show_screen's argument inside a host
// built on the official MCP Apps bridge: streamed in pieces, fields that
// check themselves, a governed button whose call reaches assent through the
// host with its idempotency key and button, an update applied, and a tool
// with a confirmation that only assent's web UI can run.
func TestScreenViewInAnAppsHost(t *testing.T) {
	bridgeJS := appBridge(t)
	a := newApp(t, false)
	pays := a.payTool()
	var noteMu sync.Mutex
	var notes []map[string]any
	err := a.Srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{
		Name:   "orders.note",
		Params: json.RawMessage(`{"type":"object","properties":{"note":{"type":"string","minLength":1,"maxLength":40}},"required":["note"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
			noteMu.Lock()
			defer noteMu.Unlock()
			notes = append(notes, req.Params)
			return confirm.Result{Value: map[string]any{"saved": true}, Update: "title = Heading(\"Note saved\")\n"}, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	hostMCP := a.appsAgent()
	res, err := hostMCP.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: view.URI})
	if err != nil {
		t.Fatal(err)
	}
	viewHTML := res.Contents[0].Text
	t.Logf("the view is %d bytes", len(viewHTML))

	h := startAppsHost(t, hostMCP, viewHTML, bridgeJS)
	ctx := h.ctx

	// The model's argument arrives in pieces, cut anywhere.
	start := time.Now()
	cuts := []int{17, 40, 41, 95, 160, 230, 300, 380, 470, len(noteStream) - 3}
	for _, n := range cuts {
		arg, _ := json.Marshal(map[string]any{"arguments": map[string]any{"screen": noteStream[:n]}})
		js[any](t, ctx, `window.bridge.sendToolInputPartial(`+string(arg)+`), null`)
		if n == 95 {
			waitInView(t, ctx, "the heading, before the stream is whole", `!!document.querySelector("#n-title") && document.querySelector("#n-title").textContent === "Table note"`)
			t.Logf("first paint %v after the first piece", time.Since(start).Round(time.Millisecond))
		}
	}
	whole, _ := json.Marshal(map[string]any{"arguments": map[string]any{"screen": noteStream}})
	js[any](t, ctx, `window.bridge.sendToolInput(`+string(whole)+`), null`)
	waitInView(t, ctx, "the whole screen", `!!document.querySelector("#b-pay")`)
	if got := inView[string](t, ctx, `document.querySelector("#n-amount").textContent`); got != "$1,250.00" {
		t.Fatalf("amount reads %q", got)
	}
	// Later input is ignored: one view shows one tool call.
	js[any](t, ctx, `window.bridge.sendToolInput({arguments: {screen: "root = Text(\"other\")\n"}}), null`)
	time.Sleep(300 * time.Millisecond)
	if !inView[bool](t, ctx, `!!document.querySelector("#b-pay")`) {
		t.Fatal("a later tool input replaced the screen")
	}

	// The model's own result, which names the screen assent keeps.
	shown, err := hostMCP.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": noteStream}})
	if err != nil || shown.IsError {
		t.Fatalf("show_screen: %v %v", err, shown)
	}
	resJSON, _ := json.Marshal(shown)
	js[any](t, ctx, `window.bridge.sendToolResult(`+string(resJSON)+`), null`)

	// A required field checks itself when the person leaves it, in the
	// runtime's words; pressing with it empty sends nothing.
	inView[any](t, ctx, `(function(){ const f = document.getElementById("f-note"); f.dispatchEvent(new FocusEvent("focusout", {bubbles: true})); return null; })()`)
	waitInView(t, ctx, "the field's message", `document.getElementById("m-note").textContent === "This field is required."`)
	inView[any](t, ctx, `document.getElementById("b-save").click(), null`)
	time.Sleep(300 * time.Millisecond)
	if n := js[int](t, ctx, `window.host.calls.length`); n != 0 {
		t.Fatalf("a press with an empty required field sent %d calls", n)
	}

	// Typed, then pressed: the call reaches assent through the host.
	inView[any](t, ctx, `(function(){ const f = document.getElementById("f-note"); f.value = "no onions"; f.dispatchEvent(new Event("input", {bubbles: true})); f.dispatchEvent(new Event("change", {bubbles: true})); return null; })()`)
	inView[any](t, ctx, `document.getElementById("b-save").click(), null`)
	waitInView(t, ctx, "the update", `document.querySelector("#n-title").textContent === "Note saved"`)
	reached := h.reached()
	if len(reached) != 1 {
		t.Fatalf("%d calls reached assent; want 1", len(reached))
	}
	got := reached[0]
	key, _ := got.Meta["io.omni-ir/idempotency-key"].(string)
	args, _ := got.Arguments.(map[string]any)
	if got.Name != "orders.note" || args["note"] != "no onions" || key == "" || got.Meta["io.omni-ir/button"] != "save" {
		t.Fatalf("the call that reached assent: %+v", got)
	}
	// The same key again runs nothing new.
	again, err := hostMCP.CallTool(context.Background(), &mcp.CallToolParams{Name: "orders.note", Arguments: args, Meta: mcp.Meta{"io.omni-ir/idempotency-key": key}})
	noteMu.Lock()
	ran := len(notes)
	noteMu.Unlock()
	if err != nil || again.IsError || ran != 1 {
		t.Fatalf("a replayed key: err %v, result %+v, the tool ran %d times", err, again, ran)
	}
	// The same key with other params is refused, and runs nothing.
	other, err := hostMCP.CallTool(context.Background(), &mcp.CallToolParams{Name: "orders.note", Arguments: map[string]any{"note": "extra onions"}, Meta: mcp.Meta{"io.omni-ir/idempotency-key": key}})
	osc, _ := other.StructuredContent.(map[string]any)
	noteMu.Lock()
	ran = len(notes)
	noteMu.Unlock()
	if err != nil || !other.IsError || osc["code"] != "idempotency_conflict" || ran != 1 {
		t.Fatalf("a replayed key with other params: err %v, result %+v, the tool ran %d times", err, other, ran)
	}

	// A tool that asks for a confirmation: the press is filed on the
	// screen assent keeps, and the view's dialog shows the app's sentence
	// and sends the person to assent, where they confirm it.
	inView[any](t, ctx, `document.getElementById("b-pay").click(), null`)
	waitInView(t, ctx, "the confirmation dialog", `document.getElementById("confirm-dialog").open === true`)
	if s := inView[string](t, ctx, `document.getElementById("confirm-sentence").textContent`); !strings.HasPrefix(s, "Pay $1,250.00?") || !strings.Contains(s, "confirm it in assent") {
		t.Fatalf("dialog reads %q", s)
	}
	if n := len(pays.list()); n != 0 {
		t.Fatalf("the confirmed tool ran %d times from the view", n)
	}
	inView[any](t, ctx, `document.getElementById("confirm-open").click(), null`)
	waitFor(t, ctx, "the link to assent", `window.host.opened.length === 1`)
	confirmAt := js[string](t, ctx, `window.host.opened[0]`)
	if !strings.Contains(confirmAt, "/screens/") || !strings.Contains(confirmAt, "?press=") {
		t.Fatalf("opened %q", confirmAt)
	}
	// The person, signed in to assent, gets the runtime's dialog at once.
	a.signIn(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(confirmAt)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the dialog in assent", `document.getElementById("confirm-dialog").open === true`)
	if s := js[string](t, ctx, `document.getElementById("confirm-sentence").textContent`); s != "Pay $1,250.00?" {
		t.Fatalf("assent's dialog reads %q", s)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("confirm-ok"))); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return len(pays.list()) > 0 }, "the tool running")
	if got := pays.list(); len(got) != 1 || got[0]["note"] != "no onions" || got[0]["amount"] != float64(1250) {
		t.Fatalf("after the person confirmed, the tool ran with %v", got)
	}
	// And a model calling it straight through a host that ignores
	// visibility is refused.
	bare, err := a.agent().CallTool(context.Background(), &mcp.CallToolParams{Name: "billing.pay", Arguments: map[string]any{"amount": 1250, "note": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := bare.StructuredContent.(map[string]any)
	if !bare.IsError || sc["code"] != "confirmation_required" {
		t.Fatalf("a bare call of a confirmed tool: %+v", bare)
	}
}

// TestViewPressReachesTheInbox: in a host on the official bridge that
// applies exactly the default policy, the payment screen streamed in
// pieces draws; Pay files a press that the person finds in the inbox with
// the app's sentence, the screen and the agent, and confirms there, which
// runs the tool once; the agent waits for the outcome with inbox_wait.
// When the host refuses to open assent's page, the view shows the link to
// copy.
func TestViewPressReachesTheInbox(t *testing.T) {
	bridgeJS := appBridge(t)
	a := newApp(t, false)
	pays := a.payTool()
	hostMCP := a.appsAgent()
	res, err := hostMCP.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: view.URI})
	if err != nil {
		t.Fatal(err)
	}
	h := startAppsHost(t, hostMCP, res.Contents[0].Text, bridgeJS)
	ctx := h.ctx

	for n := 7; n < len(payStream); n += 23 {
		arg, _ := json.Marshal(map[string]any{"arguments": map[string]any{"screen": payStream[:n]}})
		js[any](t, ctx, `window.bridge.sendToolInputPartial(`+string(arg)+`), null`)
	}
	whole, _ := json.Marshal(map[string]any{"arguments": map[string]any{"screen": payStream}})
	js[any](t, ctx, `window.bridge.sendToolInput(`+string(whole)+`), null`)
	waitInView(t, ctx, "the payment screen", `!!document.querySelector("#b-pay") && document.querySelector("#n-amount").textContent === "$42.50"`)

	shown, err := hostMCP.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": payStream}})
	if err != nil || shown.IsError {
		t.Fatalf("show_screen: %v %+v", err, shown)
	}
	screenID, _ := shown.StructuredContent.(map[string]any)["screen"].(string)
	if screenID == "" {
		t.Fatalf("show_screen named no screen: %+v", shown.StructuredContent)
	}
	resJSON, _ := json.Marshal(shown)
	js[any](t, ctx, `window.bridge.sendToolResult(`+string(resJSON)+`), null`)

	inView[any](t, ctx, `(function(){ const f = document.getElementById("f-note"); f.value = "table 4"; f.dispatchEvent(new Event("input", {bubbles: true})); f.dispatchEvent(new Event("change", {bubbles: true})); return null; })()`)
	inView[any](t, ctx, `document.getElementById("b-pay").click(), null`)
	waitInView(t, ctx, "the confirmation dialog", `document.getElementById("confirm-dialog").open === true`)
	if s := inView[string](t, ctx, `document.getElementById("confirm-sentence").textContent`); !strings.HasPrefix(s, "Pay $42.50?") {
		t.Fatalf("the view's dialog reads %q", s)
	}
	if n := len(pays.list()); n != 0 {
		t.Fatalf("the tool ran %d times from the view", n)
	}
	// The model is told what the person did, through the host.
	waitFor(t, ctx, "the model's context", `window.host.context.some(function (c) { return (c.structuredContent || {}).outcome.indexOf("inbox_wait") >= 0; })`)
	told := js[string](t, ctx, `window.host.context[window.host.context.length - 1].content[0].text`)
	for _, want := range []string{"Note for merchant = \"table 4\"", "Pay $42.50?", "The person pressed Pay", screenID} {
		if !strings.Contains(told, want) {
			t.Fatalf("the model was told %q; it lacks %q", told, want)
		}
	}
	// The frame is as tall as the screen, and follows the host's theme.
	if h := js[float64](t, ctx, `window.host.sizes.length ? window.host.sizes[window.host.sizes.length - 1].height : 0`); h < 100 || h > 700 {
		t.Fatalf("the view asked for a height of %v", h)
	}
	bg := func() string {
		return inView[string](t, ctx, `getComputedStyle(document.documentElement).getPropertyValue("--o-surface").trim()`)
	}
	light := bg()
	js[any](t, ctx, `window.bridge.setHostContext({theme: "dark", displayMode: "inline"}), null`)
	waitInView(t, ctx, "the dark theme", `document.documentElement.dataset.theme === "dark"`)
	if dark := bg(); dark == light || dark == "" {
		t.Fatalf("the surface is %q in the light theme and %q in the dark one", light, dark)
	}

	// A host that opens no links: the view shows the address to copy.
	js[any](t, ctx, `window.host.refuseLinks = true, null`)
	inView[any](t, ctx, `document.getElementById("confirm-open").click(), null`)
	waitFor(t, ctx, "the open-link request", `window.host.opened.length === 1`)
	waitInView(t, ctx, "the link to copy", `!document.getElementById("confirm-link").hidden`)
	link := inView[string](t, ctx, `document.getElementById("confirm-link-text").value`)
	if opened := js[string](t, ctx, `window.host.opened[0]`); link != opened || !strings.Contains(link, "/screens/"+screenID+"?press=") {
		t.Fatalf("the view shows %q; the host was asked to open %q", link, opened)
	}

	// The agent waits; the press is the person's to decide.
	agent := a.agent()
	wait := func(timeout int) map[string]any {
		t.Helper()
		r, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "inbox_wait", Arguments: map[string]any{"items": []any{map[string]any{"screen": screenID}}, "timeout_ms": timeout}})
		if err != nil || r.IsError {
			t.Fatalf("inbox_wait: %v %+v", err, r)
		}
		items, _ := r.StructuredContent.(map[string]any)["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("inbox_wait: %+v", r.StructuredContent)
		}
		return items[0].(map[string]any)
	}
	if o := wait(0); o["status"] != "pending" {
		t.Fatalf("before the person decided, inbox_wait says %v", o)
	}
	waited := make(chan map[string]any, 1)
	go func() {
		r, err := a.agent().CallTool(context.Background(), &mcp.CallToolParams{Name: "inbox_wait", Arguments: map[string]any{"items": []any{map[string]any{"screen": screenID}}, "timeout_ms": 20000}})
		if err != nil || r.IsError {
			waited <- nil
			return
		}
		items, _ := r.StructuredContent.(map[string]any)["items"].([]any)
		if len(items) != 1 {
			waited <- nil
			return
		}
		waited <- items[0].(map[string]any)
	}()

	// The person finds it in the inbox, with the app's sentence, the
	// screen and the agent, and confirms it there.
	a.signIn(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the press in the inbox", `!!document.getElementById("section-screen-presses")`)
	card := js[string](t, ctx, `document.getElementById("section-screen-presses").textContent`)
	for _, want := range []string{"Pay $42.50?", "table 4", "Confirm payment", a.Boot.Agent.Name} {
		if !strings.Contains(card, want) {
			t.Fatalf("the inbox card does not say %q:\n%s", want, card)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#section-screen-presses form[action$="/confirm"] button`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the inbox again", `!!document.getElementById("notice") && !document.getElementById("section-screen-presses")`)
	if got := pays.list(); len(got) != 1 || got[0]["note"] != "table 4" || got[0]["amount"] != 42.5 {
		t.Fatalf("after the person confirmed, the tool ran with %v", got)
	}
	select {
	case o := <-waited:
		if o == nil || o["status"] != "approved" {
			t.Fatalf("inbox_wait reported %v", o)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("inbox_wait did not return after the person confirmed")
	}
	if o := wait(0); o["status"] != "approved" || o["decided_by"] != a.Boot.Owner.ID {
		t.Fatalf("after the person confirmed, inbox_wait says %v", o)
	}
	if n := len(pays.list()); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/field"
	"github.com/assent-run/assent/server/screens"
)

// calls records a screen tool's handler calls.
type calls struct {
	mu     sync.Mutex
	params []map[string]any
}

func (c *calls) handle(ctx context.Context, req confirm.Request) (confirm.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.params = append(c.params, req.Params)
	return confirm.Result{
		Value:  map[string]any{"receipt": "r-1"},
		Update: "actions = Stack([paid])\npaid = Notice(\"Payment sent.\", tone=\"success\", title=\"Paid\")\n",
	}, nil
}

func (c *calls) list() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.params...)
}

// payTool registers "billing.pay", whose confirmation is "Pay {amount}?".
func (a *app) payTool() *calls {
	a.T.Helper()
	c := &calls{}
	err := a.Srv.Screens().RegisterTool(screens.Tool{Currency: map[string]string{"amount": "USD"}, Tool: confirm.Tool{
		Name:    "billing.pay",
		Params:  json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0},"note":{"type":"string","minLength":1,"maxLength":200}},"required":["amount","note"],"additionalProperties":false}`),
		Confirm: confirm.Template("Pay {amount}?"),
		Handler: c.handle,
	}})
	if err != nil {
		a.T.Fatal(err)
	}
	return c
}

const payStream = `root = Card([title, amount, note, email, actions])
title = Heading("Confirm payment")
$amount = 42.5
amount = Text($amount, format="currency", currency="USD", tone="strong")
$note = ""
note = Input($note, label="Note for merchant", required=true)
$email = ""
email = Input($email, label="Receipt email", format="email")
actions = Stack([pay], direction="row")
pay = Button("Pay", action="pay", variant="primary")
payIt = McpMutation(pay, tool="billing.pay", params={amount: $amount, note: $note})
`

// show shows stream as a screen of the first agent and opens it.
func (a *app) show(ctx context.Context, stream string) string {
	a.T.Helper()
	id, err := a.Srv.Screens().Show(context.Background(), a.Boot.Agent, stream, screens.Options{})
	if err != nil {
		a.T.Fatal(err)
	}
	a.openScreen(ctx, id)
	return id
}

// openScreen opens the page of screen id and waits for its first redraw,
// which comes once its event stream opens; acting before it, a click can
// land on a node the redraw replaced.
func (a *app) openScreen(ctx context.Context, id string) {
	a.T.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/screens/"+id), chromedp.WaitVisible(chromedp.CSS(".o-screen"))); err != nil {
		a.T.Fatalf("open screen: %v", err)
	}
	waitFor(a.T, ctx, "the screen's event stream", `document.getElementById("screen-region").dataset.live === "ready"`)
}

// waitFor waits up to 10 seconds for a JavaScript condition to hold in the
// page. A page that navigates in between (a form's redirect) is asked
// again.
func waitFor(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	done := false
	defer func() {
		if !done {
			screenshot(t, ctx, "timeout")
		}
	}()
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil || !ok {
			c.Errorf("%s: %v, %v", expr, ok, err)
		}
	}, what)
	done = true
}

// js evaluates expr, awaiting it when it is a promise.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func TestScreenStreamsInLineByLine(t *testing.T) {
	a := newApp(t, false)
	ctx := browser(t)
	a.signIn(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		r, _ := http.NewRequest("POST", a.HTTP.URL+"/v1/screens", pr)
		r.Header.Set("Authorization", "Bearer "+a.Boot.AgentToken)
		resp, err := http.DefaultClient.Do(r)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	defer pw.Close()
	lines := []string{
		`root = Card([title, body, list])`,
		`title = Heading("Your order")`,
		`body = Text("Packed and on its way.")`,
		`list = List([i1, i2])`,
		`i1 = ListItem("Coffee beans", trailing="$18.00")`,
		`i2 = ListItem("Filter papers", trailing="$4.50")`,
	}
	io.WriteString(pw, lines[0]+"\n")
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/screens")); err != nil {
		t.Fatal(err)
	}
	// The list is drawn again once the page's event stream is open, which
	// shows a screen that began between drawing the page and opening it.
	waitFor(t, ctx, "the page's event stream", `document.body.dataset.live === "1"`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".o-screen-list a"))); err != nil {
		t.Fatalf("the screen is not listed while it streams: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".o-screen-list a")), chromedp.WaitVisible(chromedp.CSS(".o-screen"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "three placeholders", `document.querySelectorAll(".o-pending").length === 3`)
	screenshot(t, ctx, "first-line")
	for i, line := range lines[1:] {
		io.WriteString(pw, line+"\n")
		switch i {
		case 0:
			waitFor(t, ctx, "the heading", `document.getElementById("n-title")?.textContent === "Your order"`)
			if n := eval[int](t, ctx, `document.querySelectorAll(".o-pending").length`); n != 2 {
				t.Fatalf("%d placeholders after the heading arrived, want 2", n)
			}
		case 2:
			waitFor(t, ctx, "the list's placeholders", `document.querySelectorAll("#n-list .o-pending").length === 2`)
			screenshot(t, ctx, "midway")
		}
	}
	waitFor(t, ctx, "the last item", `document.getElementById("n-i2")?.textContent.includes("Filter papers")`)
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the complete screen", `document.querySelector(".o-meta").textContent.includes("shown in full") && !document.querySelector(".o-pending")`)
	screenshot(t, ctx, "complete")
}

func TestInvalidEmailShowsMessageOnBlur(t *testing.T) {
	a := newApp(t, false)
	a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	a.show(ctx, payStream)
	// The page may redraw a region while keys are being sent, which
	// invalidates the node being typed into: start again on a fresh node.
	var err error
	for try := 0; try < 3; try++ {
		js[bool](t, ctx, `(() => { document.getElementById("f-email").value = ""; return true })()`)
		if err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("f-email"), "not-an-email")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	// While typing, no message.
	time.Sleep(400 * time.Millisecond)
	if hidden := eval[bool](t, ctx, `document.getElementById("m-email").hidden`); !hidden {
		t.Fatal("a message showed while the person was still typing")
	}
	// Leaving the field is what shows the message. The page may redraw the
	// note field at any moment, so move the focus in one step, by id.
	js[bool](t, ctx, `(() => { document.getElementById("f-note").focus(); return true })()`)
	want := field.Messages(nil).Text(&field.Problem{Key: field.KeyInvalidEmail})
	waitFor(t, ctx, "the email message", fmt.Sprintf(`document.getElementById("m-email").textContent === %q && !document.getElementById("m-email").hidden`, want))
	if v := eval[string](t, ctx, `document.getElementById("f-email").getAttribute("aria-invalid") + " " + document.getElementById("f-email").getAttribute("aria-describedby")`); v != "true m-email" {
		t.Fatalf("aria: %q", v)
	}
	waitFor(t, ctx, "the announcement", fmt.Sprintf(`document.getElementById("screen-status").textContent === %q`, want))
	screenshot(t, ctx, "invalid-email")
	// Fixing it removes the message once the person leaves the field.
	// The page may redraw at any moment, so fix the value in one step.
	js[bool](t, ctx, `(() => {
		const el = document.getElementById("f-email");
		el.focus();
		el.value = "ada@example.com";
		el.dispatchEvent(new Event("input", {bubbles: true}));
		document.getElementById("f-note").focus();
		return true;
	})()`)
	waitFor(t, ctx, "the message to go", `document.getElementById("m-email").hidden && !document.getElementById("f-email").hasAttribute("aria-invalid")`)
}

func TestPayWithMissingFieldFocusesItAndSendsNothing(t *testing.T) {
	a := newApp(t, false)
	handler := a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	a.show(ctx, payStream)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("b-pay"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "focus on the note", `document.activeElement && document.activeElement.id === "f-note"`)
	want := field.Messages(nil).Text(&field.Problem{Key: field.KeyRequired})
	if got := js[string](t, ctx, `document.getElementById("m-note").textContent`); got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if open := eval[bool](t, ctx, `document.getElementById("confirm-dialog").open`); open {
		t.Fatal("the confirmation opened although a field failed")
	}
	screenshot(t, ctx, "blocked")
	if n := len(handler.list()); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
}

func TestConfirmationCancelAndConfirm(t *testing.T) {
	a := newApp(t, false)
	handler := a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	a.show(ctx, payStream)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("f-note"), "table 4"), chromedp.Click(chromedp.ID("b-pay"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the confirmation", `document.getElementById("confirm-dialog").open`)
	if got := js[string](t, ctx, `document.getElementById("confirm-sentence").textContent`); got != "Pay $42.50?" {
		t.Fatalf("sentence %q", got)
	}
	screenshot(t, ctx, "confirm")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("confirm-cancel"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the dialog to close", `!document.getElementById("confirm-dialog").open`)
	// Focus goes back to the button the person pressed.
	waitFor(t, ctx, "focus back on Pay", `document.activeElement && document.activeElement.id === "b-pay"`)
	time.Sleep(300 * time.Millisecond)
	if n := len(handler.list()); n != 0 {
		t.Fatalf("Cancel ran the handler %d times", n)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("b-pay"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the confirmation again", `document.getElementById("confirm-dialog").open`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("confirm-ok"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the handler's update", `document.getElementById("n-paid")?.textContent.includes("Payment sent.")`)
	screenshot(t, ctx, "paid")
	got := handler.list()
	if len(got) != 1 || fmt.Sprint(got[0]) != "map[amount:42.5 note:table 4]" {
		t.Fatalf("handler calls %v, want one with the schema-checked params", got)
	}
	if present := eval[bool](t, ctx, `!!document.getElementById("b-pay")`); present {
		t.Fatal("the Pay button is still there after the update replaced it")
	}
}

func TestStreamCannotAddConfirmationOrSpoofTools(t *testing.T) {
	a := newApp(t, false)
	handler := a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	stream := `root = Card([warn, fake, homoglyph, zwsp, own])
warn = Notice("Are you sure? Press Confirm to pay.", title="Confirm payment", tone="warning")
fake = Button("Confirm", action="pay")
fakeIt = McpMutation(fake, tool="billing.pay", params={amount: 1, note: "x"}, confirm=false)
homoglyph = Button("Pay (homoglyph)", action="pay2")
homoglyphIt = McpMutation(homoglyph, tool="b` + "\u0456" + `lling.pay", params={amount: 1, note: "x"})
zwsp = Button("Pay (zero-width)", action="pay3")
zwspIt = McpMutation(zwsp, tool="billing.` + "\u200b" + `pay", params={amount: 1, note: "x"})
own = Button("Pay (own dialog)", action="pay4")
ownIt = McpMutation(own, tool="billing.pay", params={amount: 1, note: "x"}, confirmation="Pay nothing?")
`
	a.show(ctx, stream)
	for _, id := range []string{"b-fake", "b-homoglyph", "b-zwsp", "b-own"} {
		if disabled := eval[bool](t, ctx, `document.getElementById("`+id+`").disabled`); !disabled {
			t.Errorf("%s is enabled", id)
		}
		// A forced click on a disabled button does nothing either.
		eval[bool](t, ctx, `(document.getElementById("`+id+`").click(), true)`)
	}
	screenshot(t, ctx, "spoofed")
	time.Sleep(300 * time.Millisecond)
	if open := eval[bool](t, ctx, `document.getElementById("confirm-dialog").open`); open {
		t.Fatal("a confirmation opened")
	}
	if n := len(handler.list()); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	// Even a hand-made press request for those buttons runs nothing.
	res := js[string](t, ctx, `(async () => {
		const csrf = document.querySelector('meta[name="csrf-token"]').content;
		const out = [];
		for (const b of ["fake", "homoglyph", "zwsp", "own"]) {
			const r = await fetch(location.pathname + "/press", {method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf}, body: JSON.stringify({button: b})});
			out.push((await r.json()).status);
		}
		return out.join(",");
	})()`)
	if res != "refused,refused,refused,refused" {
		t.Fatalf("forged presses answered %s", res)
	}
	if n := len(handler.list()); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
}

func TestAgentStagedValueAppliedByPerson(t *testing.T) {
	a := newApp(t, false)
	a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	agent := a.agent()
	out, isErr := assenttest.CallTool(t, agent, "show_screen", map[string]any{"screen": payStream})
	if isErr {
		t.Fatalf("show_screen: %v", out)
	}
	id := out["screen"].(string)
	a.openScreen(ctx, id)
	note := map[string]any{"formId": id, "controlId": "note"}
	snap, _ := assenttest.CallTool(t, agent, "controls_inspect", map[string]any{"identity": note})
	if st := snap["state"].(map[string]any); st["valid"] != false {
		t.Fatalf("an empty required note is valid: %v", snap)
	}
	if out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "stage", "identity": note, "value": "leave at the door"}); isErr {
		t.Fatalf("stage: %v", out)
	}
	if out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "apply", "identity": note}); !isErr || out["reason"] != "human_confirmation_required" {
		t.Fatalf("the agent's own apply: %v", out)
	}
	waitFor(t, ctx, "the proposal", `document.querySelector("#s-note .o-staged-value")?.textContent === "leave at the door"`)
	if v := eval[string](t, ctx, `document.getElementById("f-note").value`); v != "" {
		t.Fatalf("the field changed before the person applied: %q", v)
	}
	screenshot(t, ctx, "proposal")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("apply-note"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the applied value", `document.getElementById("f-note")?.value === "leave at the door" && !document.getElementById("s-note")`)
	screenshot(t, ctx, "applied")
	snap, _ = assenttest.CallTool(t, agent, "controls_inspect", map[string]any{"identity": note})
	if st := snap["state"].(map[string]any); st["value"] != "leave at the door" || st["valid"] != true {
		t.Fatalf("after apply: %v", snap)
	}
	if !strings.Contains(js[string](t, ctx, `document.getElementById("n-amount").textContent`), "$42.50") {
		t.Fatal("the amount is not shown as money")
	}
}

func TestDemoScreensInBrowser(t *testing.T) {
	a := newApp(t, true)
	ctx := browser(t)
	a.signIn(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/screens"), chromedp.WaitVisible(chromedp.CSS(".o-screen-list"))); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "list")
	n := eval[int](t, ctx, `document.querySelectorAll(".o-screen-list a").length`)
	for i := range n {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/screens"), chromedp.WaitVisible(chromedp.CSS(".o-screen-list"))); err != nil {
			t.Fatal(err)
		}
		title := eval[string](t, ctx, fmt.Sprintf(`document.querySelectorAll(".o-screen-list a")[%d].textContent`, i))
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(".o-screen-list li:nth-child(%d) a", i+1))), chromedp.WaitVisible(chromedp.CSS(".o-screen"))); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, strings.ReplaceAll(strings.ToLower(title), " ", "-"))
	}
}

// TestTypingKeepsFocusWhileLinesArrive: the person types while the stream
// grows; the field keeps its focus, cursor and text, and a component that
// shows the same state follows what was typed.
func TestTypingKeepsFocusWhileLinesArrive(t *testing.T) {
	a := newApp(t, false)
	ctx := browser(t)
	a.signIn(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		r, _ := http.NewRequest("POST", a.HTTP.URL+"/v1/screens", pr)
		r.Header.Set("Authorization", "Bearer "+a.Boot.AgentToken)
		resp, err := http.DefaultClient.Do(r)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	defer pw.Close()
	io.WriteString(pw, "root = Card([name, greet, later])\n$name = \"\"\nname = Input($name, label=\"Your name\")\n")
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/screens"), chromedp.WaitVisible(chromedp.CSS(".o-screen-list a")), chromedp.Click(chromedp.CSS(".o-screen-list a")), chromedp.WaitVisible(chromedp.ID("f-name"))); err != nil {
		t.Fatal(err)
	}
	// The field is focused and typed into as it is when the keys arrive:
	// the page may redraw it between a lookup and the keys.
	js[bool](t, ctx, `(document.getElementById("f-name").focus(), true)`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent("Ada")); err != nil {
		t.Fatal(err)
	}
	io.WriteString(pw, "greet = Text($name, tone=\"strong\")\n")
	waitFor(t, ctx, "the greeting to show what was typed", `document.getElementById("n-greet")?.textContent === "Ada"`)
	io.WriteString(pw, "later = Notice(\"Arrived while you typed.\")\n")
	waitFor(t, ctx, "the last line", `!!document.getElementById("n-later")`)
	state := js[string](t, ctx, `document.activeElement.id + "|" + document.activeElement.value + "|" + document.activeElement.selectionStart`)
	if state != "f-name|Ada|3" {
		t.Fatalf("focused field, value and cursor = %q, want f-name|Ada|3", state)
	}
	// The person goes on typing into the field that has the focus; the
	// page may have redrawn it meanwhile, so it is not looked up again.
	if err := chromedp.Do(ctx, chromedp.KeyEvent(" L.")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the greeting to follow", `document.getElementById("n-greet")?.textContent === "Ada L."`)
	screenshot(t, ctx, "typed")
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTabsFromTheKeyboard(t *testing.T) {
	a := newApp(t, false)
	ctx := browser(t)
	a.signIn(ctx)
	a.show(ctx, `root = Tabs([one, two])
one = Tab("Summary", [a])
a = Text("First panel")
two = Tab("Orders", [table])
table = Table(["Order", "Total"], [r1])
r1 = TableRow(["#1", 12.5])
`)
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.ID("t-one")), chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the second tab", `document.getElementById("t-two").getAttribute("aria-selected") === "true" && document.activeElement.id === "t-two" && !document.getElementById("p-two").hidden && document.getElementById("p-one").hidden`)
	if th := js[string](t, ctx, `Array.from(document.querySelectorAll("#n-table th[scope=col]")).map(e => e.textContent).join("|")`); th != "Order|Total" {
		t.Fatalf("column headings %q", th)
	}
	if num := js[string](t, ctx, `document.querySelector("#n-r1 td.o-num").textContent`); num != "12.5" {
		t.Fatalf("number cell %q", num)
	}
	screenshot(t, ctx, "second-tab")
}

func TestAgentPointsAtAField(t *testing.T) {
	a := newApp(t, false)
	a.payTool()
	ctx := browser(t)
	a.signIn(ctx)
	agent := a.agent()
	out, _ := assenttest.CallTool(t, agent, "show_screen", map[string]any{"screen": payStream})
	id := out["screen"].(string)
	a.openScreen(ctx, id)
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.ID("f-note"))); err != nil {
		t.Fatal(err)
	}
	if out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "highlight", "identity": map[string]any{"formId": id, "controlId": "email"}, "durationMs": 5000}); isErr {
		t.Fatalf("highlight: %v", out)
	}
	waitFor(t, ctx, "the highlight", `document.getElementById("n-email").classList.contains("o-highlight")`)
	if focused := js[string](t, ctx, `document.activeElement.id`); focused != "f-note" {
		t.Fatalf("pointing moved the person's focus to %q", focused)
	}
	screenshot(t, ctx, "highlight")
}

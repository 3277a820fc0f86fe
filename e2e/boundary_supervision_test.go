package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// Supervision, written as the attacks: two people, P and Q, each
// supervise one agent (A acts for P, B for Q). Each agent starts a Run,
// shows a screen, stages a value on it and starts a Flow instance. P sees
// all of A's items, named, in the browser and over /v1, and none of B's
// private ones; A reaches none of B's items over MCP; Q's event stream
// carries nothing of A's.

// supervisedAgent is one agent of the test and what it made.
type supervisedAgent struct {
	name, token   string
	cs            *mcp.ClientSession
	run, screen   string
	value, flowID string
}

// supervisedScreen is a screen with one text field, "note".
const supervisedScreen = "root = Card([title, note])\ntitle = Heading(\"Travel plan\")\n$note = \"\"\nnote = Input($note, label=\"Note\")\n"

// newSupervisedAgent issues an agent supervised by the person with id
// supervisor and connects it over MCP.
func (a *app) newSupervisedAgent(name, supervisor string) *supervisedAgent {
	a.T.Helper()
	tok, _, err := auth.IssueTokenFor(context.Background(), a.DB, store.KindAgent, name,
		[]string{"state.write", "tool.invoke", "command.execute"}, []string{supervisor}, time.Now())
	if err != nil {
		a.T.Fatal(err)
	}
	return &supervisedAgent{name: name, token: tok, cs: a.execAgent(tok)}
}

// act makes the agent's Run, screen, proposal and Flow instance.
func (a *app) act(ag *supervisedAgent, suffix string) {
	t := a.T
	t.Helper()
	ag.run, ag.value, ag.flowID = "run-"+suffix, "plan-from-"+suffix, "trip-"+suffix
	out, isErr := assenttest.CallTool(t, ag.cs, "actors_run_spawn", map[string]any{"template": "sleep 60", "as": "run:" + ag.run})
	if isErr {
		t.Fatalf("%s spawn: %v", ag.name, out)
	}
	t.Cleanup(func() { a.API("POST", "/v1/runs/"+ag.run+"/kill", ag.token, nil) })
	out, isErr = assenttest.CallTool(t, ag.cs, "show_screen", map[string]any{"screen": supervisedScreen})
	if isErr {
		t.Fatalf("%s show_screen: %v", ag.name, out)
	}
	ag.screen, _ = out["screen"].(string)
	out, isErr = assenttest.CallTool(t, ag.cs, "controls_execute", map[string]any{"action": "stage",
		"identity": map[string]any{"formId": ag.screen, "controlId": "note"}, "value": ag.value})
	if isErr || out["ok"] != true {
		t.Fatalf("%s stage: %v", ag.name, out)
	}
	if code, _, raw := a.API("POST", "/v1/flows/instances", ag.token,
		map[string]any{"program": "expense-approval", "id": ag.flowID, "phase": "draft"}); code != http.StatusCreated {
		t.Fatalf("%s flow start: %d %s", ag.name, code, raw)
	}
}

// items lists the ids and the value that name ag's items.
func (ag *supervisedAgent) items() []string {
	return []string{ag.run, ag.screen, ag.value, ag.flowID}
}

func TestBoundarySupervisorSeesOnlyTheirAgents(t *testing.T) {
	a := newApp(t, true)
	pTok, p := a.person("pat")
	qTok, q := a.person("quinn")

	// Q listens to the event stream before anything happens.
	qEvents := a.subscribe(qTok)
	pEvents := a.subscribe(pTok)

	agentA := a.newSupervisedAgent("agent-a", p.ID)
	agentB := a.newSupervisedAgent("agent-b", q.ID)
	a.act(agentA, "a")
	a.act(agentB, "b")
	a.Srv.Events().Publish(event.Event{Type: "test.marker"})

	// P's browser: every page names A's items and shows none of B's.
	ctx := browser(t)
	a.signInAs(ctx, p)
	for _, pg := range []struct{ path, want string }{
		{"/runs", agentA.run},
		{"/screens", agentA.screen},
		{"/inbox", agentA.value},
		{"/flows", agentA.flowID},
		{"/audit", agentA.value},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+pg.path), chromedp.WaitVisible(chromedp.ID("main"))); err != nil {
			t.Fatalf("%s: %v", pg.path, err)
		}
		body := text(t, ctx, chromedp.ID("main"))
		html := eval[string](t, ctx, "document.querySelector('main').innerHTML")
		if !strings.Contains(html, pg.want) || !strings.Contains(body, agentA.name) {
			screenshot(t, ctx, "missing")
			t.Errorf("%s lacks %q or the agent's name %q:\n%s", pg.path, pg.want, agentA.name, body)
		}
		for _, not := range append(agentB.items(), agentB.name) {
			if strings.Contains(html, not) {
				screenshot(t, ctx, "leak")
				t.Errorf("%s shows B's %q", pg.path, not)
			}
		}
	}
	// The audit page shows A's stage as a row with its time.
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`#audit-table tr[data-command="stage"]`))); err != nil {
		screenshot(t, ctx, "audit")
		t.Fatalf("audit row: %v", err)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#audit-table time[datetime]').length`); n == 0 {
		t.Error("audit rows have no <time datetime>")
	}
	screenshot(t, ctx, "audit")
	// B's items by address: each is the page for a missing one.
	for _, path := range []string{"/runs/" + agentB.run, "/screens/" + agentB.screen, "/flows/instances/" + agentB.flowID} {
		if code := a.pageStatus(ctx, path); code != http.StatusNotFound {
			t.Errorf("P opens %s: %d", path, code)
		}
	}
	// A's, in contrast, open.
	for _, path := range []string{"/runs/" + agentA.run, "/screens/" + agentA.screen, "/flows/instances/" + agentA.flowID} {
		if code := a.pageStatus(ctx, path); code != http.StatusOK {
			t.Errorf("P opens %s: %d", path, code)
		}
	}

	// P over /v1.
	for _, path := range []string{"/v1/runs", "/v1/screens", "/v1/flows/instances", "/v1/audit"} {
		_, _, raw := a.API("GET", path, pTok, nil)
		if path != "/v1/audit" && !containsAny(raw, agentA.items()) {
			t.Errorf("P's %s lacks A's items: %s", path, raw)
		}
		if containsAny(raw, agentB.items()) {
			t.Errorf("P's %s shows B's items: %s", path, raw)
		}
	}
	_, _, raw := a.API("GET", "/v1/audit", pTok, nil)
	if !strings.Contains(raw, agentA.screen) {
		t.Errorf("P's audit lacks A's stage: %s", raw)
	}

	// A over MCP reaches none of B's items.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"actors_inspect", map[string]any{"target": "run:" + agentB.run, "view": "status"}},
		{"controls_inspect", map[string]any{"identity": map[string]any{"formId": agentB.screen, "controlId": "note"}}},
		{"flows_inspect", map[string]any{"instance": agentB.flowID}},
		{"controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": agentB.screen, "controlId": "note"}, "value": "hijack"}},
	} {
		res, err := agentA.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		out := resultText(res)
		if !strings.Contains(out, "not_found") || strings.Contains(out, agentB.value) {
			t.Errorf("A's %s on B's item: %s", c.tool, out)
		}
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"controls_list", map[string]any{}},
		{"flows_list", map[string]any{}},
		{"actors_inspect", map[string]any{"target": "runtime", "view": "runs"}},
	} {
		res, err := agentA.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if out := resultText(res); containsAny(out, agentB.items()) {
			t.Errorf("A's %s shows B's items: %s", c.tool, out)
		}
	}

	// Events: Q received nothing of A's; P did.
	q2a := readUntilMarker(t, qEvents)
	p2a := readUntilMarker(t, pEvents)
	if containsAny(q2a, agentA.items()) {
		t.Errorf("Q's event stream carried A's events: %s", q2a)
	}
	if !containsAny(p2a, []string{agentA.run, agentA.screen, agentA.flowID}) {
		t.Errorf("P's event stream lacks A's events: %s", p2a)
	}
	if !containsAny(q2a, []string{agentB.run, agentB.screen, agentB.flowID}) {
		t.Errorf("Q's event stream lacks B's events: %s", q2a)
	}
}

// subscribe opens the event stream with token.
func (a *app) subscribe(token string) *bufio.Reader {
	a.T.Helper()
	r, _ := http.NewRequest("GET", a.HTTP.URL+"/v1/events", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.HTTP.Client().Do(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		a.T.Fatalf("events: %v", err)
	}
	a.T.Cleanup(func() { resp.Body.Close() })
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, ":") {
		a.T.Fatalf("events: first line %q, %v", line, err)
	}
	return rd
}

// markerWait bounds the wait for the test.marker event.
const markerWait = 30 * time.Second

// readUntilMarker returns the raw stream up to the test.marker event, and
// fails t when the marker has not come within markerWait: a stream that
// stays open without it must not hold the test until the package's
// timeout. The reading goroutine ends when the stream is closed at the
// test's cleanup.
func readUntilMarker(t *testing.T, rd *bufio.Reader) string {
	t.Helper()
	type read struct {
		text string
		err  error
	}
	got := make(chan read, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				got <- read{b.String(), err}
				return
			}
			if strings.HasPrefix(line, "event: test.marker") {
				got <- read{b.String(), nil}
				return
			}
			b.WriteString(line)
		}
	}()
	timer := time.NewTimer(markerWait)
	defer timer.Stop()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("reading events: %v (so far %s)", r.err, r.text)
		}
		return r.text
	case <-timer.C:
		t.Fatalf("no test.marker event within %v", markerWait)
	}
	return ""
}

// pageStatus opens path in the browser and returns the HTTP status of the
// document.
func (a *app) pageStatus(ctx context.Context, path string) int {
	a.T.Helper()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(a.HTTP.URL+path))
	if err != nil {
		a.T.Fatalf("%s: %v", path, err)
	}
	return int(resp.Status)
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// resultText is a tool result's text and structured content, as a model
// or a client would read them.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	sc, _ := json.Marshal(res.StructuredContent)
	b.Write(sc)
	return b.String()
}

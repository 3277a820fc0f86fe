package screens_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/examples"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/tool"
)

// recorder is a screen tool's handler that remembers its calls.
type recorder struct {
	mu    sync.Mutex
	calls []map[string]any
	err   error
	res   confirm.Result
}

func (rc *recorder) handle(ctx context.Context, req confirm.Request) (confirm.Result, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.calls = append(rc.calls, req.Params)
	return rc.res, rc.err
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.calls)
}

const testPayParams = `{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0},"note":{"type":"string","maxLength":20},"orderId":{"type":"string"}},"required":["amount"],"additionalProperties":false}`

// screenFixture is a server with a payment tool (no confirmation), a
// confirmed payment tool and a public tool.
func screenFixture(t *testing.T) (*assenttest.Kit, map[string]*recorder) {
	t.Helper()
	f := assenttest.Start(t, nil)
	recs := map[string]*recorder{"pay.now": {}, "pay.confirmed": {}, "info.public": {}, "orders.cancel": {}}
	recs["pay.now"].res = confirm.Result{Value: map[string]any{"receipt": "r1"}, Update: `$status = "paid"`}
	recs["orders.cancel"].err = tool.Errorf("not_found", "no such order")
	for name, rec := range recs {
		st := screens.Tool{Tool: confirm.Tool{Name: name, Params: json.RawMessage(testPayParams), Handler: rec.handle}}
		switch name {
		case "pay.confirmed":
			st.Confirm = confirm.Template("Pay {amount}?")
		case "info.public":
			st.Access = screens.AccessPublic
		}
		if err := f.Srv.Screens().RegisterTool(st); err != nil {
			t.Fatal(err)
		}
	}
	return f, recs
}

func mutateReq(f *assenttest.Kit, token, body string, hdr map[string]string) *http.Response {
	f.T.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		h[k] = v
	}
	return f.Req("POST", "/api/mutate", token, strings.NewReader(body), h)
}

func TestMutateStatusTable(t *testing.T) {
	f, recs := screenFixture(t)
	cookie, csrf := f.SignIn()
	browser := func(origin string) func(*http.Request) {
		return func(r *http.Request) {
			r.AddCookie(cookie)
			r.Header.Set("X-CSRF-Token", csrf)
			if origin != "" {
				r.Header.Set("Origin", origin)
			}
		}
	}
	tests := []struct {
		name   string
		token  string
		body   string
		hdr    map[string]string
		modify func(*http.Request)
		status int
		code   string
	}{
		{name: "ok", token: f.Token, body: `{"tool":"pay.now","params":{"amount":5}}`, status: 200},
		{name: "ok from the web UI", body: `{"tool":"pay.now","params":{"amount":5}}`, modify: browser(f.HTTP.URL), status: 200},
		{name: "public without credentials", body: `{"tool":"info.public","params":{"amount":1}}`, status: 200},
		{name: "not JSON", token: f.Token, body: `nope`, status: 400, code: "invalid_request"},
		{name: "no tool", token: f.Token, body: `{"params":{}}`, status: 400, code: "invalid_request"},
		{name: "params not an object", token: f.Token, body: `{"tool":"pay.now","params":[1]}`, status: 400, code: "invalid_request"},
		{name: "no params", token: f.Token, body: `{"tool":"pay.now"}`, status: 400, code: "invalid_request"},
		{name: "body sets confirmed", token: f.Token, body: `{"tool":"pay.now","params":{"amount":5},"confirmed":true}`, status: 400, code: "invalid_request"},
		{name: "malformed key", token: f.Token, body: `{"tool":"pay.now","params":{"amount":5}}`, hdr: map[string]string{"Idempotency-Key": "has space"}, status: 400, code: "invalid_request"},
		{name: "nobody signed in", body: `{"tool":"pay.now","params":{"amount":5}}`, status: 401, code: "sign_in_required"},
		{name: "bad token", token: "asnt_nope", body: `{"tool":"pay.now","params":{"amount":5}}`, status: 401, code: "sign_in_required"},
		{name: "unknown tool", token: f.Token, body: `{"tool":"pay.later","params":{}}`, status: 403, code: "unknown_tool"},
		{name: "cross-site browser request", body: `{"tool":"pay.now","params":{"amount":5}}`, modify: browser("https://evil.example"), status: 403, code: "bad_origin"},
		{name: "browser request without Origin", body: `{"tool":"pay.now","params":{"amount":5}}`, modify: browser(""), status: 403, code: "bad_origin"},
		{name: "not the caller's", token: f.Token, body: `{"tool":"orders.cancel","params":{"amount":5,"orderId":"o-1"}}`, status: 404, code: "not_found"},
		{name: "needs a person's confirmation", token: f.Token, body: `{"tool":"pay.confirmed","params":{"amount":5}}`, status: 409, code: "confirmation_required"},
		{name: "invalid params", token: f.Token, body: `{"tool":"pay.now","params":{"amount":-1}}`, status: 422, code: "invalid_params"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", f.HTTP.URL+"/api/mutate", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			if tc.modify != nil {
				tc.modify(r)
			}
			resp, err := f.HTTP.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.code != "" {
				if got := assenttest.ErrorCode(t, resp); got != tc.code {
					t.Fatalf("code %q, want %q", got, tc.code)
				}
				return
			}
			var ok struct {
				OK     bool           `json:"ok"`
				Tool   string         `json:"tool"`
				Result map[string]any `json:"result"`
			}
			json.NewDecoder(resp.Body).Decode(&ok)
			if !ok.OK || ok.Tool == "" || ok.Result == nil {
				t.Fatalf("ok body %+v", ok)
			}
		})
	}
	if n := recs["pay.confirmed"].count(); n != 0 {
		t.Fatalf("a tool that needs confirmation ran %d times through /api/mutate", n)
	}
}

func TestMutateRateLimitedAndToolFailed(t *testing.T) {
	f := assenttest.Start(t, func(c *server.Config) { c.RateLimit, c.RateBurst = 1, 1 })
	rec := &recorder{err: errors.New("database down")}
	if err := f.Srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{Name: "pay.now", Handler: rec.handle}}); err != nil {
		t.Fatal(err)
	}
	resp := mutateReq(f, f.Token, `{"tool":"pay.now","params":{}}`, nil)
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 500 || body.Error.Code != "tool_failed" || !body.Error.Retryable {
		t.Fatalf("failing handler: %d %+v", resp.StatusCode, body)
	}
	resp = mutateReq(f, f.Token, `{"tool":"pay.now","params":{}}`, nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || assenttest.ErrorCode(t, resp) != "rate_limited" {
		t.Fatalf("second request: %d", resp.StatusCode)
	}
}

func TestMutateIdempotency(t *testing.T) {
	f, recs := screenFixture(t)
	key := map[string]string{"Idempotency-Key": "press-1:a.b_c-d"}
	first := mutateReq(f, f.Token, `{"tool":"pay.now","params":{"amount":5,"note":"x"}}`, key)
	a, _ := io.ReadAll(first.Body)
	// The same press retried, with its keys in another order.
	second := mutateReq(f, f.Token, `{"params":{"note":"x","amount":5},"tool":"pay.now"}`, key)
	b, _ := io.ReadAll(second.Body)
	if first.StatusCode != 200 || second.StatusCode != 200 || string(a) != string(b) {
		t.Fatalf("retry answered %d %s, first %d %s", second.StatusCode, b, first.StatusCode, a)
	}
	if n := recs["pay.now"].count(); n != 1 {
		t.Fatalf("handler ran %d times for one key", n)
	}
	if resp := mutateReq(f, f.Token, `{"tool":"pay.now","params":{"amount":6}}`, key); resp.StatusCode != 409 || assenttest.ErrorCode(t, resp) != "idempotency_conflict" {
		t.Fatalf("other params, same key: %d", resp.StatusCode)
	}
	// Keys are per principal: another principal's same key is a new press.
	tok, _, err := auth.IssueToken(context.Background(), f.DB, store.KindService, "other", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if resp := mutateReq(f, tok, `{"tool":"pay.now","params":{"amount":6}}`, key); resp.StatusCode != 200 {
		t.Fatalf("another principal's key: %d", resp.StatusCode)
	}
	if n := recs["pay.now"].count(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// TestMutateForgedRequests: the research list of forged requests.
func TestMutateForgedRequests(t *testing.T) {
	f, recs := screenFixture(t)
	forged := []struct {
		name, body string
		status     int
	}{
		{"params of another tool", `{"tool":"pay.now","params":{"email":"a@b.co"}}`, 422},
		{"extra privileged key", `{"tool":"pay.now","params":{"amount":5,"admin":true}}`, 422},
		{"number sent as text", `{"tool":"pay.now","params":{"amount":"5"}}`, 422},
		{"negative amount", `{"tool":"pay.now","params":{"amount":-5}}`, 422},
		{"oversize note", `{"tool":"pay.now","params":{"amount":5,"note":"` + strings.Repeat("x", 21) + `"}}`, 422},
		{"__proto__ key", `{"tool":"pay.now","params":{"amount":5,"__proto__":{"admin":true}}}`, 422},
		{"spoofed tool (Cyrillic a)", `{"tool":"p\u0430y.now","params":{"amount":5}}`, 403},
		{"spoofed tool (zero-width space)", `{"tool":"pay.\u200bnow","params":{"amount":5}}`, 403},
		{"spoofed tool (trailing space)", `{"tool":"pay.now ","params":{"amount":5}}`, 403},
		{"spoofed tool (upper case)", `{"tool":"Pay.now","params":{"amount":5}}`, 403},
		{"no tool", `{"params":{"amount":5}}`, 400},
		{"source in the body", `{"tool":"pay.now","params":{"amount":5},"source":"user"}`, 400},
	}
	for _, tc := range forged {
		resp := mutateReq(f, f.Token, tc.body, nil)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.status == 422 {
			var body struct {
				Error struct {
					Code   string `json:"code"`
					Issues []struct{ Path, Message string }
				} `json:"error"`
			}
			json.NewDecoder(resp.Body).Decode(&body)
			if body.Error.Code != "invalid_params" || len(body.Error.Issues) == 0 {
				t.Errorf("%s: body %+v", tc.name, body)
			}
		}
	}
	if n := recs["pay.now"].count(); n != 0 {
		t.Fatalf("forged requests ran the handler %d times", n)
	}
}

func TestShowScreenOverMCP(t *testing.T) {
	f, _ := screenFixture(t)
	cs, err := f.AppsSession(f.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var show, view *mcp.Tool
	for _, tl := range list.Tools {
		switch tl.Name {
		case "show_screen":
			show = tl
		case "pay.now":
			view = tl
		}
	}
	if show == nil || !show.Annotations.ReadOnlyHint || show.Annotations.DestructiveHint == nil || *show.Annotations.DestructiveHint {
		t.Fatalf("show_screen %+v", show)
	}
	if !strings.Contains(show.Description, " pay.now;") {
		t.Errorf("show_screen's description does not list the tools: %s", show.Description)
	}
	if view == nil || fmt.Sprint(view.Meta["ui"]) != "map[visibility:[app]]" {
		t.Fatalf("screen tool over MCP: %+v", view)
	}
	for _, want := range []string{"Heading(text) props level: 1 or 2 or 3; text: text or $key; needs text.", "Example:\nroot = Card("} {
		if !strings.Contains(show.Description, want) {
			t.Errorf("show_screen's description lacks %q", want)
		}
	}
	listed := func() int {
		t.Helper()
		var body struct {
			Screens []any `json:"screens"`
		}
		resp := f.Req("GET", "/v1/screens", f.Token, nil, nil)
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		return len(body.Screens)
	}
	// A screen with errors is not shown: the agent gets every line's error.
	stream := "root = Card([title, pay])\ntitle = Heading(\"Pay\")\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.nope\")\nbad = Heading(\"x\", color=\"red\")\n"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": stream}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"Not shown:", "- line 4: unknown_tool:", "- line 5: invalid_props:", "- line 3: ungoverned_mutation"} {
		if !strings.Contains(text, want) {
			t.Errorf("result text lacks %q:\n%s", want, text)
		}
	}
	if sc, _ := res.StructuredContent.(map[string]any); !res.IsError || sc["code"] != "screen_rejected" || len(sc["issues"].([]any)) != 3 {
		t.Fatalf("a screen with errors: %+v", res)
	}
	// A button whose params its tool's schema refuses is an error too,
	// but a param a field gives is the person's to fill in.
	stream = "root = Card([pay, amt])\n$amount = 0\n$who = \"\"\namt = Input($who, label=\"Who\")\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.now\", params={amount: \"five\", who: $who})\n"
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": stream}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, "- line 6: invalid_params:") || !strings.Contains(text, "amount") {
		t.Fatalf("a button with params its tool refuses: %s", text)
	}
	if n := listed(); n != 0 {
		t.Fatalf("refused screens are listed: %d", n)
	}
	stream = "root = Card([title, pay])\ntitle = Heading(\"Pay\")\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.now\", params={amount: 5})\n"
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": stream}})
	if err != nil || res.IsError {
		t.Fatalf("a right screen: %v %+v", err, res)
	}
	text = res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"Shown: 4 components.", "\n\nThe screen as text:\nCard\n  Heading: Pay\n  Button: Pay (action: pay.now)"} {
		if !strings.Contains(text, want) {
			t.Errorf("result text lacks %q:\n%s", want, text)
		}
	}
	var sc struct {
		Components int    `json:"components"`
		Outline    string `json:"outline"`
		Screen     string `json:"screen"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &sc)
	if sc.Components != 4 || !strings.HasPrefix(sc.Outline, "Card") {
		t.Fatalf("structured %s", b)
	}
	// A screen that replaces it takes its place in the list.
	again, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": stream, "replaces": sc.Screen}})
	if err != nil || again.IsError {
		t.Fatalf("a replacing screen: %v %+v", err, again)
	}
	if n := listed(); n != 1 {
		t.Fatalf("after a replacement %d screens are listed; want 1", n)
	}
	if resp := f.Req("GET", "/v1/screens/"+sc.Screen, f.Token, nil, nil); resp.StatusCode != 404 {
		t.Fatalf("the replaced screen: %d", resp.StatusCode)
	}
	sc.Screen, _ = again.StructuredContent.(map[string]any)["screen"].(string)
	// The owner and people see it; another agent gets not_found.
	if resp := f.Req("GET", "/v1/screens/"+sc.Screen, f.Token, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("owner: %d", resp.StatusCode)
	}
	other, _, _ := auth.IssueToken(context.Background(), f.DB, store.KindAgent, "other", nil, time.Now())
	if resp := f.Req("GET", "/v1/screens/"+sc.Screen, other, nil, nil); resp.StatusCode != 404 || assenttest.ErrorCode(t, resp) != "not_found" {
		t.Fatalf("another agent: %d", resp.StatusCode)
	}
	if resp := f.Req("GET", "/v1/screens/scr_nope", other, nil, nil); resp.StatusCode != 404 {
		t.Fatalf("absent screen: %d", resp.StatusCode)
	}
	cookie, _ := f.SignIn()
	if resp := f.Get("/screens/"+sc.Screen, cookie); resp.StatusCode != 200 {
		t.Fatalf("person: %d", resp.StatusCode)
	}
	// Over the limits.
	for _, s := range []string{"", strings.Repeat("x", screens.MaxScreenChars+1)} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": s}})
		if err == nil && !res.IsError {
			t.Errorf("a screen of %d characters was shown", len(s))
		}
	}
}

func TestViewToolCallsAreChecked(t *testing.T) {
	f, recs := screenFixture(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "pay.now", map[string]any{"amount": -1})
	if !isErr || out["code"] != "invalid_params" || out["issues"] == nil {
		t.Fatalf("invalid params: %v", out)
	}
	out, isErr = assenttest.CallTool(t, cs, "pay.confirmed", map[string]any{"amount": 1})
	if !isErr || out["code"] != "confirmation_required" {
		t.Fatalf("confirmation tool: %v", out)
	}
	out, isErr = assenttest.CallTool(t, cs, "pay.now", map[string]any{"amount": 1})
	if isErr || out["receipt"] != "r1" || out["update"] != `$status = "paid"` {
		t.Fatalf("valid call: %v", out)
	}
	if recs["pay.now"].count() != 1 || recs["pay.confirmed"].count() != 0 {
		t.Fatal("wrong handlers ran")
	}
}

func TestScreenPostedSlowlyAppearsAsItArrives(t *testing.T) {
	f := assenttest.Start(t, nil)
	pr, pw := io.Pipe()
	done := make(chan *http.Response, 1)
	go func() {
		r, _ := http.NewRequest("POST", f.HTTP.URL+"/v1/screens", pr)
		r.Header.Set("Authorization", "Bearer "+f.Token)
		resp, err := f.HTTP.Client().Do(r)
		if err != nil {
			done <- nil
			return
		}
		done <- resp
	}()
	io.WriteString(pw, "root = Card([title, more])\ntitle = Heading(\"Arriving\")\n")
	// The screen is listed, not yet ended, while its stream is open.
	var listed struct {
		Screens []struct {
			ID         string `json:"id"`
			Components int    `json:"components"`
			Ended      bool   `json:"ended"`
		} `json:"screens"`
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		resp := f.Req("GET", "/v1/screens", f.Token, nil, nil)
		json.NewDecoder(resp.Body).Decode(&listed)
		if len(listed.Screens) != 1 || listed.Screens[0].Components != 2 {
			c.Errorf("listed %+v", listed)
		}
	}, "the streaming screen listed with its two components")
	if len(listed.Screens) != 1 || listed.Screens[0].Ended || listed.Screens[0].Components != 2 {
		t.Fatalf("while streaming: %+v", listed)
	}
	io.WriteString(pw, "more = Text(\"done\")")
	pw.Close()
	resp := <-done
	if resp == nil {
		t.Fatal("request failed")
	}
	defer resp.Body.Close()
	var sum screens.ScreenSummary
	json.NewDecoder(resp.Body).Decode(&sum)
	if resp.StatusCode != 201 || sum.Components != 3 || len(sum.Rejected) != 0 || !sum.Ended {
		t.Fatalf("created: %d %+v", resp.StatusCode, sum)
	}
}

// readSSE reads events until the response ends.
func readSSE(t *testing.T, body io.Reader) []assenttest.Event {
	t.Helper()
	var out []assenttest.Event
	rd := bufio.NewReader(body)
	var e assenttest.Event
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return out
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if e.Type != "" {
				out = append(out, e)
			}
			e = assenttest.Event{}
		case strings.HasPrefix(line, "event: "):
			e.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.Data = line[6:]
		}
	}
}

func TestGenerateStream(t *testing.T) {
	f, _ := screenFixture(t)
	f.Srv.Screens().SetGenerator(screens.MockGenerator{Screens: map[string]string{"hello": "root = Card([t])\nt = Text(\"hi\")\n", "pay": "root = Text(\"pay\")\n"}})
	for _, tc := range []struct{ version, code string }{{"0.5", "unsupported_version"}, {"0.7", "unsupported_version"}, {"x", "invalid_request"}} {
		resp := f.Req("POST", "/api/generate?version="+tc.version, f.Token, strings.NewReader(`{"prompt":"hello"}`), nil)
		if resp.StatusCode != 400 || assenttest.ErrorCode(t, resp) != tc.code {
			t.Errorf("version %s: %d", tc.version, resp.StatusCode)
		}
	}
	if resp := f.Req("POST", "/api/generate", f.Token, strings.NewReader(`{"prompt":""}`), nil); resp.StatusCode != 400 {
		t.Errorf("empty prompt: %d", resp.StatusCode)
	}
	for _, v := range []string{"", "?version=0.8", "?version=0.9"} {
		resp := f.Req("POST", "/api/generate"+v, f.Token, strings.NewReader(`{"prompt":"say hello"}`), nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: %d", v, resp.StatusCode)
		}
		events := readSSE(t, resp.Body)
		var text strings.Builder
		var names []string
		for _, e := range events {
			names = append(names, e.Type)
			if e.Type == "chunk" {
				var c struct{ Text string }
				json.Unmarshal([]byte(e.Data), &c)
				text.WriteString(c.Text)
			}
		}
		if got := strings.Join(names, ","); got != "chunk,chunk,chunk,live,done" {
			t.Fatalf("events %s", got)
		}
		if text.String() != screen.FormatMarker+"\nroot = Card([t])\nt = Text(\"hi\")\n" {
			t.Fatalf("stream %q", text.String())
		}
		var done struct {
			StopReason, Model string
			Ms                *int64
		}
		json.Unmarshal([]byte(events[4].Data), &done)
		if done.StopReason != "end_turn" || done.Model != "mock" || done.Ms == nil {
			t.Fatalf("done %s", events[4].Data)
		}
		var live struct{ Screen string }
		json.Unmarshal([]byte(events[3].Data), &live)
		if len(live.Screen) < 4+32 {
			t.Fatalf("live %s", events[3].Data)
		}
	}
}

type failingGen struct{}

func (failingGen) Generate(ctx context.Context, prompt string, emit func(string) error) (screens.GenerateResult, error) {
	if err := emit("root = Text(\"x\")\n"); err != nil {
		return screens.GenerateResult{}, err
	}
	return screens.GenerateResult{}, &screens.GenerateError{Code: "timeout", Message: "the model took too long", Retryable: true}
}

func TestGenerateErrorIsTheOneTerminalEvent(t *testing.T) {
	f := assenttest.Start(t, nil)
	f.Srv.Screens().SetGenerator(failingGen{})
	resp := f.Req("POST", "/api/generate", f.Token, strings.NewReader(`{"prompt":"x"}`), nil)
	events := readSSE(t, resp.Body)
	if len(events) != 3 || events[2].Type != "error" || !strings.Contains(events[2].Data, `"code":"timeout"`) || !strings.Contains(events[2].Data, `"retryable":true`) {
		t.Fatalf("events %+v", events)
	}
}

func TestLiveFeed(t *testing.T) {
	f := assenttest.Start(t, nil)
	owner := f.Boot.Agent
	id, err := f.Srv.Screens().Show(context.Background(), owner, "root = Card([status])\n$s = \"new\"\nstatus = Text($s)\n", screens.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, text := range []string{`$s = "packed"`, `$s = "shipped"`} {
		if res, err := f.Srv.Screens().Update(ctx, id, text); err != nil || !res.Applied {
			t.Fatalf("update %q: %v %+v", text, err, res)
		}
	}
	// A rejected update changes nothing and is not sent.
	if res, _ := f.Srv.Screens().Update(ctx, id, "status = Nope()"); res.Applied {
		t.Fatal("a bad update applied")
	}
	other, _, _ := auth.IssueToken(ctx, f.DB, store.KindAgent, "other", nil, time.Now())
	if resp := f.Req("GET", "/api/live?screen="+id, other, nil, nil); resp.StatusCode != 404 || assenttest.ErrorCode(t, resp) != "not_found" {
		t.Fatalf("another principal: %d", resp.StatusCode)
	}
	if resp := f.Req("GET", "/api/live?screen="+id+"&after=-1", f.Token, nil, nil); resp.StatusCode != 400 {
		t.Fatalf("bad after: %d", resp.StatusCode)
	}
	resp := f.Req("GET", "/api/live?screen="+id+"&after=1", f.Token, nil, nil)
	rd := assenttest.NewSSE(resp)
	if e := rd.Next(t); e.Type != "update" || e.Data != `{"seq":2,"text":"$s = \"shipped\""}` {
		t.Fatalf("catching up: %+v", e)
	}
	if _, err := f.Srv.Screens().Update(ctx, id, `$s = "delivered"`); err != nil {
		t.Fatal(err)
	}
	if e := rd.Next(t); e.Type != "update" || !strings.Contains(e.Data, `"seq":3`) {
		t.Fatalf("live: %+v", e)
	}
	sc, _ := screens.ScreenFor(f.Srv.Screens(), context.Background(), owner, id)
	screens.RemoveScreen(f.Srv.Screens(), context.Background(), sc)
	if e := rd.Next(t); e.Type != "end" {
		t.Fatalf("after close: %+v", e)
	}
}

func TestLiveCatchUpWhenUpdatesWereDropped(t *testing.T) {
	f := assenttest.Start(t, nil)
	id, _ := f.Srv.Screens().Show(context.Background(), f.Boot.Agent, "root = Card([a, n])\n$s = \"0\"\na = Text($s)\n$typed = \"\"\nn = Input($typed, label=\"Name\")\n", screens.Options{})
	for i := 1; i <= screens.KeptUpdates+5; i++ {
		if res, err := f.Srv.Screens().Update(context.Background(), id, fmt.Sprintf("$s = \"%d\"\na = Text($s, tone=\"muted\")", i)); err != nil || !res.Applied {
			t.Fatalf("update %d: %v %+v", i, err, res)
		}
	}
	sc, _ := screens.ScreenFor(f.Srv.Screens(), context.Background(), f.Boot.Agent, id)
	ups, _, _ := sc.UpdatesAfter(2)
	want := fmt.Sprintf("$s = \"%d\"\na = Text($s, tone=\"muted\")\n", screens.KeptUpdates+5)
	if len(ups) != 1 || ups[0].Seq != screens.KeptUpdates+5 || ups[0].Text != want {
		t.Fatalf("catch-up %+v", ups)
	}
	if ups, _, _ := sc.UpdatesAfter(screens.KeptUpdates + 3); len(ups) != 2 || ups[0].Seq != screens.KeptUpdates+4 {
		t.Fatalf("recent updates %+v", ups)
	}
}

func TestScreenFieldsAreControls(t *testing.T) {
	f, _ := screenFixture(t)
	if err := f.Srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{Name: "auth.login", Secret: []string{"pin"}, Handler: (&recorder{}).handle}}); err != nil {
		t.Fatal(err)
	}
	stream := "root = Card([email, pin, go])\n$email = \"\"\nemail = Input($email, label=\"Email\", required=true, format=\"email\")\n$pin = \"\"\npin = Input($pin, label=\"PIN\")\ngo = Button(\"Go\", action=\"go\")\ngoIt = McpMutation(go, tool=\"auth.login\", params={email: $email, pin: $pin})\n"
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, _ := assenttest.CallTool(t, cs, "show_screen", map[string]any{"screen": stream})
	id := out["screen"].(string)
	email := map[string]any{"formId": id, "controlId": "email"}
	snap, isErr := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": email})
	st, _ := snap["state"].(map[string]any)
	if isErr || snap["metadata"].(map[string]any)["kind"] != "email" || st["valid"] != false || st["validationMessage"] != "This field is required." {
		t.Fatalf("inspect email: %v", snap)
	}
	pin, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": map[string]any{"formId": id, "controlId": "pin"}})
	if pin["metadata"].(map[string]any)["sensitivity"] != "secret" || pin["state"].(map[string]any)["valueRedacted"] != true {
		t.Fatalf("pin is not secret: %v", pin)
	}
	out, isErr = assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": email, "value": "ada@example.com"})
	if isErr {
		t.Fatalf("stage: %v", out)
	}
	cookie, _ := f.SignIn()
	resp := f.Get("/screens/"+id, cookie)
	page, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`id="s-email"`, "ada@example.com", `action="/web/controls/apply"`, `value="/screens/` + id + `"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("screen page lacks %q", want)
		}
	}
	// Another agent cannot see the fields.
	other, _, _ := auth.IssueToken(context.Background(), f.DB, store.KindAgent, "other", nil, time.Now())
	cs2, err := f.MCPSession(other, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	if out, isErr := assenttest.CallTool(t, cs2, "controls_inspect", map[string]any{"identity": email}); !isErr {
		t.Fatalf("another agent inspected the field: %v", out)
	}
}

func TestStreamTextIsAlwaysText(t *testing.T) {
	f := assenttest.Start(t, nil)
	hostile := `root = Card([a, b, c], title="<img src=x onerror=alert(1)>")
a = Text("<script>alert(1)</script>")
b = Heading("<a href=\"javascript:alert(1)\">click</a>")
c = Notice("</p><style>body{display:none}</style>", title="\" onmouseover=\"alert(1)")
`
	id, _ := f.Srv.Screens().Show(context.Background(), f.Boot.Agent, hostile, screens.Options{})
	cookie, _ := f.SignIn()
	resp := f.Get("/screens/"+id, cookie)
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	for _, bad := range []string{"<script>alert", "<img src=x", `<a href="javascript`, "<style>body", `" onmouseover="`} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds markup from the stream: %q", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the stream's text is not shown as text")
	}
}

func TestWebPressPipeline(t *testing.T) {
	f, recs := screenFixture(t)
	stream := "root = Card([amount, note, pay])\n$amount = 12.5\namount = Text($amount)\n$note = \"\"\nnote = Input($note, label=\"Note\", required=true)\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.confirmed\", params={amount: $amount, note: $note})\n"
	id, _ := f.Srv.Screens().Show(context.Background(), f.Boot.Agent, stream, screens.Options{})
	cookie, csrf := f.SignIn()
	post := func(path, body string) map[string]any {
		t.Helper()
		r, _ := http.NewRequest("POST", f.HTTP.URL+"/screens/"+id+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Origin", f.HTTP.URL)
		r.Header.Set("X-CSRF-Token", csrf)
		r.AddCookie(cookie)
		resp, err := f.HTTP.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	if out := post("/press", `{"button":"pay"}`); out["status"] != "blocked" || out["focus"] != "note" {
		t.Fatalf("press with an empty required field: %v", out)
	}
	if out := post("/state", `{"field":"note","value":"table 4","touched":true}`); out["message"] != "" {
		t.Fatalf("state: %v", out)
	}
	out := post("/press", `{"button":"pay"}`)
	if out["status"] != "confirm" || out["sentence"] != "Pay 12.5?" {
		t.Fatalf("press: %v", out)
	}
	if c := post("/cancel", fmt.Sprintf(`{"press":%q}`, out["press"])); c["status"] != "cancelled" {
		t.Fatalf("cancel: %v", c)
	}
	if recs["pay.confirmed"].count() != 0 {
		t.Fatal("cancel ran the handler")
	}
	out = post("/press", `{"button":"pay"}`)
	if c := post("/confirm", fmt.Sprintf(`{"press":%q}`, out["press"])); c["status"] != "done" {
		t.Fatalf("confirm: %v", c)
	}
	// The same press can't be confirmed twice.
	if c := post("/confirm", fmt.Sprintf(`{"press":%q}`, out["press"])); c["status"] == "done" {
		t.Fatal("a press ran twice")
	}
	rec := recs["pay.confirmed"]
	if rec.count() != 1 || fmt.Sprint(rec.calls[0]) != "map[amount:12.5 note:table 4]" {
		t.Fatalf("handler calls %v", rec.calls)
	}
}

func TestThemeContrast(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "omni-ir", "conformance", "theme.json"))
	if err != nil {
		t.Skip("theme.json is not available:", err)
	}
	var theme struct {
		Contrast []struct {
			Foreground, Background, What string
			Minimum                      float64
		}
	}
	if err := json.Unmarshal(b, &theme); err != nil {
		t.Fatal(err)
	}
	css, err := host.StaticFS.ReadFile("static/screen.css")
	if err != nil {
		t.Fatal(err)
	}
	light, dark := cssTokens(t, string(css))
	for name, tokens := range map[string]map[string]string{"light": light, "dark": dark} {
		for _, c := range theme.Contrast {
			fg, bg := tokens[c.Foreground], tokens[c.Background]
			if fg == "" || bg == "" {
				t.Errorf("%s: token %s or %s is not defined", name, c.Foreground, c.Background)
				continue
			}
			if r := contrast(fg, bg); r < c.Minimum {
				t.Errorf("%s %s: %s on %s is %.2f:1, want at least %.1f:1", name, c.What, fg, bg, r, c.Minimum)
			}
		}
	}
}

// cssTokens reads the --o-* colours of the light block and of the dark
// (prefers-color-scheme) block.
func cssTokens(t *testing.T, css string) (light, dark map[string]string) {
	t.Helper()
	i := strings.Index(css, "@media (prefers-color-scheme: dark)")
	if i < 0 {
		t.Fatal("screen.css has no dark theme")
	}
	read := func(s string) map[string]string {
		out := map[string]string{}
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			name, val, ok := strings.Cut(line, ":")
			if ok && strings.HasPrefix(name, "--o-") && strings.HasSuffix(val, ";") {
				if _, seen := out[name[4:]]; !seen {
					out[name[4:]] = strings.TrimSpace(strings.TrimSuffix(val, ";"))
				}
			}
		}
		return out
	}
	return read(css[:i]), read(css[i:])
}

// contrast is the WCAG 2.x contrast ratio of two #rrggbb colours.
func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

func luminance(hex string) float64 {
	var r, g, b int
	fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b)
	ch := func(c int) float64 {
		v := float64(c) / 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*ch(r) + 0.7152*ch(g) + 0.0722*ch(b)
}

// The example screens, which the demo shows, parse without issues under
// the server's tools and pictures.
func TestExampleScreensParseClean(t *testing.T) {
	f := assenttest.StartDemo(t)
	for name, text := range examples.Screens() {
		if name == "gallery" {
			continue // it shows the fallbacks on purpose
		}
		doc := screen.Parse(text, screens.AllowedOptions(f.Srv.Screens()))
		for _, is := range doc.Issues() {
			t.Errorf("%s.omni line %d: %s %s", name, is.Line, is.Code, is.Message)
		}
	}
}

func TestDemoScreensRender(t *testing.T) {
	f := assenttest.StartDemo(t)
	cookie, _ := f.SignIn()
	resp := f.Get("/screens", cookie)
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"Confirm payment", "Sign up", "Sales this quarter", "Component gallery"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("screens page lacks %q", want)
		}
	}
	for _, sc := range screens.VisibleScreens(f.Srv.Screens(), context.Background(), f.Boot.Owner) {
		resp := f.Get("/screens/"+sc.ID(), cookie)
		page, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(page), `class="o-screen"`) {
			t.Errorf("screen %s: %d", sc.ID(), resp.StatusCode)
		}
	}
}

func TestToolsFileCallsTheCallback(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		params, _ := body["params"].(map[string]any)
		if params["orderId"] == "theirs" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":"not_found","message":"no such order"}}`)
			return
		}
		io.WriteString(w, `{"result":{"cancelled":true},"update":"$s = \"cancelled\""}`)
	}))
	defer cb.Close()
	f := assenttest.Start(t, func(c *server.Config) {
		file := fmt.Sprintf(`{"tools":[{"name":"orders.cancel","description":"Cancel an order.","params":{"type":"object","properties":{"orderId":{"type":"string"}},"required":["orderId"],"additionalProperties":false},"callback":%q},
			{"name":"orders.refund","params":{"type":"object"},"confirm":"Refund {orderId}?","callback":%q}]}`, cb.URL, cb.URL)
		if err := os.WriteFile(filepath.Join(c.DataDir, "tools.json"), []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if names := strings.Join(f.Srv.Screens().ToolNames(), ","); names != "orders.cancel,orders.refund" {
		t.Fatalf("tools %s", names)
	}
	resp := mutateReq(f, f.Token, `{"tool":"orders.cancel","params":{"orderId":"o-1"}}`, nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != `{"ok":true,"tool":"orders.cancel","result":{"cancelled":true},"update":"$s = \"cancelled\""}`+"\n" {
		t.Fatalf("mutate: %d %s", resp.StatusCode, b)
	}
	if resp := mutateReq(f, f.Token, `{"tool":"orders.cancel","params":{"orderId":"theirs"}}`, nil); resp.StatusCode != 404 || assenttest.ErrorCode(t, resp) != "not_found" {
		t.Fatalf("not the caller's: %d", resp.StatusCode)
	}
	if resp := mutateReq(f, f.Token, `{"tool":"orders.refund","params":{"orderId":"o-1"}}`, nil); resp.StatusCode != 409 {
		t.Fatalf("a tool with a confirmation: %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0]["tool"] != "orders.cancel" {
		t.Fatalf("callback calls %v", got)
	}
}

func TestToolsFileRefusesBadEntries(t *testing.T) {
	for _, file := range []string{
		`{"tools":[{"name":"Orders.cancel","callback":"http://127.0.0.1:1/"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"file:///etc/passwd"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://127.0.0.1:1/","access":"everyone"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://127.0.0.1:1/","colour":"red"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://127.0.0.1:1/","currency":{"amount":"dollars"}}]}`,
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "tools.json"), []byte(file), 0o600)
		db, err := sqlite.Open(context.Background(), filepath.Join(dir, "assent.db"))
		if err != nil {
			t.Fatal(err)
		}
		if srv, err := server.New(context.Background(), server.Config{DataDir: dir, Store: db}); err == nil {
			srv.Close()
			t.Errorf("accepted %s", file)
		}
		db.Close()
	}
}

func TestNewerVersionNoticeAndPlaceholders(t *testing.T) {
	f := assenttest.Start(t, nil)
	sc, err := screens.NewScreen(f.Srv.Screens(), context.Background(), f.Boot.Agent, screens.Options{})
	if err != nil {
		t.Fatal(err)
	}
	screens.WriteScreen(f.Srv.Screens(), sc, []byte("# omni-ir 0.9\nroot = Card([a, b])\na = Text(\"here\")\n"))
	cookie, _ := f.SignIn()
	page := func() string {
		resp := f.Get("/screens/"+sc.ID()+"?partial=1", cookie)
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	p := page()
	for _, want := range []string{`id="screen-newer"`, `id="n-b" role="status" aria-label="Loading"`, `class="o-text o-tone-default" id="n-a">here<`, "arriving"} {
		if !strings.Contains(p, want) {
			t.Errorf("while streaming, the page lacks %q", want)
		}
	}
	screens.EndScreen(f.Srv.Screens(), context.Background(), sc)
	if p := page(); !strings.Contains(p, `id="n-b" role="note">Component failed to load<`) {
		t.Errorf("after the end, no fallback for the missing component:\n%s", p)
	}
}

func TestMutateConflicts(t *testing.T) {
	f := assenttest.Start(t, nil)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	slow := func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
		started <- struct{}{}
		<-release
		return confirm.Result{Value: map[string]any{"done": true}}, nil
	}
	busy := func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
		return confirm.Result{}, tool.Errorf("unavailable", "the slot was taken; choose another")
	}
	for _, st := range []screens.Tool{
		{Tool: confirm.Tool{Name: "slow.run", Handler: slow}},
		{Tool: confirm.Tool{Name: "slot.book", Handler: busy}},
	} {
		if err := f.Srv.Screens().RegisterTool(st); err != nil {
			t.Fatal(err)
		}
	}
	if resp := mutateReq(f, f.Token, `{"tool":"slot.book","params":{}}`, nil); resp.StatusCode != 409 || assenttest.ErrorCode(t, resp) != "unavailable" {
		t.Fatalf("the tool's own conflict: %d", resp.StatusCode)
	}
	key := map[string]string{"Idempotency-Key": "k1"}
	first := make(chan int, 1)
	go func() {
		r, _ := http.NewRequest("POST", f.HTTP.URL+"/api/mutate", strings.NewReader(`{"tool":"slow.run","params":{}}`))
		r.Header.Set("Authorization", "Bearer "+f.Token)
		r.Header.Set("Idempotency-Key", "k1")
		resp, err := f.HTTP.Client().Do(r)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started
	resp := mutateReq(f, f.Token, `{"tool":"slow.run","params":{}}`, key)
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	close(release)
	if resp.StatusCode != 409 || body.Error.Code != "idempotency_in_progress" || !body.Error.Retryable {
		t.Fatalf("same key while running: %d %+v", resp.StatusCode, body)
	}
	if code := <-first; code != 200 {
		t.Fatalf("first request: %d", code)
	}
	if resp := mutateReq(f, f.Token, `{"tool":"slow.run","params":{}}`, key); resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after it finished: %d", resp.StatusCode)
	}
}

func TestPicturesComeOnlyFromTheRegistry(t *testing.T) {
	f := assenttest.Start(t, nil)
	if err := f.Srv.Screens().RegisterPicture("logo", []byte("<svg xmlns='http://www.w3.org/2000/svg'/>"), "image/svg+xml"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"Logo", "https://evil.example/x.png", ""} {
		if err := f.Srv.Screens().RegisterPicture(bad, []byte("x"), "image/png"); err == nil {
			t.Errorf("registered %q", bad)
		}
	}
	id, _ := f.Srv.Screens().Show(context.Background(), f.Boot.Agent, "root = Stack([a, b])\na = Image(\"logo\", alt=\"Our logo\")\nb = Image(\"https://evil.example/x.png\", alt=\"x\")\n", screens.Options{})
	cookie, _ := f.SignIn()
	b, _ := io.ReadAll(f.Get("/screens/"+id, cookie).Body)
	page := string(b)
	if !strings.Contains(page, `src="/screen-pictures/logo" alt="Our logo" referrerpolicy="no-referrer"`) {
		t.Errorf("the registered picture is not drawn:\n%s", page)
	}
	if strings.Contains(page, "evil.example") {
		t.Error("a location from the stream reached the page")
	}
	resp := f.Get("/screen-pictures/logo", cookie)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("picture: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := f.Get("/screen-pictures/nope", cookie); resp.StatusCode != 404 {
		t.Fatalf("unknown picture: %d", resp.StatusCode)
	}
}

// TestRenderConformanceStreams draws every stream of the shared conformance
// cases (each catalog component with every prop, grammar and stream edge
// cases) and checks that each draws without a component failing.
func TestRenderConformanceStreams(t *testing.T) {
	f := assenttest.Start(t, nil)
	if err := f.Srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{Name: "payments.confirm", Handler: (&recorder{}).handle}}); err != nil {
		t.Fatal(err)
	}
	drawn := 0
	for _, file := range []string{"catalog.json", "grammar.json", "stream.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "omni-ir", "conformance", "cases", file))
		if err != nil {
			t.Skip("the conformance cases are not available:", err)
		}
		var suite struct {
			Cases []struct {
				ID     string          `json:"id"`
				Input  json.RawMessage `json:"input"`
				Assets []string        `json:"assets"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(b, &suite); err != nil {
			t.Fatal(err)
		}
		for _, c := range suite.Cases {
			// The input is a string or a list of chunks, each a string or
			// {"repeat": text, "times": n}.
			var chunks []string
			var one string
			var parts []json.RawMessage
			if json.Unmarshal(c.Input, &one) == nil {
				chunks = []string{one}
			} else if err := json.Unmarshal(c.Input, &parts); err == nil {
				for _, p := range parts {
					var rep struct {
						Repeat string `json:"repeat"`
						Times  int    `json:"times"`
					}
					if json.Unmarshal(p, &one) == nil {
						chunks = append(chunks, one)
					} else if json.Unmarshal(p, &rep) == nil {
						chunks = append(chunks, strings.Repeat(rep.Repeat, rep.Times))
					}
				}
			} else {
				t.Fatalf("%s: input %s", c.ID, c.Input)
			}
			for _, a := range c.Assets {
				f.Srv.Screens().RegisterPicture(a, []byte("GIF89a"), "image/gif")
			}
			sc, err := screens.NewScreen(f.Srv.Screens(), context.Background(), f.Boot.Agent, screens.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range chunks {
				screens.WriteScreen(f.Srv.Screens(), sc, []byte(ch))
			}
			screens.EndScreen(f.Srv.Screens(), context.Background(), sc)
			view := screens.BuildScreenView(f.Srv.Screens(), context.Background(), sc, "csrf")
			var out strings.Builder
			if err := screenPage(t, f).ExecuteTemplate(&out, "screen-region", host.Page{Data: view}); err != nil {
				t.Errorf("%s: %v", c.ID, err)
				continue
			}
			if strings.Contains(out.String(), render.WordFailedRender) {
				t.Errorf("%s: a component failed to draw", c.ID)
			}
			screens.RemoveScreen(f.Srv.Screens(), context.Background(), sc)
			drawn++
		}
	}
	if drawn < 60 {
		t.Fatalf("drew only %d streams", drawn)
	}
}

func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		cur  string
		want string
	}{
		{42.5, "", "$42.50"},
		{1234567.891, "USD", "$1,234,567.89"},
		{-3, "EUR", "-€3.00"},
		{0.5, "CHF", "0.50 CHF"},
		{999.999, "GBP", "£1,000.00"},
	} {
		if got := render.Money(tc.f, tc.cur); got != tc.want {
			t.Errorf("Money(%v, %q) = %q, want %q", tc.f, tc.cur, got, tc.want)
		}
	}
}

func TestTextFormats(t *testing.T) {
	f := assenttest.Start(t, nil)
	id, _ := f.Srv.Screens().Show(context.Background(), f.Boot.Agent, `root = Stack([a, b, c, d])
a = Text("2026-09-30", format="date")
b = Text("next Tuesday", format="date")
$n = 1500
c = Text($n, format="currency", currency="USD")
d = Text("not a number", format="currency")
`, screens.Options{})
	sc, _ := screens.ScreenFor(f.Srv.Screens(), context.Background(), f.Boot.Agent, id)
	v := screens.BuildScreenView(f.Srv.Screens(), context.Background(), sc, "")
	var got []string
	for _, c := range v.Root.Children {
		got = append(got, c.Text)
	}
	if want := "September 30, 2026|next Tuesday|$1,500.00|not a number"; strings.Join(got, "|") != want {
		t.Fatalf("texts %q, want %q", strings.Join(got, "|"), want)
	}
}

// screenPage returns the template of the screen page.
func screenPage(t *testing.T, f *assenttest.Kit) *template.Template {
	t.Helper()
	tpl, ok := f.Srv.Screens().Web.Page("screen")
	if !ok {
		t.Fatal("no screen page")
	}
	return tpl
}

// Only the demo answers /api/generate with canned screens; otherwise a
// server without a generator says so.
func TestGenerateNeedsAGenerator(t *testing.T) {
	f := assenttest.Start(t, nil)
	resp := f.Req("POST", "/api/generate", f.Token, strings.NewReader(`{"prompt":"pay"}`), nil)
	if resp.StatusCode != 403 || assenttest.ErrorCode(t, resp) != "unsupported" {
		t.Fatalf("generate without a generator: %d", resp.StatusCode)
	}
	demo := assenttest.StartDemo(t)
	resp = demo.Req("POST", "/api/generate", demo.Token, strings.NewReader(`{"prompt":"payment"}`), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("generate in the demo: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// The mock generator finds a canned screen however the prompt spells its
// name: case, spaces and hyphens aside.
func TestMockGeneratorMatchesNames(t *testing.T) {
	g := screens.MockGenerator{Screens: map[string]string{"gallery": "root = Text(\"gallery\")\n", "signup": "root = Text(\"signup\")\n"}}
	tests := []struct{ prompt, want string }{
		{"A sign-up form", "signup"},
		{"SIGN UP please", "signup"},
		{"a signup screen", "signup"},
		{"something else", "gallery"},
	}
	for _, tt := range tests {
		var got strings.Builder
		if _, err := g.Generate(context.Background(), tt.prompt, func(s string) error { got.WriteString(s); return nil }); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.String(), `"`+tt.want+`"`) {
			t.Errorf("prompt %q gave %q, want the %s screen", tt.prompt, got.String(), tt.want)
		}
	}
}

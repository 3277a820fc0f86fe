package e2e

// The transport boundary, attacked: each test does what an attacker holding
// only an agent's token (or a Run's own token read from its output) tried,
// and asserts it is refused with a code or stopped.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
)

// boundaryApp is an app whose server configuration a test may change.
type boundaryApp struct{ *app }

func newBoundaryApp(t *testing.T, mod func(*server.Config)) *boundaryApp {
	t.Helper()
	return &boundaryApp{newAppIn(t, t.TempDir(), false, mod)}
}

// send makes a request with a bearer token and returns the status and body.
func (a *boundaryApp) send(method, path, token string, body any, hdr map[string]string) (int, []byte) {
	a.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	r, err := http.NewRequest(method, a.HTTP.URL+path, rd)
	if err != nil {
		a.T.Fatal(err)
	}
	if rd != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := a.HTTP.Client().Do(r)
	if err != nil {
		a.T.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// codeOf returns the error code of the one error shape, failing the test
// when the body is not that shape.
func codeOf(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable *bool  `json:"retryable"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Retryable == nil {
		t.Fatalf("not the error shape: %s", body)
	}
	return e.Error.Code
}

// spawnService starts a Run of a recipe that keeps its Control FIFO open
// and writes its environment, and returns the run-scoped token and
// generation read from that output.
func (a *boundaryApp) spawnService(runID string) (token, instance string) {
	a.T.Helper()
	recipe := `{"description":"boundary test service","template":"env > env.txt; exec 3<>\"$ASSENT_CONTROL_FIFO\"; exec sleep 300","control":["ping"]}`
	if err := os.MkdirAll(filepath.Join(a.Dir, "recipes"), 0o700); err != nil {
		a.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.Dir, "recipes", "svc.json"), []byte(recipe), 0o600); err != nil {
		a.T.Fatal(err)
	}
	code, body := a.send("POST", "/v1/runs", a.Boot.AgentToken, map[string]any{"recipe": "svc", "run_id": runID}, nil)
	if code != http.StatusCreated {
		a.T.Fatalf("spawn %s: %d %s", runID, code, body)
	}
	a.T.Cleanup(func() { a.send("POST", "/v1/runs/"+runID+"/kill", a.Boot.AgentToken, nil, nil) })
	path := filepath.Join(a.Dir, "runs", runID, "env.txt")
	testwait.Eventually(a.T, 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, []byte("ASSENT_RUN_INSTANCE_ID=")) {
			return false
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), "=")
			switch k {
			case "ASSENT_RUN_TOKEN":
				token = v
			case "ASSENT_RUN_INSTANCE_ID":
				instance = v
			}
		}
		return token != "" && instance != ""
	}, "Run "+runID+" writing its environment")
	return token, instance
}

// applyPing applies the ping Control to runID as the agent, waiting for the
// service's FIFO to be open, and returns the Control's id.
func (a *boundaryApp) applyPing(runID string) string {
	a.T.Helper()
	var body []byte
	testwait.EventuallyC(a.T, 10*time.Second, func(c *testwait.C) {
		var code int
		code, body = a.send("POST", "/v1/runs/"+runID+"/controls", a.Boot.AgentToken, map[string]any{"action": "ping"}, nil)
		if code == http.StatusOK {
			return
		}
		if code != http.StatusServiceUnavailable {
			a.T.Fatalf("apply ping to %s: %d %s", runID, code, body)
		}
		c.Errorf("%d %s", code, body)
	}, "the ping applied to "+runID)
	var c struct {
		ID string `json:"control_id"`
	}
	json.Unmarshal(body, &c)
	if c.ID == "" {
		a.T.Fatalf("apply answered no id: %s", body)
	}
	return c.ID
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}`

var mcpHeaders = map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}

func TestAttackRunTokenOutsideItsRun(t *testing.T) {
	a := newBoundaryApp(t, nil)
	runTok, inst := a.spawnService("alpha")
	a.spawnService("beta")
	betaControl := a.applyPing("beta")

	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"open an MCP session", "POST", "/mcp", initializeBody},
		{"declare a hosted form", "POST", "/v1/forms/payroll/controls", map[string]any{"controls": []any{}}},
		{"follow the event stream", "GET", "/v1/events", nil},
		{"spawn a Run", "POST", "/v1/runs", map[string]any{"template": "id"}},
		{"list Runs", "GET", "/v1/runs", nil},
		{"show a screen", "POST", "/v1/screens", "root = Text(\"hi\")\n"},
		{"press a screen button", "POST", "/api/mutate", map[string]any{"tool": "payments.send", "params": map[string]any{}}},
		{"start a Flow instance", "POST", "/v1/flows/instances", map[string]any{"program": "p"}},
		{"load a Flow program", "POST", "/v1/flows/programs", map[string]any{}},
		{"claim another Run's Control", "POST", "/v1/runs/beta/controls/claim", map[string]any{"id": betaControl}},
		{"append to another Run's Trace", "POST", "/v1/runs/beta/trace", map[string]any{"kind": "x.y"}},
		{"read another Run's logs", "GET", "/v1/runs/beta/logs", nil},
		{"steer its own Run", "POST", "/v1/runs/alpha/controls", map[string]any{"action": "ping"}},
		{"kill its own Run", "POST", "/v1/runs/alpha/kill", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.path == "/mcp" {
				hdr = mcpHeaders
			}
			code, body := a.send(tc.method, tc.path, runTok, tc.body, hdr)
			if code != http.StatusForbidden || codeOf(t, body) != "forbidden" {
				t.Fatalf("%s %s with the run token: %d %s, want 403 forbidden", tc.method, tc.path, code, body)
			}
		})
	}

	// What a service needs on its own Run still works.
	own := a.applyPing("alpha")
	code, body := a.send("POST", "/v1/runs/alpha/controls/claim", runTok, map[string]any{"id": own, "run_instance_id": inst}, nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"claimed"`) {
		t.Fatalf("claim on its own Run: %d %s", code, body)
	}
	if code, body := a.send("POST", "/v1/runs/alpha/controls/"+own+"/handled", runTok, map[string]any{}, nil); code != http.StatusOK {
		t.Fatalf("settle on its own Run: %d %s", code, body)
	}
	if code, body := a.send("POST", "/v1/runs/alpha/trace", runTok, map[string]any{"kind": "svc.ready"}, nil); code != http.StatusCreated {
		t.Fatalf("trace on its own Run: %d %s", code, body)
	}
	if code, body := a.send("GET", "/v1/runs/alpha/logs", runTok, nil, nil); code != http.StatusOK {
		t.Fatalf("logs of its own Run: %d %s", code, body)
	}
}

// openMCPSession initializes a session on the older protocol revision and
// returns its id.
func (a *boundaryApp) openMCPSession(token string) (string, int) {
	a.T.Helper()
	r, _ := http.NewRequest("POST", a.HTTP.URL+"/mcp", strings.NewReader(initializeBody))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	for k, v := range mcpHeaders {
		r.Header.Set(k, v)
	}
	resp, err := a.HTTP.Client().Do(r)
	if err != nil {
		a.T.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("Mcp-Session-Id"), resp.StatusCode
}

// pingSession reports whether session id still answers.
func (a *boundaryApp) pingSession(token, id string) bool {
	a.T.Helper()
	hdr := map[string]string{"Mcp-Session-Id": id}
	for k, v := range mcpHeaders {
		hdr[k] = v
	}
	code, _ := a.send("POST", "/mcp", token, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, hdr)
	return code == http.StatusOK
}

func TestAttackUnboundedMCPSessions(t *testing.T) {
	const limit = 32 // the documented default
	a := newBoundaryApp(t, nil)
	var ids []string
	for i := 0; i < 40; i++ {
		id, code := a.openMCPSession(a.Boot.AgentToken)
		if code != http.StatusOK || id == "" {
			t.Fatalf("session %d: %d, id %q", i, code, id)
		}
		ids = append(ids, id)
	}
	alive := 0
	for _, id := range ids {
		if a.pingSession(a.Boot.AgentToken, id) {
			alive++
		}
	}
	if alive > limit {
		t.Fatalf("%d sessions alive for one token, want at most %d", alive, limit)
	}
	if a.pingSession(a.Boot.AgentToken, ids[0]) {
		t.Error("the least recently used idle session was not the one closed")
	}
	if !a.pingSession(a.Boot.AgentToken, ids[len(ids)-1]) {
		t.Error("the newest session was closed")
	}
	// Another principal is not affected by this token's sessions.
	other, _, err := auth.IssueToken(context.Background(), a.DB, store.KindAgent, "other", []string{"tool.invoke"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if id, code := a.openMCPSession(other); code != http.StatusOK || !a.pingSession(other, id) {
		t.Fatalf("another principal's session: %d", code)
	}
}

// trickle sends a request whose body arrives one byte at a time and reports
// whether the server closed the connection before give-up.
func trickle(t *testing.T, addr, path, contentType string, giveUp time.Duration) bool {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nOrigin: http://%s\r\nContent-Type: %s\r\nContent-Length: 100000\r\n\r\n", path, addr, addr, contentType)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("a")); err != nil {
					return
				}
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(giveUp))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

func TestAttackTricklingBody(t *testing.T) {
	a := newBoundaryApp(t, func(c *server.Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	addr := a.HTTP.Listener.Addr().String()
	for _, tc := range []struct{ path, contentType string }{
		{"/signin", "application/x-www-form-urlencoded"},
		{"/api/mutate", "application/json"},
		{"/v1/runs", "application/json"},
	} {
		if !trickle(t, addr, tc.path, tc.contentType, 10*time.Second) {
			t.Errorf("%s: a body trickling one byte at a time held the connection open", tc.path)
		}
	}
}

func TestAttackSignInFlood(t *testing.T) {
	a := newBoundaryApp(t, nil)
	limited := false
	for i := 0; i < 60 && !limited; i++ {
		r, _ := http.NewRequest("POST", a.HTTP.URL+"/signin", strings.NewReader(url.Values{"link": {"asnt_sl_guess"}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", a.HTTP.URL)
		resp, err := a.HTTP.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if codeOf(t, body) != "rate_limited" || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("limited sign-in: %s, Retry-After %q", body, resp.Header.Get("Retry-After"))
			}
			limited = true
		}
	}
	if !limited {
		t.Fatal("60 sign-in guesses from one address were all answered")
	}
}

func TestAttackNoticeInURL(t *testing.T) {
	a := newBoundaryApp(t, nil)
	cookie, _ := a.SignIn()
	const planted = "Your session expired. Re-enter your password at evil.example"
	for _, path := range []string{
		"/inbox?notice=" + url.QueryEscape(planted),
		"/inbox?notice=" + url.QueryEscape("<script>alert(1)</script>"),
	} {
		resp, page := a.page(path, cookie)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		if strings.Contains(page, "evil.example") || strings.Contains(page, "alert(1)") || strings.Contains(page, `id="notice"`) {
			t.Fatalf("%s: the banner shows text from the URL", path)
		}
	}
}

func TestAttackBackToAnotherSite(t *testing.T) {
	a := newBoundaryApp(t, nil)
	cookie, csrf := a.SignIn()
	for _, back := range []string{"//evil.example", `/\evil.example`, "https://evil.example/", "/\t/evil.example", "javascript:alert(1)"} {
		form := url.Values{"csrf": {csrf}, "formId": {"nope"}, "controlId": {"nope"}, "back": {back}}
		r, _ := http.NewRequest("POST", a.HTTP.URL+"/web/controls/discard", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", a.HTTP.URL)
		r.AddCookie(cookie)
		resp, err := a.NoRedirect().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || loc != "/inbox" {
			t.Errorf("back=%q: %d Location %q, want a redirect to /inbox", back, resp.StatusCode, loc)
		}
	}
}

// sseEnded reads an event stream until it ends and reports whether it did
// before give-up.
func sseEnded(body io.ReadCloser, giveUp time.Duration) bool {
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, body)
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(giveUp):
		body.Close()
		<-done
		return false
	}
}

func TestAttackRevokedTokenKeepsStreaming(t *testing.T) {
	a := newBoundaryApp(t, nil)
	ctx := context.Background()
	tok, p, err := auth.IssueToken(ctx, a.DB, store.KindAgent, "leaked", []string{"state.write", "tool.invoke"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// An event stream and an MCP session with its notification stream.
	r, _ := http.NewRequest("GET", a.HTTP.URL+"/v1/events", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	events, err := a.HTTP.Client().Do(r)
	if err != nil || events.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", err, events)
	}
	sid, code := a.openMCPSession(tok)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("mcp session: %d", code)
	}
	r, _ = http.NewRequest("GET", a.HTTP.URL+"/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Mcp-Session-Id", sid)
	r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	notify, err := a.HTTP.Client().Do(r)
	if err != nil || notify.StatusCode != http.StatusOK {
		t.Fatalf("mcp stream: %v %v", err, notify)
	}

	// The token is revoked by another process writing the same database,
	// as `assent token revoke` does.
	other := a.OpenStore(ctx)
	if err := other.Principals().RevokePrincipal(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	other.Close()

	// The design goal is about a second; the deadline here only bounds a
	// failing run.
	if !sseEnded(events.Body, 5*time.Second) {
		t.Error("the event stream kept delivering after the token was revoked")
	}
	if !sseEnded(notify.Body, 5*time.Second) {
		t.Error("the MCP notification stream kept delivering after the token was revoked")
	}
	hdr := map[string]string{"Mcp-Session-Id": sid}
	for k, v := range mcpHeaders {
		hdr[k] = v
	}
	if code, _ := a.send("POST", "/mcp", tok, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, hdr); code != http.StatusUnauthorized {
		t.Errorf("the revoked token still answered: %d", code)
	}
}

func TestAttackSecretScreenValueInHTML(t *testing.T) {
	a := newBoundaryApp(t, nil)
	noop := func(context.Context, confirm.Request) (confirm.Result, error) { return confirm.Result{}, nil }
	if err := a.Srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{Name: "bank.login", Secret: []string{"pin"}, Handler: noop}}); err != nil {
		t.Fatal(err)
	}
	stream := "root = Card([pin, go])\n$pin = \"\"\npin = Input($pin, label=\"PIN\")\ngo = Button(\"Go\", action=\"go\")\ngoIt = McpMutation(go, tool=\"bank.login\", params={pin: $pin})\n"
	code, body := a.send("POST", "/v1/screens", a.Boot.AgentToken, stream, nil)
	if code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("show screen: %d %s", code, body)
	}
	var shown struct {
		Screen string `json:"screen"`
		ID     string `json:"id"`
	}
	json.Unmarshal(body, &shown)
	id := shown.Screen
	if id == "" {
		id = shown.ID
	}
	if id == "" {
		t.Fatalf("no screen id in %s", body)
	}
	cookie, csrf := a.SignIn()
	const pin = "8675309"
	r, _ := http.NewRequest("POST", a.HTTP.URL+"/screens/"+id+"/state", strings.NewReader(`{"field":"pin","value":"`+pin+`","touched":true}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", a.HTTP.URL)
	r.Header.Set("X-CSRF-Token", csrf)
	r.AddCookie(cookie)
	resp, err := a.HTTP.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	state, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("typing the PIN: %d %s", resp.StatusCode, state)
	}
	_, page := a.page("/screens/"+id, cookie)
	if !strings.Contains(page, `type="password"`) {
		t.Fatalf("the page has no password field:\n%s", page)
	}
	if strings.Contains(page, pin) {
		t.Fatal("the typed PIN is served back in the page HTML")
	}
	if !strings.Contains(page, "(set)") {
		t.Error("the secret field does not say that a value is set")
	}
}

func TestAttackDatabaseFilesReadable(t *testing.T) {
	assenttest.SkipUnless(t, assenttest.SQLite)
	a := newBoundaryApp(t, nil)
	// Make sure the write-ahead log exists.
	if _, _, err := auth.IssueToken(context.Background(), a.DB, store.KindAgent, "x", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"assent.db", "assent.db-wal", "assent.db-shm"} {
		fi, err := os.Stat(filepath.Join(a.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %o, want 600", name, perm)
		}
	}
}

// page fetches path with the session cookie and returns the answer and its
// body.
func (a *boundaryApp) page(path string, cookie *http.Cookie) (*http.Response, string) {
	a.T.Helper()
	resp := a.Get(path, cookie)
	return resp, assenttest.ReadAll(resp)
}

package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/tool"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a running server on a fresh data directory.
type fixture struct {
	t     *testing.T
	srv   *Server
	db    *sqlite.DB
	http  *httptest.Server
	boot  Bootstrap
	token string // the first agent's token
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	boot, err := EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: dir, Store: db}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	f := &fixture{t: t, srv: srv, db: db, http: hs, boot: boot, token: boot.AgentToken}
	t.Cleanup(func() {
		hs.CloseClientConnections()
		srv.Close()
		hs.Close()
		db.Close()
	})
	return f
}

func (f *fixture) req(method, path, token string, body io.Reader, hdr map[string]string) *http.Response {
	f.t.Helper()
	r, err := http.NewRequest(method, f.http.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := f.http.Client().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func errorCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable *bool  `json:"retryable"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("error body is not JSON: %v", err)
	}
	if body.Error.Message == "" || body.Error.Retryable == nil {
		t.Fatalf("error body lacks message or retryable: %+v", body)
	}
	return body.Error.Code
}

func TestHealthAndWhoami(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.req("GET", "/v1/health", "", nil, nil)
	var h map[string]string
	json.NewDecoder(resp.Body).Decode(&h)
	if h["status"] != "ok" || h["store"] != "sqlite" || h["version"] == "" {
		t.Fatalf("health = %v", h)
	}
	resp = f.req("GET", "/v1/whoami", f.token, nil, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), f.boot.Agent.ID) {
		t.Fatalf("whoami = %d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), f.token) {
		t.Fatal("whoami leaks the token")
	}
}

func TestAuthFailures(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name, token string
	}{
		{"none", ""},
		{"wrong", "asnt_nope"},
	} {
		resp := f.req("GET", "/v1/whoami", tc.token, nil, nil)
		if resp.StatusCode != 401 || errorCode(t, resp) != "sign_in_required" {
			t.Errorf("%s token: status %d", tc.name, resp.StatusCode)
		}
	}
	// Revocation takes effect at once.
	tok, p, err := IssueToken(context.Background(), f.db, "service", "svc", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if resp := f.req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("new token: %d", resp.StatusCode)
	}
	if err := f.srv.RevokePrincipal(context.Background(), p.ID); err != nil {
		t.Fatal(err)
	}
	if resp := f.req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 401 {
		t.Fatalf("revoked token: %d", resp.StatusCode)
	}
}

func TestRateLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RateLimit, c.RateBurst = 1, 2 })
	var last *http.Response
	for i := 0; i < 3; i++ {
		last = f.req("GET", "/v1/whoami", f.token, nil, nil)
	}
	if last.StatusCode != 429 || last.Header.Get("Retry-After") == "" || errorCode(t, last) != "rate_limited" {
		t.Fatalf("third request: %d, Retry-After %q", last.StatusCode, last.Header.Get("Retry-After"))
	}
}

// signIn follows a fresh sign-in link and returns the session cookie and
// the page's CSRF token.
func (f *fixture) signIn() (*http.Cookie, string) {
	f.t.Helper()
	cookie, csrf := f.signInAs(f.boot.Owner.ID)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		f.t.Fatalf("session cookie %+v", cookie)
	}
	return cookie, csrf
}

func (f *fixture) noRedirect() *http.Client {
	c := *f.http.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func (f *fixture) postForm(path string, v url.Values, cookie *http.Cookie, origin string) *http.Response {
	f.t.Helper()
	r, _ := http.NewRequest("POST", f.http.URL+path, strings.NewReader(v.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if cookie != nil {
		r.AddCookie(cookie)
	}
	resp, err := f.noRedirect().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (f *fixture) get(path string, cookie *http.Cookie) *http.Response {
	f.t.Helper()
	r, _ := http.NewRequest("GET", f.http.URL+path, nil)
	if cookie != nil {
		r.AddCookie(cookie)
	}
	resp, err := f.noRedirect().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestSignInLinkIsSingleUse(t *testing.T) {
	f := newFixture(t, nil)
	link, _ := NewSignInLink(context.Background(), f.db, f.boot.Owner.ID, f.http.URL, time.Now())
	secret := link[strings.LastIndex(link, "/")+1:]
	if resp := f.postForm("/signin", url.Values{"link": {secret}}, nil, f.http.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use: %d", resp.StatusCode)
	}
	if resp := f.postForm("/signin", url.Values{"link": {secret}}, nil, f.http.URL); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use: %d", resp.StatusCode)
	}
	// A sign-in posted from another site is refused before the link is spent.
	link2, _ := NewSignInLink(context.Background(), f.db, f.boot.Owner.ID, f.http.URL, time.Now())
	secret2 := link2[strings.LastIndex(link2, "/")+1:]
	if resp := f.postForm("/signin", url.Values{"link": {secret2}}, nil, "https://evil.example"); resp.StatusCode != 403 {
		t.Fatalf("cross-origin sign-in: %d", resp.StatusCode)
	}
	if resp := f.postForm("/signin", url.Values{"link": {secret2}}, nil, f.http.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("link after refused cross-origin use: %d", resp.StatusCode)
	}
}

func TestSignInLinkExpires(t *testing.T) {
	now := time.Now()
	f := newFixture(t, func(c *Config) { c.Now = func() time.Time { return now } })
	link, _ := NewSignInLink(context.Background(), f.db, f.boot.Owner.ID, f.http.URL, now.Add(-SignInLinkTTL-time.Second))
	secret := link[strings.LastIndex(link, "/")+1:]
	if resp := f.postForm("/signin", url.Values{"link": {secret}}, nil, f.http.URL); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired link: %d", resp.StatusCode)
	}
}

func TestWebChangesNeedOriginAndCSRF(t *testing.T) {
	f := newFixture(t, nil)
	cookie, csrf := f.signIn()
	if resp := f.get("/inbox", cookie); resp.StatusCode != 200 {
		t.Fatalf("inbox: %d", resp.StatusCode)
	}
	cases := []struct {
		name, origin, csrf string
		want               int
	}{
		{"cross origin", "https://evil.example", csrf, 403},
		{"no origin", "", csrf, 403},
		{"no csrf", f.http.URL, "", 403},
		{"wrong csrf", f.http.URL, "x" + csrf, 403},
	}
	for _, tc := range cases {
		v := url.Values{}
		if tc.csrf != "" {
			v.Set("csrf", tc.csrf)
		}
		resp := f.postForm("/signout", v, cookie, tc.origin)
		if resp.StatusCode != tc.want || errorCode(t, resp) != "bad_origin" {
			t.Errorf("%s: %d", tc.name, resp.StatusCode)
		}
	}
	// The session survived every refused attempt; a proper sign-out ends it.
	resp := f.postForm("/signout", url.Values{"csrf": {csrf}}, cookie, f.http.URL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if resp := f.get("/inbox", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("inbox after sign-out: %d", resp.StatusCode)
	}
}

// sse reads server-sent events.
type sse struct {
	resp *http.Response
	rd   *bufio.Reader
}

type sseEvent struct {
	id, typ, data string
}

func (f *fixture) events(lastID string) *sse {
	f.t.Helper()
	hdr := map[string]string{}
	if lastID != "" {
		hdr["Last-Event-ID"] = lastID
	}
	resp := f.req("GET", "/v1/events", f.token, nil, hdr)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		f.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sse{resp: resp, rd: bufio.NewReader(resp.Body)}
}

func (s *sse) next(t *testing.T) sseEvent {
	t.Helper()
	var e sseEvent
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if e.typ != "" {
				return e
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.data = line[6:]
		}
	}
}

func TestEventsResumeWithoutGaps(t *testing.T) {
	f := newFixture(t, nil)
	s := f.events("")
	for i := 0; i < 5; i++ {
		f.srv.Bus().Publish(event.Event{Type: "test.n", Data: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)})
	}
	var last string
	for i := 0; i < 3; i++ {
		e := s.next(t)
		if e.typ != "test.n" {
			t.Fatalf("event %d type %q", i, e.typ)
		}
		last = e.id
	}
	s.resp.Body.Close() // disconnect after the third
	f.srv.Bus().Publish(event.Event{Type: "test.n", Data: json.RawMessage(`{"i":5}`)})
	s2 := f.events(last)
	want := []string{`{"i":3}`, `{"i":4}`, `{"i":5}`}
	for i, w := range want {
		if e := s2.next(t); e.data != w {
			t.Fatalf("resumed event %d = %q, want %q", i, e.data, w)
		}
	}
}

func TestEventsFilteredByOwner(t *testing.T) {
	f := newFixture(t, nil)
	s := f.events("")
	f.srv.Bus().Publish(event.Event{Type: "private", Owner: "someone-else"})
	f.srv.Bus().Publish(event.Event{Type: "mine", Owner: f.boot.Agent.ID})
	if e := s.next(t); e.typ != "mine" {
		t.Fatalf("first visible event %q", e.typ)
	}
}

// mcpSession connects the official SDK client over streamable HTTP.
func (f *fixture) mcpSession(token, version string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.http.URL + "/mcp", HTTPClient: hc}, opts)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestMCPRuntimeStatus(t *testing.T) {
	for _, version := range []string{"", "2025-06-18"} {
		t.Run("version="+version, func(t *testing.T) {
			f := newFixture(t, nil)
			cs, err := f.mcpSession(f.token, version)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			list, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var found *mcp.Tool
			for _, tl := range list.Tools {
				if tl.Name == "runtime_status" {
					found = tl
				}
			}
			if found == nil {
				t.Fatal("runtime_status not listed")
			}
			raw, _ := json.Marshal(found.Annotations)
			for _, k := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
				if !strings.Contains(string(raw), `"`+k+`"`) {
					t.Errorf("annotation %s not set explicitly: %s", k, raw)
				}
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "runtime_status", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			b, _ := json.Marshal(res.StructuredContent)
			if !strings.Contains(string(b), f.boot.Agent.ID) || !strings.Contains(string(b), `"kind":"agent"`) {
				t.Fatalf("status = %s", b)
			}
		})
	}
}

func TestMCPRefusesBadTokens(t *testing.T) {
	f := newFixture(t, nil)
	ran := make(chan struct{}, 1)
	f.srv.Tools().Register(tool.Tool{Name: "probe", Handler: func(context.Context, tool.Call) (*tool.Result, error) {
		ran <- struct{}{}
		return &tool.Result{}, nil
	}})
	for _, tok := range []string{"", "asnt_wrong"} {
		resp := f.req("POST", "/mcp", tok, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"probe","arguments":{}}}`),
			map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
		if resp.StatusCode != 401 {
			t.Errorf("token %q: status %d", tok, resp.StatusCode)
		}
	}
	if _, err := f.mcpSession("asnt_wrong", ""); err == nil {
		t.Error("SDK client connected with a wrong token")
	}
	select {
	case <-ran:
		t.Fatal("a tool ran for an unauthenticated request")
	default:
	}
}

func TestMCPHiddenToolsCallableNotListed(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Tools().Register(tool.Tool{Name: "legacy_alias", Hidden: true, Handler: func(context.Context, tool.Call) (*tool.Result, error) {
		return &tool.Result{Text: "alias ran"}, nil
	}})
	cs, err := f.mcpSession(f.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, _ := cs.ListTools(context.Background(), nil)
	for _, tl := range list.Tools {
		if tl.Name == "legacy_alias" {
			t.Fatal("hidden tool listed")
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "legacy_alias", Arguments: map[string]any{}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "alias ran" {
		t.Fatalf("hidden call: %v %+v", err, res)
	}
}

func TestGracefulShutdownDrainsInFlight(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	boot, _ := EnsureBootstrap(ctx, db, time.Now())
	srv, err := New(ctx, Config{DataDir: dir, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	started, release := make(chan struct{}), make(chan struct{})
	srv.Tools().Register(tool.Tool{Name: "slow", Handler: func(context.Context, tool.Call) (*tool.Result, error) {
		close(started)
		<-release
		return &tool.Result{Text: "finished"}, nil
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()

	f := &fixture{t: t, http: &httptest.Server{URL: "http://" + ln.Addr().String()}}
	cs, err := f.mcpSession(boot.AgentToken, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// An event stream is open too: shutdown must not wait for it.
	evReq, _ := http.NewRequest("GET", f.http.URL+"/v1/events", nil)
	evReq.Header.Set("Authorization", "Bearer "+boot.AgentToken)
	evResp, err := http.DefaultClient.Do(evReq)
	if err != nil {
		t.Fatal(err)
	}
	defer evResp.Body.Close()

	result := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		if err != nil {
			t.Error(err)
		}
		result <- res
	}()
	<-started
	stop() // begin shutdown with the call in flight
	time.Sleep(50 * time.Millisecond)
	close(release)
	res := <-result
	if res == nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "finished" {
		t.Fatalf("in-flight call did not finish: %+v", res)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		conn.Close()
		t.Fatal("still accepting after shutdown")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLogsHoldNoSecrets(t *testing.T) {
	var logs syncBuffer
	f := newFixture(t, func(c *Config) {
		c.Demo = true
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cookie, csrf := f.signIn()
	f.req("GET", "/v1/whoami", f.token, nil, nil)
	f.req("GET", "/v1/whoami", "asnt_wrong_token_value", nil, nil)
	f.postForm("/signout", url.Values{"csrf": {csrf}}, cookie, f.http.URL)
	cs, err := f.mcpSession(f.token, "")
	if err != nil {
		t.Fatal(err)
	}
	cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "controls_execute", Arguments: map[string]any{
		"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "apiKey"}, "value": "sk-live-secret"}})
	cs.Close()
	out := logs.String()
	if !strings.Contains(out, "signed in") {
		t.Fatalf("expected some logs, got %q", out)
	}
	for _, secret := range []string{f.token, cookie.Value, csrf, "asnt_wrong_token_value", "sk-live-secret", "sk-demo"} {
		if strings.Contains(out, secret) {
			t.Errorf("a log line holds a secret (%.12s…)", secret)
		}
	}
}

package server_test

import (
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

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/tool"
)

func TestHealthAndWhoami(t *testing.T) {
	f := assenttest.Start(t, nil)
	resp := f.Req("GET", "/v1/health", "", nil, nil)
	var h map[string]string
	json.NewDecoder(resp.Body).Decode(&h)
	if h["status"] != "ok" || h["store"] != string(f.Backend) || h["version"] == "" {
		t.Fatalf("health = %v", h)
	}
	resp = f.Req("GET", "/v1/whoami", f.Token, nil, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), f.Boot.Agent.ID) {
		t.Fatalf("whoami = %d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), f.Token) {
		t.Fatal("whoami leaks the token")
	}
}

func TestAuthFailures(t *testing.T) {
	f := assenttest.Start(t, nil)
	for _, tc := range []struct {
		name, token string
	}{
		{"none", ""},
		{"wrong", "asnt_nope"},
	} {
		resp := f.Req("GET", "/v1/whoami", tc.token, nil, nil)
		if resp.StatusCode != 401 || assenttest.ErrorCode(t, resp) != "sign_in_required" {
			t.Errorf("%s token: status %d", tc.name, resp.StatusCode)
		}
	}
	// Revocation takes effect at once.
	tok, p, err := auth.IssueToken(context.Background(), f.DB, "service", "svc", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if resp := f.Req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("new token: %d", resp.StatusCode)
	}
	if err := f.Srv.RevokePrincipal(context.Background(), p.ID); err != nil {
		t.Fatal(err)
	}
	if resp := f.Req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 401 {
		t.Fatalf("revoked token: %d", resp.StatusCode)
	}
}

func TestRateLimit(t *testing.T) {
	f := assenttest.Start(t, func(c *server.Config) { c.RateLimit, c.RateBurst = 1, 2 })
	var last *http.Response
	for i := 0; i < 3; i++ {
		last = f.Req("GET", "/v1/whoami", f.Token, nil, nil)
	}
	if last.StatusCode != 429 || last.Header.Get("Retry-After") == "" || assenttest.ErrorCode(t, last) != "rate_limited" {
		t.Fatalf("third request: %d, Retry-After %q", last.StatusCode, last.Header.Get("Retry-After"))
	}
}

func TestSignInLinkIsSingleUse(t *testing.T) {
	f := assenttest.Start(t, nil)
	link, _ := auth.NewSignInLink(context.Background(), f.DB.Sessions(), f.Boot.Owner.ID, f.HTTP.URL, time.Now())
	secret := link[strings.LastIndex(link, "/")+1:]
	if resp := f.PostForm("/signin", url.Values{"link": {secret}}, nil, f.HTTP.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use: %d", resp.StatusCode)
	}
	if resp := f.PostForm("/signin", url.Values{"link": {secret}}, nil, f.HTTP.URL); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use: %d", resp.StatusCode)
	}
	// A sign-in posted from another site is refused before the link is spent.
	link2, _ := auth.NewSignInLink(context.Background(), f.DB.Sessions(), f.Boot.Owner.ID, f.HTTP.URL, time.Now())
	secret2 := link2[strings.LastIndex(link2, "/")+1:]
	if resp := f.PostForm("/signin", url.Values{"link": {secret2}}, nil, "https://evil.example"); resp.StatusCode != 403 {
		t.Fatalf("cross-origin sign-in: %d", resp.StatusCode)
	}
	if resp := f.PostForm("/signin", url.Values{"link": {secret2}}, nil, f.HTTP.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("link after refused cross-origin use: %d", resp.StatusCode)
	}
}

func TestSignInLinkExpires(t *testing.T) {
	now := time.Now()
	f := assenttest.Start(t, func(c *server.Config) { c.Now = func() time.Time { return now } })
	link, _ := auth.NewSignInLink(context.Background(), f.DB.Sessions(), f.Boot.Owner.ID, f.HTTP.URL, now.Add(-auth.SignInLinkTTL-time.Second))
	secret := link[strings.LastIndex(link, "/")+1:]
	if resp := f.PostForm("/signin", url.Values{"link": {secret}}, nil, f.HTTP.URL); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired link: %d", resp.StatusCode)
	}
}

func TestWebChangesNeedOriginAndCSRF(t *testing.T) {
	f := assenttest.Start(t, nil)
	cookie, csrf := f.SignIn()
	if resp := f.Get("/inbox", cookie); resp.StatusCode != 200 {
		t.Fatalf("inbox: %d", resp.StatusCode)
	}
	cases := []struct {
		name, origin, csrf string
		want               int
	}{
		{"cross origin", "https://evil.example", csrf, 403},
		{"no origin", "", csrf, 403},
		{"no csrf", f.HTTP.URL, "", 403},
		{"wrong csrf", f.HTTP.URL, "x" + csrf, 403},
	}
	for _, tc := range cases {
		v := url.Values{}
		if tc.csrf != "" {
			v.Set("csrf", tc.csrf)
		}
		resp := f.PostForm("/signout", v, cookie, tc.origin)
		if resp.StatusCode != tc.want || assenttest.ErrorCode(t, resp) != "bad_origin" {
			t.Errorf("%s: %d", tc.name, resp.StatusCode)
		}
	}
	// The session survived every refused attempt; a proper sign-out ends it.
	resp := f.PostForm("/signout", url.Values{"csrf": {csrf}}, cookie, f.HTTP.URL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if resp := f.Get("/inbox", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("inbox after sign-out: %d", resp.StatusCode)
	}
}

func TestEventsResumeWithoutGaps(t *testing.T) {
	f := assenttest.Start(t, nil)
	s := f.Events("")
	for i := 0; i < 5; i++ {
		f.Srv.Events().Publish(event.Event{Type: "test.n", Data: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)})
	}
	var last string
	for i := 0; i < 3; i++ {
		e := s.Next(t)
		if e.Type != "test.n" {
			t.Fatalf("event %d type %q", i, e.Type)
		}
		last = e.ID
	}
	s.Resp.Body.Close() // disconnect after the third
	f.Srv.Events().Publish(event.Event{Type: "test.n", Data: json.RawMessage(`{"i":5}`)})
	s2 := f.Events(last)
	want := []string{`{"i":3}`, `{"i":4}`, `{"i":5}`}
	for i, w := range want {
		if e := s2.Next(t); e.Data != w {
			t.Fatalf("resumed event %d = %q, want %q", i, e.Data, w)
		}
	}
}

func TestEventsFilteredByOwner(t *testing.T) {
	f := assenttest.Start(t, nil)
	s := f.Events("")
	f.Srv.Events().Publish(event.Event{Type: "private", Owner: "someone-else"})
	f.Srv.Events().Publish(event.Event{Type: "mine", Owner: f.Boot.Agent.ID})
	if e := s.Next(t); e.Type != "mine" {
		t.Fatalf("first visible event %q", e.Type)
	}
}

func TestMCPRuntimeStatus(t *testing.T) {
	for _, version := range []string{"", "2025-06-18"} {
		t.Run("version="+version, func(t *testing.T) {
			f := assenttest.Start(t, nil)
			cs, err := f.MCPSession(f.Token, version)
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
			if !strings.Contains(string(b), f.Boot.Agent.ID) || !strings.Contains(string(b), `"kind":"agent"`) {
				t.Fatalf("status = %s", b)
			}
		})
	}
}

func TestMCPRefusesBadTokens(t *testing.T) {
	f := assenttest.Start(t, nil)
	ran := make(chan struct{}, 1)
	f.Srv.Tools().Register(tool.Tool{Name: "probe", Handler: func(context.Context, tool.Call) (*tool.Result, error) {
		ran <- struct{}{}
		return &tool.Result{}, nil
	}})
	for _, tok := range []string{"", "asnt_wrong"} {
		resp := f.Req("POST", "/mcp", tok, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"probe","arguments":{}}}`),
			map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
		if resp.StatusCode != 401 {
			t.Errorf("token %q: status %d", tok, resp.StatusCode)
		}
	}
	if _, err := f.MCPSession("asnt_wrong", ""); err == nil {
		t.Error("SDK client connected with a wrong token")
	}
	select {
	case <-ran:
		t.Fatal("a tool ran for an unauthenticated request")
	default:
	}
}

func TestMCPHiddenToolsCallableNotListed(t *testing.T) {
	f := assenttest.Start(t, nil)
	f.Srv.Tools().Register(tool.Tool{Name: "legacy_alias", Hidden: true, Handler: func(context.Context, tool.Call) (*tool.Result, error) {
		return &tool.Result{Text: "alias ran"}, nil
	}})
	cs, err := f.MCPSession(f.Token, "")
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
	boot, _ := auth.EnsureBootstrap(ctx, db, time.Now())
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db})
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

	f := &assenttest.Kit{T: t, HTTP: &httptest.Server{URL: "http://" + ln.Addr().String()}}
	cs, err := f.MCPSession(boot.AgentToken, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// An event stream is open too: shutdown must not wait for it.
	evReq, _ := http.NewRequest("GET", f.HTTP.URL+"/v1/events", nil)
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
	f := assenttest.StartDemo(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cookie, csrf := f.SignIn()
	f.Req("GET", "/v1/whoami", f.Token, nil, nil)
	f.Req("GET", "/v1/whoami", "asnt_wrong_token_value", nil, nil)
	f.PostForm("/signout", url.Values{"csrf": {csrf}}, cookie, f.HTTP.URL)
	cs, err := f.MCPSession(f.Token, "")
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
	for _, secret := range []string{f.Token, cookie.Value, csrf, "asnt_wrong_token_value", "sk-live-secret", "sk-demo"} {
		if strings.Contains(out, secret) {
			t.Errorf("a log line holds a secret (%.12s…)", secret)
		}
	}
}

// Renamed fields are sent under their new spelling only; the old one was
// removed (docs/http.md, "JSON field names").
func TestRenamedFieldsHaveOneSpelling(t *testing.T) {
	f := assenttest.Start(t, nil)
	_, who, raw := f.API("GET", "/v1/whoami", f.Token, nil)
	if _, old := who["createdAt"]; who["created_at"] == nil || old || who["supervisors"] == nil || who["id"] != f.Boot.Agent.ID {
		t.Fatalf("whoami = %s", raw)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	st, isErr := assenttest.CallTool(t, cs, "runtime_status", map[string]any{})
	if _, old := st["uptimeSeconds"]; isErr || st["uptime_seconds"] == nil || old {
		t.Fatalf("runtime_status = %v", st)
	}
}

// TestSessionCookieIsTheHosts: the cookie name embedders read is the one
// the server sets.
func TestSessionCookieIsTheHosts(t *testing.T) {
	if server.SessionCookie != server.HostSessionCookie {
		t.Fatalf("server.SessionCookie = %q, the host sets %q", server.SessionCookie, server.HostSessionCookie)
	}
}

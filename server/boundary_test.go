package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func TestSafeBack(t *testing.T) {
	for _, tc := range []struct{ back, want string }{
		{"/screens/s_1", "/screens/s_1"},
		{"/flows/instances/i_1?x=1#top", "/flows/instances/i_1?x=1#top"},
		{"/", "/"},
		{"", "/inbox"},
		{"inbox", "/inbox"},
		{"//evil.example", "/inbox"},
		{"//evil.example/inbox", "/inbox"},
		{`/\evil.example`, "/inbox"},
		{`/a\b`, "/inbox"},
		{"/\t/evil.example", "/inbox"},
		{"/\n/evil.example", "/inbox"},
		{"https://evil.example/", "/inbox"},
		{"javascript:alert(1)", "/inbox"},
		{"http:/inbox", "/inbox"},
		{"/" + strings.Repeat("a", 3000), "/inbox"},
	} {
		if got := safeBack(tc.back, "/inbox"); got != tc.want {
			t.Errorf("safeBack(%q) = %q, want %q", tc.back, got, tc.want)
		}
	}
}

func FuzzSafeBack(f *testing.F) {
	for _, s := range []string{"/inbox", "//evil.example", `/\evil.example`, "/%2F%2Fevil", "https://x", "/a?b=//c", "/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, back string) {
		got := safeBack(back, "/inbox")
		if got != back && got != "/inbox" {
			t.Fatalf("safeBack(%q) = %q: neither the input nor the fallback", back, got)
		}
		if got == "/inbox" {
			return
		}
		// What is kept resolves, against this site, to this site.
		base, _ := url.Parse("https://assent.example/inbox")
		ref, err := url.Parse(got)
		if err != nil {
			t.Fatalf("kept %q, which does not parse: %v", got, err)
		}
		if u := base.ResolveReference(ref); u.Host != "assent.example" || u.Scheme != "https" {
			t.Fatalf("kept %q, which leads to %s", got, u)
		}
		if strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\t\r\n") {
			t.Fatalf("kept %q", got)
		}
	})
}

func TestNoticeIsOneShotAndPerSession(t *testing.T) {
	f := newFixture(t, nil)
	mine, _ := f.signIn()
	theirs, _ := f.signIn()
	req := func(c *http.Cookie) *http.Request {
		r := httptest.NewRequest("GET", "/inbox", nil)
		r.AddCookie(c)
		return r
	}
	f.srv.setNotice(nil, req(mine), "Approved.")
	if got := f.srv.takeNotice(nil, req(theirs)); got != "" {
		t.Fatalf("another session saw %q", got)
	}
	if got := f.srv.takeNotice(nil, req(mine)); got != "Approved." {
		t.Fatalf("notice = %q", got)
	}
	if got := f.srv.takeNotice(nil, req(mine)); got != "" {
		t.Fatalf("notice shown twice: %q", got)
	}
	// Without a session nothing is kept.
	f.srv.setNotice(nil, httptest.NewRequest("GET", "/", nil), "x")
	if n := len(f.srv.notices.m); n != 0 {
		t.Fatalf("%d notices kept for no session", n)
	}
	// Shown in the inbox, once.
	f.srv.setNotice(nil, req(mine), "Declined pay.")
	if page := readAll(f.get("/inbox", mine)); !strings.Contains(page, "Declined pay.") {
		t.Fatal("the inbox does not show the notice")
	}
	if page := readAll(f.get("/inbox", mine)); strings.Contains(page, "Declined pay.") {
		t.Fatal("the inbox shows the notice again")
	}
}

func TestNoticeBoxBounded(t *testing.T) {
	b := newNoticeBox()
	now := time.Now()
	for i := 0; i < maxNotices+100; i++ {
		b.put(string(rune(i)), "m", now)
	}
	if n := len(b.m); n > maxNotices {
		t.Fatalf("%d notices kept, bound %d", n, maxNotices)
	}
	b.put("k", "m", now)
	if got := b.take("k", now.Add(noticeTTL+time.Second)); got != "" {
		t.Fatalf("expired notice shown: %q", got)
	}
}

func TestLimiterSet(t *testing.T) {
	l := newLimiterSet(1, 3)
	now := time.Now()
	for i := 0; i < 3; i++ {
		if d := l.reserve("a", now); d != 0 {
			t.Fatalf("attempt %d limited (%s)", i, d)
		}
	}
	if d := l.reserve("a", now); d <= 0 {
		t.Fatal("the fourth attempt in a burst of three was allowed")
	}
	if d := l.reserve("b", now); d != 0 {
		t.Fatal("another key was limited")
	}
	if d := l.reserve("a", now.Add(2*time.Second)); d != 0 {
		t.Fatal("the bucket did not refill")
	}
}

func TestRunScopeAllows(t *testing.T) {
	mux := http.NewServeMux()
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, p := range []string{"GET /v1/whoami", "GET /v1/events", "POST /v1/runs", "GET /v1/runs/{id}", "GET /v1/runs/{id}/logs",
		"POST /v1/runs/{id}/controls", "POST /v1/runs/{id}/controls/claim", "POST /v1/runs/{id}/controls/{cid}/handled",
		"POST /v1/runs/{id}/trace", "POST /v1/runs/{id}/kill", "/mcp", "POST /v1/forms/{formId}/controls", "POST /api/mutate"} {
		mux.Handle(p, nop)
	}
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/v1/runs/alpha/controls/claim", true},
		{"POST", "/v1/runs/alpha/controls/c1/handled", true},
		{"POST", "/v1/runs/alpha/trace", true},
		{"GET", "/v1/runs/alpha", true},
		{"GET", "/v1/runs/alpha/logs", true},
		{"GET", "/v1/whoami", true},
		{"POST", "/v1/runs/beta/controls/claim", false},
		{"POST", "/v1/runs/beta/trace", false},
		{"POST", "/v1/runs/alpha/controls", false},
		{"POST", "/v1/runs/alpha/kill", false},
		{"POST", "/v1/runs", false},
		{"GET", "/v1/events", false},
		{"POST", "/mcp", false},
		{"GET", "/mcp", false},
		{"POST", "/v1/forms/f/controls", false},
		{"POST", "/api/mutate", false},
		{"GET", "/v1/nothing", false},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		_, pattern := mux.Handler(r)
		if got := runScopeAllows(pattern, r, []string{"alpha"}); got != tc.want {
			t.Errorf("%s %s (pattern %q) allowed = %v, want %v", tc.method, tc.path, pattern, got, tc.want)
		}
	}
}

func TestRunTokenRefusedOnMCP(t *testing.T) {
	f := newFixture(t, nil)
	tok, _, err := IssueToken(context.Background(), f.db, store.KindService, "run:r1",
		[]string{grantRunOwner + f.boot.Agent.ID, grantRunScope + "r1/g1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"", "2025-06-18"} {
		if _, err := f.mcpSession(tok, version); err == nil {
			t.Fatalf("version %q: a run-scoped token opened an MCP session", version)
		}
	}
	resp := f.req("POST", "/mcp", tok, strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusForbidden || errorCode(t, resp) != "forbidden" {
		t.Fatalf("run token on /mcp: %d", resp.StatusCode)
	}
}

func TestMCPSessionCap(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxSessions = 4 })
	before := runtime.NumGoroutine()
	var open []io.Closer
	for i := 0; i < 12; i++ {
		cs, err := f.mcpSession(f.token, "2025-06-18")
		if err != nil {
			// Every session the client keeps holds a notification stream,
			// so once the cap is reached the newest is refused.
			if !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many") {
				t.Fatalf("session %d: %v", i, err)
			}
			continue
		}
		open = append(open, cs)
	}
	if n := f.srv.mcp.sessions.count(f.boot.Agent.ID); n > 4 {
		t.Fatalf("%d live sessions, cap 4", n)
	}
	for _, c := range open {
		c.Close()
	}
	// Ending the sessions releases what they held.
	deadline := time.Now().Add(10 * time.Second)
	for f.srv.mcp.sessions.count(f.boot.Agent.ID) > 0 || runtime.NumGoroutine() > before+2 {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if time.Now().After(deadline) {
			t.Fatalf("after closing: %d sessions, %d goroutines (before %d)", f.srv.mcp.sessions.count(f.boot.Agent.ID), runtime.NumGoroutine(), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRevokeEndsWebSessionStream(t *testing.T) {
	f := newFixture(t, nil)
	cookie, _ := f.signIn()
	r, _ := http.NewRequest("GET", f.http.URL+"/v1/events", nil)
	r.AddCookie(cookie)
	resp, err := f.http.Client().Do(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", err, resp)
	}
	defer resp.Body.Close()
	if err := f.db.RevokePrincipal(context.Background(), f.boot.Owner.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, resp.Body)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		resp.Body.Close()
		<-done
		t.Fatal("the person's event stream outlived the revocation")
	}
	if n := f.srv.live.len(f.boot.Owner.ID); n != 0 {
		t.Fatalf("%d holds left for the revoked principal", n)
	}
}

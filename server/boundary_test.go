package server_test

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

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

func FuzzSafeBack(f *testing.F) {
	for _, s := range []string{"/inbox", "//evil.example", `/\evil.example`, "/%2F%2Fevil", "https://x", "/a?b=//c", "/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, back string) {
		got := host.SafeBack(back, "/inbox")
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
	f := assenttest.Start(t, nil)
	mine, _ := f.SignIn()
	theirs, _ := f.SignIn()
	req := func(c *http.Cookie) *http.Request {
		r := httptest.NewRequest("GET", "/inbox", nil)
		r.AddCookie(c)
		return r
	}
	f.Srv.SetNotice(nil, req(mine), "Approved.")
	if got := f.Srv.TakeNotice(nil, req(theirs)); got != "" {
		t.Fatalf("another session saw %q", got)
	}
	if got := f.Srv.TakeNotice(nil, req(mine)); got != "Approved." {
		t.Fatalf("notice = %q", got)
	}
	if got := f.Srv.TakeNotice(nil, req(mine)); got != "" {
		t.Fatalf("notice shown twice: %q", got)
	}
	// Without a session nothing is kept.
	f.Srv.SetNotice(nil, httptest.NewRequest("GET", "/", nil), "x")
	if n := f.Srv.PendingNotices(); n != 0 {
		t.Fatalf("%d notices kept for no session", n)
	}
	// Shown in the inbox, once.
	f.Srv.SetNotice(nil, req(mine), "Declined pay.")
	if page := assenttest.ReadAll(f.Get("/inbox", mine)); !strings.Contains(page, "Declined pay.") {
		t.Fatal("the inbox does not show the notice")
	}
	if page := assenttest.ReadAll(f.Get("/inbox", mine)); strings.Contains(page, "Declined pay.") {
		t.Fatal("the inbox shows the notice again")
	}
}

func TestRunTokenRefusedOnMCP(t *testing.T) {
	f := assenttest.Start(t, nil)
	tok, _, err := auth.IssueToken(context.Background(), f.DB, store.KindService, "run:r1",
		[]string{host.GrantRunOwner + f.Boot.Agent.ID, host.GrantRunScope + "r1/g1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"", "2025-06-18"} {
		if _, err := f.MCPSession(tok, version); err == nil {
			t.Fatalf("version %q: a run-scoped token opened an MCP session", version)
		}
	}
	resp := f.Req("POST", "/mcp", tok, strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusForbidden || assenttest.ErrorCode(t, resp) != "forbidden" {
		t.Fatalf("run token on /mcp: %d", resp.StatusCode)
	}
}

func TestMCPSessionCap(t *testing.T) {
	f := assenttest.Start(t, func(c *server.Config) { c.MaxSessions = 4 })
	before := runtime.NumGoroutine()
	var open []io.Closer
	for i := 0; i < 12; i++ {
		cs, err := f.MCPSession(f.Token, "2025-06-18")
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
	if n := f.Srv.MCPSessions(f.Boot.Agent.ID); n > 4 {
		t.Fatalf("%d live sessions, cap 4", n)
	}
	for _, c := range open {
		c.Close()
	}
	// Ending the sessions releases what they held.
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if n, g := f.Srv.MCPSessions(f.Boot.Agent.ID), runtime.NumGoroutine(); n > 0 || g > before+2 {
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			c.Errorf("after closing: %d sessions, %d goroutines (before %d)", n, g, before)
		}
	}, "the closed sessions' resources released")
}

func TestRevokeEndsWebSessionStream(t *testing.T) {
	f := assenttest.Start(t, nil)
	cookie, _ := f.SignIn()
	r, _ := http.NewRequest("GET", f.HTTP.URL+"/v1/events", nil)
	r.AddCookie(cookie)
	resp, err := f.HTTP.Client().Do(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", err, resp)
	}
	defer resp.Body.Close()
	if err := f.DB.Principals().RevokePrincipal(context.Background(), f.Boot.Owner.ID); err != nil {
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
	if n := f.Srv.Held(f.Boot.Owner.ID); n != 0 {
		t.Fatalf("%d holds left for the revoked principal", n)
	}
}

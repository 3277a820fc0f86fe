package host

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
		if got := SafeBack(tc.back, "/inbox"); got != tc.want {
			t.Errorf("safeBack(%q) = %q, want %q", tc.back, got, tc.want)
		}
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

package screens_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server/screens"
)

func TestNotFoundPage(t *testing.T) {
	f := assenttest.Start(t, nil)
	cookie, _ := f.SignIn()
	tests := []struct {
		name   string
		path   string
		cookie *http.Cookie
		want   []string
	}{
		{"signed in", "/no/such/page", cookie, []string{"Page not found", `href="/"`, `<nav aria-label="Main">`, `/static/app.css`}},
		{"signed out", "/nothing-here", nil, []string{"Page not found", `href="/"`, `/static/app.css`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := f.Get(tt.path, tt.cookie)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if tt.cookie == nil && strings.Contains(string(b), `<nav aria-label="Main">`) {
				t.Error("a signed-out visitor sees the navigation")
			}
		})
	}
	// API clients keep getting the JSON error.
	resp := f.Req("GET", "/v1/no-such-thing", f.Token, nil, nil)
	if resp.StatusCode != http.StatusNotFound || assenttest.ErrorCode(t, resp) != "not_found" {
		t.Fatalf("API 404: %d", resp.StatusCode)
	}
	// A known path asked with the wrong method still says which it takes.
	resp = f.Req("DELETE", "/v1/runs", f.Token, nil, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), "GET") || assenttest.ErrorCode(t, resp) != "method_not_allowed" {
		t.Fatalf("wrong method: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestHighlightIsDrawnWithThePage: a page opened, or redrawn, while an
// agent's highlight is on names the field and the time it has left, so a
// person who was not subscribed when the command came still sees it.
func TestHighlightIsDrawnWithThePage(t *testing.T) {
	f, _ := screenFixture(t)
	stream := "root = Card([email])\n$email = \"\"\nemail = Input($email, label=\"Email\")\n"
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, _ := assenttest.CallTool(t, cs, "show_screen", map[string]any{"screen": stream})
	id := out["screen"].(string)
	cookie, _ := f.SignIn()
	partial := func() string {
		resp := f.Get("/screens/"+id+"?partial=1", cookie)
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if strings.Contains(partial(), "data-marks") {
		t.Fatal("a screen nobody highlighted carries marks")
	}
	if out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "highlight", "identity": map[string]any{"formId": id, "controlId": "email"}, "durationMs": 30000}); isErr {
		t.Fatalf("highlight: %v", out)
	}
	p := partial()
	i := strings.Index(p, `data-marks="`)
	if i < 0 {
		t.Fatalf("the drawn region names no highlight: %s", p)
	}
	raw := p[i+len(`data-marks="`):]
	raw = html.UnescapeString(raw[:strings.IndexByte(raw, '"')])
	var marks map[string]int64
	if err := json.Unmarshal([]byte(raw), &marks); err != nil {
		t.Fatalf("marks %q: %v", raw, err)
	}
	if left := marks["n-email"]; left <= 0 || left > 30000 {
		t.Fatalf("marks = %v; want n-email with up to 30 s left", marks)
	}
}

func TestMarkedFieldsDropEndedHighlights(t *testing.T) {
	now := time.Now()
	got := screens.MarkedFields(map[string]time.Time{"a": now.Add(time.Second), "b": now.Add(-time.Millisecond), "c": now}, now)
	if len(got) != 1 || got["n-a"] != 1000 {
		t.Fatalf("screens.MarkedFields = %v; want only n-a with 1000 ms", got)
	}
}

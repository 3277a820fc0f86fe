package screens_test

import (
	"context"
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

// TestConfirmSentenceShowsMoneyAsScreen: the sentence shows the amount
// the way the screen shows it, while the tool still gets the number.
func TestConfirmSentenceShowsMoneyAsScreen(t *testing.T) {
	tests := []struct {
		name, stream, want string
	}{
		{"currency text", "root = Card([amount, pay])\n$amount = 42.5\namount = Text($amount, format=\"currency\", currency=\"USD\")\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.confirmed\", params={amount: $amount})\n", "Pay $42.50?"},
		{"euro", "root = Card([amount, pay])\n$amount = 1250\namount = Text($amount, format=\"currency\", currency=\"EUR\")\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.confirmed\", params={amount: $amount})\n", "Pay €1,250.00?"},
		{"plain text", "root = Card([amount, pay])\n$amount = 42.5\namount = Text($amount)\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.confirmed\", params={amount: $amount})\n", "Pay 42.5?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, recs := screenFixture(t)
			id, err := f.Srv.Screens().Show(context.Background(), f.Boot.Agent, tt.stream, screens.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cookie, csrf := f.SignIn()
			r, _ := http.NewRequest("POST", f.HTTP.URL+"/screens/"+id+"/press", strings.NewReader(`{"button":"pay"}`))
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
			if out["status"] != "confirm" || out["sentence"] != tt.want {
				t.Fatalf("press: %v, want sentence %q", out, tt.want)
			}
			if recs["pay.confirmed"].count() != 0 {
				t.Fatal("the press ran the tool before the person confirmed")
			}
		})
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

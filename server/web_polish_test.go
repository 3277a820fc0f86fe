package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestNotFoundPage(t *testing.T) {
	f := newFixture(t, nil)
	cookie, _ := f.signIn()
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
			resp := f.get(tt.path, tt.cookie)
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
	resp := f.req("GET", "/v1/no-such-thing", f.token, nil, nil)
	if resp.StatusCode != http.StatusNotFound || errorCode(t, resp) != "not_found" {
		t.Fatalf("API 404: %d", resp.StatusCode)
	}
	// A known path asked with the wrong method still says which it takes.
	resp = f.req("DELETE", "/v1/runs", f.token, nil, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), "GET") || errorCode(t, resp) != "method_not_allowed" {
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
			id, err := f.srv.ShowScreen(context.Background(), f.boot.Agent, tt.stream, ScreenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cookie, csrf := f.signIn()
			r, _ := http.NewRequest("POST", f.http.URL+"/screens/"+id+"/press", strings.NewReader(`{"button":"pay"}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Origin", f.http.URL)
			r.Header.Set("X-CSRF-Token", csrf)
			r.AddCookie(cookie)
			resp, err := f.http.Client().Do(r)
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

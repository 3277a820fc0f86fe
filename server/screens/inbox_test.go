package screens_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
)

// waitScreen asks inbox_wait, at once, what became of the screen's press.
func (k *viewPressKit) waitScreen() map[string]any {
	k.t.Helper()
	out, isErr := assenttest.CallTool(k.t, k.cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"screen": k.id}}, "timeout_ms": 0})
	items, _ := out["items"].([]any)
	if isErr || len(items) != 1 {
		k.t.Fatalf("inbox_wait: %v", out)
	}
	return items[0].(map[string]any)
}

// inbox returns the person's inbox page.
func (k *viewPressKit) inbox() string {
	k.t.Helper()
	resp := k.f.Get("/inbox", k.cookie)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b)
}

// decide posts the person's Confirm or Decline from the inbox.
func (k *viewPressKit) decide(press, decision string) map[string]any {
	k.t.Helper()
	form := url.Values{"csrf": {k.csrf}}
	r, _ := http.NewRequest("POST", k.f.HTTP.URL+"/web/screens/"+k.id+"/presses/"+press+"/"+decision, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Accept", "application/json")
	r.Header.Set("Origin", k.f.HTTP.URL)
	r.Header.Set("X-CSRF-Token", k.csrf)
	r.AddCookie(k.cookie)
	resp, err := k.f.HTTP.Client().Do(r)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// TestViewPressInTheInbox: a press a view files waits in the person's
// inbox with the app's sentence, the screen and the agent; declining it
// there runs nothing, confirming it on the screen's page runs the tool
// once, and the agent learns each outcome from inbox_wait.
func TestViewPressInTheInbox(t *testing.T) {
	k := newViewPressKit(t)
	if o := k.waitScreen(); o["status"] != "pending" {
		t.Fatalf("before any press: %v", o)
	}
	first := pressID(t, k.press(honest()))
	page := k.inbox()
	// The inbox shows none of the page's fields, so the payee the page
	// shows in a field is named on the card too.
	for _, want := range []string{"Actions to confirm", "Send $10.00?", "Alice Example", "Send money", "Pressed Send on a screen", "/web/screens/" + k.id + "/presses/" + first + "/confirm"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the inbox lacks %q", want)
		}
	}
	if o := k.waitScreen(); o["status"] != "pending" {
		t.Fatalf("while the press waits: %v", o)
	}
	if out := k.decide(first, "decline"); out["status"] != "cancelled" {
		t.Fatalf("declining in the inbox: %v", out)
	}
	if strings.Contains(k.inbox(), first) {
		t.Fatal("a declined press is still in the inbox")
	}
	if o := k.waitScreen(); o["status"] != "declined" || k.rec.count() != 0 {
		t.Fatalf("after the person declined: %v, the tool ran %d times", o, k.rec.count())
	}
	// Answered twice, a press is no longer waiting.
	if out := k.decide(first, "confirm"); out["status"] == "done" || k.rec.count() != 0 {
		t.Fatalf("confirming a declined press: %v", out)
	}
	second := pressID(t, k.press(honest()))
	if out := k.answer("confirm", second); out["status"] != "done" {
		t.Fatalf("confirming on the page: %v", out)
	}
	if o := k.waitScreen(); o["status"] != "approved" || k.rec.count() != 1 {
		t.Fatalf("after the person confirmed: %v, the tool ran %d times", o, k.rec.count())
	}
	if out := k.decide(second, "shrug"); out["status"] != nil {
		t.Fatalf("an unknown decision: %v", out)
	}
}

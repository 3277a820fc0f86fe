package screens_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/screens"
)

// restartScreens stops f's server and starts another on its store and data
// directory, as a new process would after the first one died, and
// registers the application's tools on it again.
func restartScreens(t *testing.T, f *assenttest.Kit) (*server.Server, *httptest.Server, map[string]*recorder) {
	t.Helper()
	next := f.Restart(nil)
	srv, hs := next.Srv, next.HTTP
	recs := map[string]*recorder{"pay.now": {}, "pay.confirmed": {}}
	recs["pay.now"].res = confirm.Result{Value: map[string]any{"receipt": "r1"}}
	for name, rec := range recs {
		st := screens.Tool{Tool: confirm.Tool{Name: name, Params: json.RawMessage(testPayParams), Handler: rec.handle}}
		if name == "pay.confirmed" {
			st.Confirm = confirm.Template("Pay {amount}?")
		}
		if err := srv.Screens().RegisterTool(st); err != nil {
			t.Fatal(err)
		}
	}
	return srv, hs, recs
}

// TestScreensSurviveRestart: a screen shown before a restart is listed,
// drawn with the person's entries, followed from where its feed was, and
// pressable after it; its pending confirmation is confirmed, the proposal on
// its field applied, and an idempotency key answered again without running
// anything.
func TestScreensSurviveRestart(t *testing.T) {
	f, recs := screenFixture(t)
	ctx := context.Background()
	stream := "root = Card([status, amount, note, pay])\nstatus = Text(\"open\")\n$amount = 12.5\namount = Text($amount)\n$note = \"\"\n" +
		"note = Input($note, label=\"Note\")\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"pay.confirmed\", params={amount: $amount, note: $note})\n"
	id, err := f.Srv.Screens().Show(ctx, f.Boot.Agent, stream, screens.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cookie, csrf := f.SignIn()
	post := func(base, path, body string) map[string]any {
		t.Helper()
		r, _ := http.NewRequest("POST", base+"/screens/"+id+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Origin", base)
		r.Header.Set("X-CSRF-Token", csrf)
		r.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	// The person types a note and presses Pay; the press waits.
	if out := post(f.HTTP.URL, "/state", `{"field":"note","value":"table 4","touched":true}`); out["version"] == nil {
		t.Fatalf("state: %v", out)
	}
	press := post(f.HTTP.URL, "/press", `{"button":"pay"}`)
	if press["status"] != "confirm" || press["sentence"] != "Pay 12.5?" {
		t.Fatalf("press: %v", press)
	}
	// The application updates the screen twice; the agent proposes a note.
	for _, text := range []string{`status = Text("pending")`, `status = Text("due")`} {
		if res, err := f.Srv.Screens().Update(ctx, id, text); err != nil || !res.Applied {
			t.Fatalf("update %q: %+v %v", text, res, err)
		}
	}
	note := control.Identity{FormID: id, ControlID: "note"}
	if res := f.Srv.Controls().Exec(ctx, f.Boot.Agent, control.Command{Action: control.Stage, Identity: note, Value: "table 5"},
		control.CommandContext{Source: control.SourceAgent}); !res.OK {
		t.Fatalf("stage: %+v", res)
	}
	// A mutation with an idempotency key.
	idem := map[string]string{"Idempotency-Key": "k-restart-1"}
	body := `{"tool":"pay.now","params":{"amount":3}}`
	first := mutateReq(f, f.Token, body, idem)
	firstBody := assenttest.ReadAll(first)
	if first.StatusCode != http.StatusOK || recs["pay.now"].count() != 1 {
		t.Fatalf("mutate: %d %s", first.StatusCode, firstBody)
	}

	srv, hs, recs2 := restartScreens(t, f)

	// Listed and drawn with the person's entry and the updates.
	if code, _, raw := apiOn(t, hs, "GET", "/v1/screens", f.Token, ""); code != http.StatusOK || !strings.Contains(raw, id) {
		t.Fatalf("list after restart: %d %s", code, raw)
	}
	page := getPage(t, hs, "/screens/"+id+"?press="+press["press"].(string), cookie)
	for _, want := range []string{`value="table 4"`, "due", "Pay 12.5?", "table 5"} {
		if !strings.Contains(page, want) {
			t.Errorf("the screen page after restart lacks %q", want)
		}
	}
	// The live feed resumes by seq.
	req, _ := http.NewRequest("GET", hs.URL+"/api/live?screen="+id+"&after=1", nil)
	req.Header.Set("Authorization", "Bearer "+f.Token)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ev := assenttest.NewSSE(resp).Next(t)
	resp.Body.Close()
	if ev.Type != "update" || !strings.Contains(ev.Data, `"seq":2`) || !strings.Contains(ev.Data, "due") {
		t.Errorf("live after restart: %+v", ev)
	}

	// The pending confirmation is confirmed once, with the params the
	// person was asked about.
	if c := post(hs.URL, "/confirm", fmt.Sprintf(`{"press":%q}`, press["press"])); c["status"] != "done" {
		t.Fatalf("confirm after restart: %v", c)
	}
	if c := post(hs.URL, "/confirm", fmt.Sprintf(`{"press":%q}`, press["press"])); c["status"] == "done" {
		t.Fatal("a restored press ran twice")
	}
	if rec := recs2["pay.confirmed"]; rec.count() != 1 || fmt.Sprint(rec.calls[0]) != "map[amount:12.5 note:table 4]" {
		t.Fatalf("handler calls after restart: %v", rec.calls)
	}

	// The proposal on the screen's field came back with the screen.
	snap, ok := srv.Controls().Registry().Get(ctx, note)
	if !ok || snap.State.Staged == nil || snap.State.StagedValue != "table 5" {
		t.Fatalf("the field's proposal after restart: %+v", snap.State)
	}
	form := url.Values{"csrf": {csrf}, "formId": {id}, "controlId": {"note"}}
	r, _ := http.NewRequest("POST", hs.URL+"/web/controls/apply", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", hs.URL)
	r.Header.Set("Accept", "application/json")
	r.AddCookie(cookie)
	if resp, err := hs.Client().Do(r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("apply after restart: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if snap, _ := srv.Controls().Registry().Get(ctx, note); snap.State.Value != "table 5" {
		t.Errorf("note after apply = %v", snap.State.Value)
	}

	// The idempotency key answers again without running the tool.
	hr, _ := http.NewRequest("POST", hs.URL+"/api/mutate", strings.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+f.Token)
	hr.Header.Set("Idempotency-Key", "k-restart-1")
	again, err := hs.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	againBody := assenttest.ReadAll(again)
	if again.Header.Get("Idempotent-Replayed") != "true" || againBody != firstBody || recs2["pay.now"].count() != 0 {
		t.Errorf("retry after restart: %q %s (handler ran %d times)", again.Header.Get("Idempotent-Replayed"), againBody, recs2["pay.now"].count())
	}
}

// apiOn sends a request with a bearer token to hs.
func apiOn(t *testing.T, hs *httptest.Server, method, path, token, body string) (int, map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw := assenttest.ReadAll(resp)
	var out map[string]any
	_ = json.Unmarshal([]byte(raw), &out)
	return resp.StatusCode, out, raw
}

// getPage fetches a web page from hs as the signed-in person.
func getPage(t *testing.T, hs *httptest.Server, path string, cookie *http.Cookie) string {
	t.Helper()
	req, _ := http.NewRequest("GET", hs.URL+path, nil)
	req.AddCookie(cookie)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// The demo's screens are kept by the store, so a restart shows them again
// only when they are missing, not once more.
func TestDemoScreensAreNotShownTwice(t *testing.T) {
	f := assenttest.StartDemo(t)
	count := func(k *assenttest.Kit) int {
		t.Helper()
		cookie, _ := k.SignIn()
		r := httptest.NewRequest("GET", "/v1/screens", nil)
		r.AddCookie(cookie)
		w := httptest.NewRecorder()
		k.Srv.Handler().ServeHTTP(w, r)
		var out struct {
			Screens []map[string]any `json:"screens"`
		}
		if err := json.NewDecoder(w.Body).Decode(&out); err != nil {
			t.Fatalf("list: %d %v", w.Code, err)
		}
		n := 0
		for _, sc := range out.Screens {
			if sc["owner"] == "demo" {
				n++
			}
		}
		return n
	}
	first := count(f)
	if first != 4 {
		t.Fatalf("the demo shows %d screens, want 4", first)
	}
	k := f
	for i := range 2 {
		k = k.Restart(nil)
		if n := count(k); n != first {
			t.Fatalf("start %d: the demo shows %d screens, want %d", i+2, n, first)
		}
	}
}

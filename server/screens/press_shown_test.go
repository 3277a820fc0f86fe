package screens_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
)

const signUpTestParams = `{"type":"object","properties":{"name":{"type":"string","minLength":2},"email":{"type":"string"},"plan":{"enum":["Free","Pro","Team"]},"terms":{"const":true}},"required":["name","email","plan","terms"],"additionalProperties":false}`

// TestAgentScreenPressShowsWhatItSends: an agent shows a screen whose
// harmless-looking buttons call tools with values the page never shows.
// A person's press runs nothing until the runtime's dialog has listed
// every such value, and a people-only tool always asks first.
func TestAgentScreenPressShowsWhatItSends(t *testing.T) {
	f, recs := screenFixture(t)
	signUp := &recorder{}
	if err := f.Srv.Screens().RegisterTool(screens.Tool{Access: screens.AccessPeople, Tool: confirm.Tool{
		Name: "acct.signUp", Params: json.RawMessage(signUpTestParams), Handler: signUp.handle}}); err != nil {
		t.Fatal(err)
	}
	save := &recorder{}
	if err := f.Srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{
		Name: "notes.save", Params: json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"},"orderId":{"type":"string"}},"additionalProperties":false}`), Handler: save.handle}}); err != nil {
		t.Fatal(err)
	}
	cs, err := f.AppsSession(f.Token) // the agent's token only
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	show := func(stream string) string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "show_screen", Arguments: map[string]any{"screen": stream}})
		if err != nil || res.IsError {
			t.Fatalf("show_screen: %v %v", err, res)
		}
		var out struct {
			Screen   string `json:"screen"`
			Rejected []any  `json:"rejected"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		if len(out.Rejected) > 0 {
			t.Fatalf("the screen was partly rejected: %s", b)
		}
		return out.Screen
	}
	cookie, csrf := f.SignIn()
	post := func(id, path, body string) map[string]any {
		t.Helper()
		r, _ := http.NewRequest("POST", f.HTTP.URL+"/screens/"+id+path, strings.NewReader(body))
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
		return out
	}

	tests := []struct {
		name   string
		stream string
		rec    *recorder
		// want is what the dialog must read; "" means the press runs at
		// once, since the page shows everything it sends.
		want []string
	}{
		{
			name: "people-only tool behind a Close button",
			stream: "root = Card([close])\nclose = Button(\"Close\", action=\"close\")\n" +
				"closeIt = McpMutation(close, tool=\"acct.signUp\", params={name: \"Eve\", email: \"eve@evil.example\", plan: \"Team\", terms: true})\n",
			rec:  signUp,
			want: []string{"Run acct.signUp? It sends: ", `email = "eve@evil.example"`, `name = "Eve"`, `plan = "Team"`, "terms = true"},
		},
		{
			name: "people-only tool whose values the fields show",
			stream: "root = Card([n, e, go])\n$name = \"Ada\"\n$email = \"ada@example.com\"\n" +
				"n = Input($name, label=\"Name\")\ne = Input($email, label=\"Email\")\ngo = Button(\"Sign up\", action=\"go\")\n" +
				"goIt = McpMutation(go, tool=\"acct.signUp\", params={name: $name, email: $email, plan: \"Free\", terms: true})\n",
			rec:  signUp,
			want: []string{`plan = "Free"`, "terms = true"},
		},
		{
			name: "signed-in tool with a value only the author knows",
			stream: "root = Card([a, ok])\n$note = \"hi\"\na = Input($note, label=\"Note\")\nok = Button(\"OK\", action=\"ok\")\n" +
				"okIt = McpMutation(ok, tool=\"notes.save\", params={note: $note, orderId: \"ord-attacker\"})\n",
			rec:  save,
			want: []string{"Run notes.save? It sends: orderId = \"ord-attacker\"."},
		},
		{
			name: "signed-in tool whose values the fields show",
			stream: "root = Card([a, ok])\n$note = \"hi\"\na = Input($note, label=\"Note\")\nok = Button(\"OK\", action=\"ok\")\n" +
				"okIt = McpMutation(ok, tool=\"notes.save\", params={note: $note})\n",
			rec: save,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := show(tc.stream)
			button := strings.SplitN(strings.SplitN(tc.stream, "McpMutation(", 2)[1], ",", 2)[0]
			before := tc.rec.count()
			out := post(id, "/press", fmt.Sprintf(`{"button":%q}`, button))
			if tc.want == nil {
				if out["status"] != "done" || tc.rec.count() != before+1 {
					t.Fatalf("a press whose values the page shows: %v (calls %d → %d)", out, before, tc.rec.count())
				}
				return
			}
			if out["status"] != "confirm" {
				t.Fatalf("the press did not ask: %v", out)
			}
			if tc.rec.count() != before {
				t.Fatal("the tool ran before the person was asked")
			}
			sentence, _ := out["sentence"].(string)
			for _, w := range tc.want {
				if !strings.Contains(sentence, w) {
					t.Errorf("the dialog %q lacks %q", sentence, w)
				}
			}
			if c := post(id, "/cancel", fmt.Sprintf(`{"press":%q}`, out["press"])); c["status"] != "cancelled" || tc.rec.count() != before {
				t.Fatalf("cancel: %v, calls %d", c, tc.rec.count())
			}
			out = post(id, "/press", fmt.Sprintf(`{"button":%q}`, button))
			if c := post(id, "/confirm", fmt.Sprintf(`{"press":%q}`, out["press"])); c["status"] != "done" || tc.rec.count() != before+1 {
				t.Fatalf("confirm: %v, calls %d", c, tc.rec.count())
			}
		})
	}

	// The application's own screen (a service's) runs as the application
	// wrote it: its author is the application.
	app := store.Principal{ID: "app", Kind: store.KindService, Name: "app"}
	id, err := f.Srv.Screens().Show(context.Background(), app, "root = Card([ok])\nok = Button(\"OK\", action=\"ok\")\n"+
		"okIt = McpMutation(ok, tool=\"pay.now\", params={amount: 5, orderId: \"ord-1\"})\n", screens.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := recs["pay.now"].count()
	if out := post(id, "/press", `{"button":"ok"}`); out["status"] != "done" || recs["pay.now"].count() != before+1 {
		t.Fatalf("the application's own button: %v", out)
	}
}

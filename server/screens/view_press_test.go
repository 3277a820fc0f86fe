package screens_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server/screens"
)

// transferParams is the schema of the transfer tool of these tests.
const transferParams = `{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0},"to":{"type":"string","minLength":1},"note":{"type":"string"},"ref":{"type":"string"},"memo":{"type":"string"}},"required":["amount","to"],"additionalProperties":false}`

// transferStream shows the payee as text ($to), a note the person types,
// a reference the page never shows ($ref) and a literal memo.
const transferStream = `root = Card([title, to, amount, note, send])
title = Heading("Send money")
$to = "Alice Example"
to = Text($to)
$amount = 10
amount = Text($amount, format="currency", currency="USD")
$note = ""
note = Input($note, label="Note")
$ref = "inv-1"
send = Button("Send", action="send")
sendIt = McpMutation(send, tool="bank.transfer", params={amount: $amount, to: $to, note: $note, ref: $ref, memo: "rent"})
`

// viewPressKit is a server with the transfer tool, its screen shown by
// the agent over MCP, and a person signed in.
type viewPressKit struct {
	t        *testing.T
	f        *assenttest.Kit
	rec      *recorder
	cs       *mcp.ClientSession
	id       string
	cookie   *http.Cookie
	csrf     string
	sequence int
}

func newViewPressKit(t *testing.T) *viewPressKit {
	t.Helper()
	f := assenttest.Start(t, nil)
	k := &viewPressKit{t: t, f: f, rec: &recorder{}}
	if err := f.Srv.Screens().RegisterTool(screens.Tool{Currency: map[string]string{"amount": "USD"}, Tool: confirm.Tool{
		Name: "bank.transfer", Params: json.RawMessage(transferParams),
		Confirm: confirm.Template("Send {amount}?"), Handler: k.rec.handle,
	}}); err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	k.cs = cs
	out, _ := assenttest.CallTool(t, cs, "show_screen", map[string]any{"screen": transferStream})
	k.id, _ = out["screen"].(string)
	if k.id == "" {
		t.Fatalf("show_screen: %v", out)
	}
	k.cookie, k.csrf = f.SignIn()
	return k
}

// press calls bank.transfer as a view does, naming the screen and its
// Send button, and returns the result's structured content.
func (k *viewPressKit) press(args map[string]any) map[string]any {
	k.t.Helper()
	k.sequence++
	res, err := k.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bank.transfer", Arguments: args,
		Meta: mcp.Meta{screens.MetaScreen: k.id, screens.MetaButton: "send", screens.MetaIdempotencyKey: fmt.Sprintf("k-%d", k.sequence)}})
	if err != nil {
		k.t.Fatal(err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if !res.IsError {
		k.t.Fatalf("a view's press of a confirmed tool ran: %v", sc)
	}
	return sc
}

// pressID returns the press a filed press's url names.
func pressID(t *testing.T, sc map[string]any) string {
	t.Helper()
	u, _ := sc["url"].(string)
	i := strings.Index(u, "?press=")
	if sc["code"] != "confirmation_required" || i < 0 {
		t.Fatalf("no press was filed: %v", sc)
	}
	return u[i+len("?press="):]
}

// page returns the screen's page, opened as the person at path's query.
func (k *viewPressKit) page(query string) string {
	k.t.Helper()
	resp := k.f.Get("/screens/"+k.id+query, k.cookie)
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

var pressSentenceAttr = regexp.MustCompile(`data-press-sentence="([^"]*)"`)

// question returns what the page's dialog asks about the press, or "".
func (k *viewPressKit) question(press string) string {
	k.t.Helper()
	m := pressSentenceAttr.FindStringSubmatch(k.page("?press=" + press))
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// answer posts the person's answer (confirm or cancel) to a press.
func (k *viewPressKit) answer(what, press string) map[string]any {
	k.t.Helper()
	return k.post(what, fmt.Sprintf(`{"press":%q}`, press))
}

// post sends body to the screen's page action what, as the person.
func (k *viewPressKit) post(what, body string) map[string]any {
	k.t.Helper()
	r, _ := http.NewRequest("POST", k.f.HTTP.URL+"/screens/"+k.id+"/"+what, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
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

// honest is what the view's engine sends for the screen as shown.
func honest() map[string]any {
	return map[string]any{"amount": 10, "to": "Alice Example", "note": "", "ref": "inv-1", "memo": "rent"}
}

func with(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

func without(m map[string]any, k string) map[string]any {
	delete(m, k)
	return m
}

// TestViewPressParamsComeFromTheScreen: a view's call is the agent's, so
// a press it files takes every param from the screen as assent holds it.
// A value for a param no field of the page shows (text on the page, a
// hidden value, a literal) that is not the screen's is refused
// press_params_mismatch, and nothing is filed or run.
func TestViewPressParamsComeFromTheScreen(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		code string
		want []any
	}{
		{"a payee the page shows as text", with(honest(), "to", "Mallory"), "press_params_mismatch", []any{"to"}},
		{"a value the page does not show", with(honest(), "ref", "inv-666"), "press_params_mismatch", []any{"ref"}},
		{"a literal", with(honest(), "memo", "gift"), "press_params_mismatch", []any{"memo"}},
		{"the amount", with(honest(), "amount", 1000), "press_params_mismatch", []any{"amount"}},
		{"two of them", with(with(honest(), "to", "Mallory"), "ref", "x"), "press_params_mismatch", []any{"ref", "to"}},
		{"a param left out", without(honest(), "ref"), "press_params_mismatch", []any{"ref"}},
		// The tool's schema is checked first.
		{"a param the schema does not know", with(honest(), "extra", "x"), "invalid_params", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newViewPressKit(t)
			sc := k.press(tt.args)
			got, _ := sc["params"].([]any)
			if sc["code"] != tt.code || sc["url"] != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("the press was answered %v; want %s naming %v", sc, tt.code, tt.want)
			}
			if strings.Contains(k.page(""), "data-press-waiting") || k.rec.count() != 0 {
				t.Fatal("a refused press waits or ran")
			}
		})
	}
}

// TestViewPressEntryLandsInTheField: what the view sends for a field the
// page shows is an entry in that field on the screen assent holds, so the
// page shows it before the person confirms, and the tool gets exactly the
// screen's values.
func TestViewPressEntryLandsInTheField(t *testing.T) {
	k := newViewPressKit(t)
	press := pressID(t, k.press(with(honest(), "note", "for March")))
	page := k.page("?press=" + press)
	if !strings.Contains(page, `value="for March"`) {
		t.Fatalf("the note the press sends is not in the page's field:\n%s", page)
	}
	if c := k.answer("confirm", press); c["status"] != "done" {
		t.Fatalf("confirm: %v", c)
	}
	if k.rec.count() != 1 || fmt.Sprint(k.rec.calls[0]) != "map[amount:10 memo:rent note:for March ref:inv-1 to:Alice Example]" {
		t.Fatalf("the tool ran with %v", k.rec.calls)
	}
}

// TestViewPressLeavesThePersonsEntry: a value the person entered in a
// field on assent's page is theirs; a view's call that sends another is
// refused, and the field keeps the person's value.
func TestViewPressLeavesThePersonsEntry(t *testing.T) {
	k := newViewPressKit(t)
	if out := k.post("state", `{"field":"note","value":"mine","touched":true}`); out["error"] != nil {
		t.Fatalf("the person's entry: %v", out)
	}
	sc := k.press(with(honest(), "note", "the agent's"))
	if got, _ := sc["params"].([]any); sc["code"] != "press_params_mismatch" || fmt.Sprint(got) != "[note]" {
		t.Fatalf("a view's press over the person's entry was answered %v; want press_params_mismatch naming note", sc)
	}
	if page := k.page(""); !strings.Contains(page, `value="mine"`) {
		t.Fatalf("the person's note is gone from the page:\n%s", page)
	}
	// Sending what the person entered files the press.
	pressID(t, k.press(with(honest(), "note", "mine")))
}

// TestPressDialogShowsWhatTheFieldsDoNot: the runtime's dialog says, after
// the app's sentence, every value the tool gets that the sentence does not
// name and no field of the page shows.
func TestPressDialogShowsWhatTheFieldsDoNot(t *testing.T) {
	k := newViewPressKit(t)
	press := pressID(t, k.press(honest()))
	want := `Send $10.00? Also sent: memo = "rent"; ref = "inv-1"; to = "Alice Example".`
	if got := k.question(press); got != want {
		t.Fatalf("the dialog asks %q; want %q", got, want)
	}
}

// TestPressThatNoLongerMatchesTheScreenDoesNotRun: a press whose params
// are not what the page's fields show now (here, a later press from a view
// changed the note) is neither asked nor run, so the person never confirms
// values other than those they see.
func TestPressThatNoLongerMatchesTheScreenDoesNotRun(t *testing.T) {
	k := newViewPressKit(t)
	first := pressID(t, k.press(with(honest(), "note", "pay Mallory instead")))
	second := pressID(t, k.press(with(honest(), "note", "for March")))
	if q := k.question(first); q != "" {
		t.Fatalf("the page asks about a press the screen no longer shows: %q", q)
	}
	if c := k.answer("confirm", first); c["status"] != "refused" || k.rec.count() != 0 {
		t.Fatalf("confirming a press that no longer matches the screen: %v, the tool ran %d times", c, k.rec.count())
	}
	if c := k.answer("confirm", second); c["status"] != "done" || k.rec.count() != 1 || k.rec.calls[0]["note"] != "for March" {
		t.Fatalf("confirming the press the screen shows: %v, calls %v", c, k.rec.calls)
	}
}

// TestConfirmSentenceCurrencyIsTheApps: a tool that names the currency of
// a param has its sentence show that currency, whatever the screen shows;
// an amount is never rounded in the sentence.
func TestConfirmSentenceCurrencyIsTheApps(t *testing.T) {
	screenOf := func(amount, currency string) string {
		return "root = Card([amount, pay])\n$amount = " + amount + "\namount = Text($amount, format=\"currency\", currency=\"" + currency + "\")\npay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"shop.pay\", params={amount: $amount})\n"
	}
	tests := []struct {
		name, stream string
		currency     map[string]string
		want         string
	}{
		{"the app's currency, not the screen's", screenOf("4250", "JPY"), map[string]string{"amount": "USD"}, "Pay $4,250.00?"},
		{"the app's currency, unrounded", screenOf("42.505", "USD"), map[string]string{"amount": "USD"}, "Pay 42.505 USD?"},
		{"a currency for another param", screenOf("4250", "JPY"), map[string]string{"fee": "USD"}, "Pay 4250?"},
		{"no currency named: the number, whatever the screen shows", screenOf("42.5", "USD"), nil, "Pay 42.5?"},
		{"no currency named: a screen in yen", screenOf("4250", "JPY"), nil, "Pay 4250?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := assenttest.Start(t, nil)
			err := f.Srv.Screens().RegisterTool(screens.Tool{Currency: tt.currency, Tool: confirm.Tool{
				Name: "shop.pay", Params: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"},"fee":{"type":"number"}},"required":["amount"]}`),
				Confirm: confirm.Template("Pay {amount}?"), Handler: (&recorder{}).handle,
			}})
			if err != nil {
				t.Fatal(err)
			}
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
		})
	}
}

// TestToolCurrencyMustBeACode: a tool's Currency names ISO 4217 codes.
func TestToolCurrencyMustBeACode(t *testing.T) {
	f := assenttest.Start(t, nil)
	for i, cur := range []map[string]string{{"amount": "usd"}, {"amount": "$"}, {"": "USD"}} {
		err := f.Srv.Screens().RegisterTool(screens.Tool{Currency: cur, Tool: confirm.Tool{
			Name: fmt.Sprintf("shop.pay%d", i), Confirm: confirm.Template("Pay {amount}?"), Handler: (&recorder{}).handle,
		}})
		if err == nil {
			t.Errorf("currency %v was taken", cur)
		}
	}
}

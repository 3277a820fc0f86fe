package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server/screens"
)

const transferStream = `root = Card([title, to, amount, actions])
title = Heading("Send money")
$to = "Alice Example"
to = Text($to)
$amount = 10
amount = Text($amount, format="currency", currency="USD")
actions = Stack([send])
send = Button("Send", action="send", variant="primary")
sendIt = McpMutation(send, tool="bank.transfer", params={amount: $amount, to: $to})
`

// TestBoundaryViewPressParamsNotShown: the agent shows a screen whose
// Send button sends {amount: $amount, to: $to} with to = "Alice Example",
// then calls the app-only tool bank.transfer itself over MCP (a plain
// session, no MCP Apps declared) with _meta naming its screen and button
// and params of its own: to = "Mallory". assent files a press whose
// dialog says only "Send $10.00?" on a page that shows "Alice Example";
// the person confirms, and the handler runs with to = "Mallory", a value
// the person never saw.
func TestBoundaryViewPressParamsNotShown(t *testing.T) {
	a := newApp(t, false)
	c := &calls{}
	if err := a.Srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{
		Name:    "bank.transfer",
		Params:  json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0},"to":{"type":"string","minLength":1}},"required":["amount","to"],"additionalProperties":false}`),
		Confirm: confirm.Template("Send {amount}?"),
		Handler: c.handle,
	}}); err != nil {
		t.Fatal(err)
	}
	cs := a.agent()
	shown, _ := assenttest.CallTool(t, cs, "show_screen", map[string]any{"screen": transferStream})
	sid, _ := shown["screen"].(string)
	if sid == "" {
		t.Fatalf("show_screen: %v", shown)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:      "bank.transfer",
		Arguments: map[string]any{"amount": 10, "to": "Mallory"},
		Meta:      mcp.Meta{"io.assent/screen": sid, "io.omni-ir/button": "send"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	u, _ := out["url"].(string)
	i := strings.Index(u, "?press=")
	if i < 0 {
		t.Logf("no press filed (holds): %v", out)
		return
	}
	press := u[i+len("?press="):]

	cookie, csrf := a.SignIn()
	page := a.webPage("/screens/"+sid+"?press="+press, cookie)
	if strings.Contains(page, "Mallory") {
		t.Logf("the page shows the agent's payee (holds)")
		return
	}
	if !strings.Contains(page, "Alice Example") || !strings.Contains(page, `data-press-sentence="Send $10.00?"`) {
		t.Fatalf("unexpected page:\n%s", page)
	}
	// The person presses Confirm in the runtime's dialog.
	resp := a.Req("POST", "/screens/"+sid+"/confirm", "", strings.NewReader(`{"press":"`+press+`"}`), map[string]string{
		"Content-Type": "application/json", "Origin": a.HTTP.URL, "X-CSRF-Token": csrf, "Cookie": cookie.Name + "=" + cookie.Value,
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %d %s", resp.StatusCode, assenttest.ReadAll(resp))
	}
	for _, p := range c.list() {
		if p["to"] == "Mallory" {
			t.Fatalf("the person saw a screen sending to \"Alice Example\" and the sentence %q; the tool ran with %v", "Send $10.00?", p)
		}
	}
}

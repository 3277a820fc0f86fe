package screens_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/screen/view"
	"github.com/assent-run/assent/server/screens"
)

// TestScreenViewResource: show_screen names the view, which resources/list
// lists and resources/read serves as one MCP Apps document.
func TestScreenViewResource(t *testing.T) {
	f, _ := screenFixture(t)
	cs, err := f.AppsSession(f.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uri string
	for _, tl := range tools.Tools {
		if tl.Name == "show_screen" {
			ui, _ := tl.Meta["ui"].(map[string]any)
			uri, _ = ui["resourceUri"].(string)
		}
	}
	if uri != view.URI || !strings.HasPrefix(uri, "ui://") {
		t.Fatalf("show_screen's _meta.ui.resourceUri = %q; want %q", uri, view.URI)
	}
	list, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range list.Resources {
		found = found || r.URI == uri && r.MIMEType == view.MIMEType
	}
	if !found {
		t.Fatalf("resources/list lacks %s as %s: %+v", uri, view.MIMEType, list.Resources)
	}
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != view.MIMEType {
		t.Fatalf("read: %+v", res.Contents)
	}
	page := res.Contents[0].Text
	for _, want := range []string{"<!doctype html>", `"pay.now"`, `"pay.confirmed"`, ".o-screen"} {
		if !strings.Contains(page, want) {
			t.Errorf("the view lacks %q", want)
		}
	}
}

// TestViewToolIdempotencyKey: a view's press carries a key in _meta; the
// same key runs the tool once, and with other params is refused.
func TestViewToolIdempotencyKey(t *testing.T) {
	f, recs := screenFixture(t)
	cs, err := f.AppsSession(f.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(key any, amount float64) *mcp.CallToolResult {
		t.Helper()
		p := &mcp.CallToolParams{Name: "pay.now", Arguments: map[string]any{"amount": amount}}
		if key != nil {
			p.Meta = mcp.Meta{screens.MetaIdempotencyKey: key, screens.MetaButton: "pay"}
		}
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call("press-1", 1)
	again := call("press-1", 1)
	if first.IsError || again.IsError || recs["pay.now"].count() != 1 {
		t.Fatalf("a replayed key ran the tool %d times (errors %v, %v)", recs["pay.now"].count(), first.IsError, again.IsError)
	}
	sc, _ := again.StructuredContent.(map[string]any)
	if sc["receipt"] != "r1" || sc["button"] != "pay" {
		t.Fatalf("replayed answer: %v", again.StructuredContent)
	}
	for _, tc := range []struct {
		name string
		key  any
		amt  float64
		code string
	}{
		{"same key, other params", "press-1", 2, "idempotency_conflict"},
		{"key of the wrong shape", "has space", 1, "invalid_request"},
		{"key not a string", 7, 1, "invalid_request"},
	} {
		res := call(tc.key, tc.amt)
		sc, _ := res.StructuredContent.(map[string]any)
		if !res.IsError || sc["code"] != tc.code {
			t.Errorf("%s: %v", tc.name, res.StructuredContent)
		}
	}
	if n := recs["pay.now"].count(); n != 1 {
		t.Fatalf("the tool ran %d times; want 1", n)
	}
	// A new key is a new press.
	if res := call("press-2", 1); res.IsError || recs["pay.now"].count() != 2 {
		t.Fatalf("a new key: %v", res.StructuredContent)
	}
}

// TestViewPressOfAConfirmedTool: a view's press of a tool that asks for a
// confirmation runs nothing; it is filed on the caller's own screen, for
// that screen's button of that tool only, and the page a person opens asks
// them with the app's sentence.
func TestViewPressOfAConfirmedTool(t *testing.T) {
	f, recs := screenFixture(t)
	cs, err := f.AppsSession(f.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	stream := "root = Stack([a, b])\n$amt = 5\na = Button(\"Pay\", action=\"pay\")\naIt = McpMutation(a, tool=\"pay.confirmed\", params={amount: $amt})\nb = Button(\"Now\", action=\"now\")\nbIt = McpMutation(b, tool=\"pay.now\", params={amount: $amt})\n"
	out, _ := assenttest.CallTool(t, cs, "show_screen", map[string]any{"screen": stream})
	id := out["screen"].(string)
	press := func(screenID, button string) map[string]any {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay.confirmed", Arguments: map[string]any{"amount": 5},
			Meta: mcp.Meta{screens.MetaScreen: screenID, screens.MetaButton: button, screens.MetaIdempotencyKey: "k-" + screenID + button}})
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		if !res.IsError || sc["code"] != "confirmation_required" {
			t.Fatalf("press %s/%s: %+v", screenID, button, res.StructuredContent)
		}
		return sc
	}
	for _, tc := range []struct{ screen, button string }{{"scr_nope", "a"}, {id, "b"}, {id, "nope"}} {
		if sc := press(tc.screen, tc.button); sc["url"] != nil {
			t.Errorf("a press on %s/%s was filed: %v", tc.screen, tc.button, sc)
		}
	}
	sc := press(id, "a")
	url, _ := sc["url"].(string)
	if sc["sentence"] != "Pay 5?" || !strings.Contains(url, "/screens/"+id+"?press=") {
		t.Fatalf("filed press: %v", sc)
	}
	if n := recs["pay.confirmed"].count(); n != 0 {
		t.Fatalf("the confirmed tool ran %d times", n)
	}
	cookie, _ := f.SignIn()
	resp := f.Get(url[strings.Index(url, "/screens/"):], cookie)
	page, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(page), `data-press-sentence="Pay 5?"`) {
		t.Fatalf("the page does not ask about the press:\n%s", page)
	}
}

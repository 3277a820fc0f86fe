package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/browsertest"
	"github.com/assent-run/assent/store"
)

// cardAnchor is the element id of the inbox card of the item key.
func cardAnchor(key string) string {
	h := sha256.Sum256([]byte(key))
	return "card-" + hex.EncodeToString(h[:8])
}

// In Chromium, a person changes the plan an agent proposed and approves
// it, and the agent, waiting over MCP, hears the change; then ten
// proposals are ticked and approved at once.
func TestInboxBrowserEditAndBatch(t *testing.T) {
	ctx := browsertest.New(t, 90*time.Second)
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "editor")
	link, err := auth.NewSignInLink(context.Background(), f.DB.Sessions(), person.ID, f.URL(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("signin-continue")), chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name"))); err != nil {
		t.Fatalf("sign in: %v", err)
	}

	rev := stage(t, cs, "pro")
	waiting := startWait(cs, map[string]any{"items": []any{map[string]any{"proposal": map[string]any{"formId": "profile", "controlId": "plan"}, "revision": rev}}})
	card := "#" + cardAnchor("control_proposal:profile/plan")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(f.URL()+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS(card+" details.edit summary")),
		chromedp.Click(chromedp.CSS(card+" details.edit summary")),
		chromedp.WaitVisible(chromedp.CSS(card+" details.edit select")),
		chromedp.SetValue(chromedp.CSS(card+" details.edit select"), "team"),
		chromedp.SendKeys(chromedp.CSS(card+" details.edit input[name=note]"), "Team fits the five of us."),
		chromedp.Click(chromedp.CSS(card+" details.edit button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	); err != nil {
		t.Fatalf("edit and approve: %v", err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("notice"))); !strings.Contains(n, "Applied with your changes") {
		t.Errorf("notice after the edit: %q", n)
	}
	if loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("location.pathname + location.hash")); !strings.HasPrefix(loc, "/inbox") {
		t.Errorf("after the decision the page is %q, not the inbox", loc)
	}
	select {
	case w := <-waiting:
		got := w.item(0)
		changed, _ := json.Marshal(got["changed"])
		notes, _ := json.Marshal(got["notes"])
		if w.err != nil || got["status"] != "applied" || !strings.Contains(got["reason"].(string), "approved with changes") || !strings.Contains(string(changed), "team") ||
			!strings.Contains(string(notes), "Team fits the five of us.") {
			t.Fatalf("the agent hears: %v %v", w.err, w.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's wait did not return after the edited approval")
	}

	// Ten proposals, selected at once and approved at once.
	svc, _ := f.Issue(store.KindService, "crm")
	var ctrls []api.HostedControl
	for i := range 10 {
		ctrls = append(ctrls, api.HostedControl{ControlID: "status", Subject: &control.Subject{Type: "order", ID: strconv.Itoa(i)},
			Metadata: control.Metadata{Kind: "select", Label: "Status", Options: []control.Option{{Value: "open", Label: "Open"}, {Value: "shipped", Label: "Shipped"}}},
			Value:    "open"})
	}
	if c, body, _ := f.API("POST", "/v1/forms/orders/controls", svc, api.FormDeclaration{Controls: ctrls}); c != 200 {
		t.Fatalf("declare: %d %v", c, body)
	}
	steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(f.URL() + "/inbox")}
	for i := range 10 {
		id := control.Identity{FormID: "orders", ControlID: "status", Subject: &control.Subject{Type: "order", ID: strconv.Itoa(i)}}
		req := api.ExecuteRequest{Action: control.Stage, Identity: id, Value: json.RawMessage(`"shipped"`)}
		if c, body, _ := f.API("POST", "/v1/controls/execute", f.Token, req); c != 200 {
			t.Fatalf("stage %d: %d %v", i, c, body)
		}
		pick := chromedp.ID("pick-" + cardAnchor("control_proposal:"+id.String()))
		steps = append(steps, chromedp.WaitVisible(pick))
	}
	// The section's "Select all 10 proposed changes" ticks all ten.
	all := chromedp.ID("all-proposals-control_proposal")
	steps = append(steps, chromedp.WaitVisible(all), chromedp.Click(all))
	steps = append(steps, chromedp.Click(chromedp.CSS("#batch-control_proposal button[type=submit]")), chromedp.WaitVisible(chromedp.ID("notice")))
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("tick ten and approve: %v", err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("notice"))); !strings.Contains(n, "Approved 10 of 10 selected") {
		t.Errorf("notice after the batch: %q", n)
	}
	for i := range 10 {
		var snap control.Snapshot
		path := "/v1/controls/orders/status?subjectType=order&subjectId=" + strconv.Itoa(i)
		if c := f.Do("GET", path, f.Token, nil, &snap); c != 200 || snap.State.Value != "shipped" {
			t.Errorf("order %d: %d %v", i, c, snap.State.Value)
		}
	}
}

package rules_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

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

// axeViolations runs axe-core (e2e/axe, set up with `npm ci --prefix
// e2e/axe`) on the open page and returns its violations as text; ok is
// false when axe-core is not installed.
func axeViolations(t *testing.T, ctx context.Context) (found []string, ok bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "e2e", "axe", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		return nil, false
	}
	src, _ := json.Marshal(string(b))
	run := `(async () => { if (!window.axe) { eval(` + string(src) + `); }
		const r = await axe.run(document, {resultTypes: ["violations"]});
		return JSON.stringify(r.violations.map(v => v.id + ": " + v.nodes.map(n => n.target.join(" ")).join(", "))); })()`
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](run, func(p *runtime.EvaluateParams) { yes := true; p.AwaitPromise = &yes }))
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	if err := json.Unmarshal([]byte(raw), &found); err != nil {
		t.Fatalf("axe result %q: %v", raw, err)
	}
	return found, true
}

// In Chromium, a person makes a standing rule from an agent's proposal
// with the card's "Always allow" fold; the agent's next matching change
// goes through under it; the person revokes it on the rules page, read
// at a phone's width, and the following change waits again.
func TestRuleBrowserFromCard(t *testing.T) {
	ctx := browsertest.New(t, 90*time.Second)
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "rosa")
	link, err := auth.NewSignInLink(context.Background(), f.DB.Sessions(), person.ID, f.URL(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("signin-continue")), chromedp.Click(chromedp.ID("signin-continue")),
		chromedp.WaitVisible(chromedp.ID("who-name"))); err != nil {
		t.Fatalf("sign in: %v", err)
	}

	stage(t, cs, "team")
	card := "#" + cardAnchor("control_proposal:profile/plan")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(f.URL()+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS(card+" details.rule summary")),
		chromedp.Click(chromedp.CSS(card+" details.rule summary")),
		chromedp.WaitVisible(chromedp.CSS(card+" details.rule select")),
		chromedp.SetValue(chromedp.CSS(card+" details.rule select"), "30"),
		chromedp.Click(chromedp.CSS(card+" details.rule button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	); err != nil {
		t.Fatalf("approve and always allow: %v", err)
	}
	notice, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("notice")))
	rules, err := f.DB.Rules().ListRules(t.Context(), store.RuleFilter{CreatedBy: person.ID})
	if err != nil || len(rules) != 1 || !strings.Contains(notice, rules[0].ID) || string(rules[0].Values[0]) != `"team"` ||
		time.Until(rules[0].Until) < 29*24*time.Hour {
		t.Fatalf("the rule from the card: %v %+v; notice %q", err, rules, notice)
	}
	rule := rules[0].ID

	// The plan is set back by hand; the agent's next "team" goes through.
	setPlan := func(v string) {
		t.Helper()
		id := control.Identity{FormID: "profile", ControlID: "plan"}
		cc := control.CommandContext{Source: control.SourceUser, Confirmed: true}
		res := f.Srv.Controls().Exec(t.Context(), f.Boot.Owner, control.Command{Action: control.Stage, Identity: id, Value: v}, cc)
		if !res.OK {
			t.Fatalf("stage %s: %+v", v, res)
		}
		if res = f.Srv.Controls().Exec(t.Context(), f.Boot.Owner, control.Command{Action: control.Apply, Identity: id, Revision: res.Snapshot.State.Staged.Revision}, cc); !res.OK {
			t.Fatalf("apply %s: %+v", v, res)
		}
	}
	setPlan("free")
	if got := stage(t, cs, "team"); got.AppliedUnderRule != rule {
		t.Fatalf("the agent's next team: %+v", got)
	}
	setPlan("free")

	// The rules page at a phone's width: no sideways scrolling, and a
	// Revoke button named after the rule.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(f.URL()+"/rules"), chromedp.WaitVisible(chromedp.ID("rule-"+rule))); err != nil {
		t.Fatal(err)
	}
	if w, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Errorf("the rules page is %d px wide at 390 px", w)
	}
	for _, width := range []int64{390, 1280} {
		for _, page := range []string{"/rules", "/inbox"} {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(f.URL()+page), chromedp.WaitReady("main")); err != nil {
				t.Fatal(err)
			}
			found, ok := axeViolations(t, ctx)
			if !ok {
				t.Log("axe-core is not installed (npm ci --prefix e2e/axe); the pages were not checked with it")
				break
			}
			for _, v := range found {
				t.Errorf("%s at %d px: %s", page, width, v)
			}
		}
	}
	name := fmt.Sprintf("Revoke rule: Let %s set profile / plan to team", f.Boot.Agent.Name)
	btn := chromedp.CSS(`#rule-` + rule + ` button[aria-label="` + name + `"]`)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.URL()+"/rules"), chromedp.WaitVisible(btn), chromedp.Click(btn), chromedp.WaitVisible(chromedp.ID("notice"))); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if got := stage(t, cs, "team"); got.AppliedUnderRule != "" || got.Snapshot.State.Staged == nil || got.Snapshot.State.Value != "free" {
		t.Errorf("after revocation: %+v", got)
	}
}

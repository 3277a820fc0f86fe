package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// TestAgentProposesPersonApplies: an agent stages a value over MCP, the
// person's open inbox shows it live, the person applies it in the browser,
// and the agent's own attempt to apply was refused and audited.
func TestAgentProposesPersonApplies(t *testing.T) {
	a := newApp(t, true)
	ctx := browser(t)
	a.signIn(ctx)
	// Stage only once the open inbox follows the event stream.
	if err := chromedp.Do(ctx, chromedp.Query(chromedp.CSS("body[data-live]"))); err != nil {
		t.Fatalf("inbox never connected to the event stream: %v", err)
	}
	agent := a.agent()
	email := map[string]any{"formId": "profile", "controlId": "email"}

	out, isErr := assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "stage", "identity": email, "value": "ada@analytical.engine"})
	if isErr {
		t.Fatalf("stage: %v", out)
	}
	out, isErr = assenttest.CallTool(t, agent, "controls_execute", map[string]any{"action": "apply", "identity": email})
	if !isErr || out["reason"] != "human_confirmation_required" {
		t.Fatalf("agent apply: %v", out)
	}

	// The inbox, already open, updates by itself.
	apply := `#section-proposals form[action="/web/controls/apply"] button`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(apply))); err != nil {
		t.Fatalf("proposal did not appear: %v", err)
	}
	item := text(t, ctx, chromedp.CSS("#section-proposals .item"))
	for _, want := range []string{"Email", "ada@example.com", "ada@analytical.engine", "Proposed by"} {
		if !strings.Contains(item, want) {
			t.Errorf("proposal card lacks %q: %s", want, item)
		}
	}
	screenshot(t, ctx, "proposal")
	// Apply says it is done on the card itself and offers Undo for ten
	// seconds; the inbox keeps the card there meanwhile.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(apply)), chromedp.WaitVisible(chromedp.CSS(`#section-proposals .undo-offer button.undo`))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("apply: %v", err)
	}
	offer := text(t, ctx, chromedp.CSS("#section-proposals .undo-offer"))
	if !strings.Contains(offer, "Applied: Email") || !strings.Contains(offer, "You can undo for") {
		t.Fatalf("the card after apply reads %q", offer)
	}
	if name := eval[string](t, ctx, `document.querySelector("#section-proposals .undo-offer button.undo").textContent`); name != "Undo: Email" {
		t.Fatalf("the Undo button is named %q", name)
	}
	screenshot(t, ctx, "applied")
	value := func() any {
		snap, _ := assenttest.CallTool(t, agent, "controls_inspect", map[string]any{"identity": email})
		return snap["state"].(map[string]any)["value"]
	}
	if v := value(); v != "ada@analytical.engine" {
		t.Fatalf("value after the person's apply = %v", v)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#section-proposals .undo-offer button.undo`))); err != nil {
		t.Fatalf("undo: %v", err)
	}
	waitFor(t, ctx, "the undo", `(document.querySelector("#section-proposals .undo-offer")?.textContent || "").includes("Undone")`)
	if v := value(); v != "ada@example.com" {
		t.Fatalf("value after the person's undo = %v", v)
	}
	recs, err := a.DB.Audit().ListAudit(context.Background(), store.AuditFilter{FormID: "profile"})
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, r := range recs {
		trail = append(trail, r.Source+" "+r.Action+" "+r.Reason)
	}
	want := []string{"agent stage ", "agent apply human_confirmation_required", "user apply ", "user undo "}
	if strings.Join(trail, "|") != strings.Join(want, "|") {
		t.Fatalf("audit trail %q, want %q", trail, want)
	}
}

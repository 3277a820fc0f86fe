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
	for _, want := range []string{"Email", "ada@example.com", "ada@analytical.engine", "agent (agent)"} {
		if !strings.Contains(item, want) {
			t.Errorf("proposal card lacks %q: %s", want, item)
		}
	}
	screenshot(t, ctx, "proposal")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(apply)), chromedp.WaitVisible(chromedp.CSS(`form[action="/web/controls/undo"] button`))); err != nil {
		t.Fatalf("apply: %v", err)
	}
	screenshot(t, ctx, "applied")

	snap, _ := assenttest.CallTool(t, agent, "controls_inspect", map[string]any{"identity": email})
	if v := snap["state"].(map[string]any)["value"]; v != "ada@analytical.engine" {
		t.Fatalf("value after the person's apply = %v", v)
	}
	recs, err := a.DB.Audit().ListAudit(context.Background(), store.AuditFilter{FormID: "profile"})
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, r := range recs {
		trail = append(trail, r.Source+" "+r.Action+" "+r.Reason)
	}
	want := []string{"agent stage ", "agent apply human_confirmation_required", "user apply "}
	if strings.Join(trail, "|") != strings.Join(want, "|") {
		t.Fatalf("audit trail %q, want %q", trail, want)
	}
}

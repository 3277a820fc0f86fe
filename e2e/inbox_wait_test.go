package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// TestDeclineReasonReachesWaitingAgent: the agent asks for the demo
// expense's approval and waits for the decision with inbox_wait; the person
// declines it in the browser with a reason; the waiting call returns
// declined with that reason. Asking for the next step then says so instead
// of sending the agent back to the inbox, and asking again puts a new
// request in front of the person.
func TestDeclineReasonReachesWaitingAgent(t *testing.T) {
	a := newApp(t, true)
	_, person, err := auth.IssueToken(context.Background(), a.DB, store.KindHuman, "approver", []string{"state.write"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	a.signInAs(ctx, person)
	agent := a.agent()

	out, isErr := assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"})
	approval, _ := out["approval"].(map[string]any)
	if isErr || approval == nil {
		t.Fatalf("prescribe: %v", out)
	}
	aprID := approval["id"].(string)

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	waiting := make(chan answer, 1)
	go func() {
		res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "inbox_wait",
			Arguments: map[string]any{"items": []any{map[string]any{"approval": aprID}}, "timeout_ms": 120000}})
		waiting <- answer{res, err}
	}()

	decline := `#section-flow-approvals form[action="/web/flows/approvals/` + aprID + `/decline"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(a.HTTP.URL+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS(decline+` input[name="reason"]`)),
		chromedp.SendKeys(chromedp.CSS(decline+` input[name="reason"]`), "over the travel budget"),
		chromedp.Click(chromedp.CSS(decline+" button")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("decline in the browser: %v", err)
	}

	ans := <-waiting
	if ans.err != nil || ans.res.IsError {
		t.Fatalf("inbox_wait: %v %+v", ans.err, ans.res)
	}
	// The model reads the text content: it carries the outcome.
	text := ans.res.Content[0].(*mcp.TextContent).Text
	var got struct {
		Items []struct {
			Status    string `json:"status"`
			Reason    string `json:"reason"`
			DecidedBy string `json:"decided_by"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil || len(got.Items) != 1 {
		t.Fatalf("text content %q: %v", text, err)
	}
	if it := got.Items[0]; it.Status != "declined" || it.Reason != "over the travel budget" || it.DecidedBy != person.ID {
		t.Fatalf("outcome: %+v", it)
	}

	out, _ = assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001"})
	if next, _ := out["next"].(string); !strings.Contains(next, "over the travel budget") || strings.Contains(next, "must approve") {
		t.Fatalf("prescribe after the decline: %v", out)
	}
	out, _ = assenttest.CallTool(t, agent, "flows_prescribe", map[string]any{"instance": "expense-1001", "ask_again": true})
	again, _ := out["approval"].(map[string]any)
	if again == nil || again["id"] == aprID || again["status"] != "pending" {
		t.Fatalf("ask again: %v", out)
	}
	approve := `#section-flow-approvals form[action="/web/flows/approvals/` + again["id"].(string) + `/approve"] button`
	if err := chromedp.Do(ctx, chromedp.Navigate(a.HTTP.URL+"/inbox"), chromedp.WaitVisible(chromedp.CSS(approve))); err != nil {
		screenshot(t, ctx, "timeout")
		t.Fatalf("the new request is not in the inbox: %v", err)
	}
	screenshot(t, ctx, "asked-again")
}

package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/internal/assenttest"
)

// TestQuestionAnsweredInBrowser: the agent asks a choice question and a
// text question with approvals_request and waits with inbox_wait; the
// person answers both on their cards in the browser, one by its option's
// button, one by typing; the waiting calls return the answers.
func TestQuestionAnsweredInBrowser(t *testing.T) {
	a := newApp(t, false)
	ctx := browser(t)
	a.signIn(ctx)
	agent := a.agent()

	askID := func(args map[string]any) string {
		out, isErr := assenttest.CallTool(t, agent, "approvals_request", args)
		id, _ := out["approval"].(string)
		if isErr || id == "" {
			t.Fatalf("approvals_request: %v", out)
		}
		return id
	}
	choice := askID(map[string]any{"question": "Which account pays INV-2291?", "options": []string{"Operating", "Reserve"}, "reason": "Both have funds."})
	written := askID(map[string]any{"question": "What should the refund note say?", "answer": "text", "deadline_seconds": 3600})

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	waiting := make(chan answer, 1)
	go func() {
		res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "inbox_wait",
			Arguments: map[string]any{"items": []any{map[string]any{"approval": choice}, map[string]any{"approval": written}}, "timeout_ms": 120000}})
		waiting <- answer{res, err}
	}()

	reserve := `#section-questions form:has(input[name="value:answer"][value="Reserve"]) button`
	textForm := `#section-questions form:has(input[type="text"][name="value:answer"])`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(a.HTTP.URL+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS(reserve)),
		chromedp.Click(chromedp.CSS(reserve)),
		chromedp.WaitVisible(chromedp.ID("notice")),
		chromedp.WaitVisible(chromedp.CSS(textForm+` input[type="text"]`)),
		chromedp.SendKeys(chromedp.CSS(textForm+` input[type="text"]`), "Refunded in full, sorry for the wait."),
		chromedp.Click(chromedp.CSS(textForm+" button")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	); err != nil {
		screenshot(t, ctx, "question")
		t.Fatalf("answer in the browser: %v", err)
	}

	ans := <-waiting
	if ans.err != nil || ans.res.IsError {
		t.Fatalf("inbox_wait: %v %+v", ans.err, ans.res)
	}
	var got struct {
		Items []struct {
			Status, Answer string
		} `json:"items"`
	}
	b, _ := json.Marshal(ans.res.StructuredContent)
	if err := json.Unmarshal(b, &got); err != nil || len(got.Items) != 2 {
		t.Fatalf("inbox_wait answer %s: %v", b, err)
	}
	if it := got.Items[0]; it.Status != "answered" || it.Answer != "Reserve" {
		t.Errorf("choice question: %+v", it)
	}
	if it := got.Items[1]; it.Status != "answered" || it.Answer != "Refunded in full, sorry for the wait." {
		t.Errorf("text question: %+v", it)
	}
}

package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
)

// An agent's question from approvals_request is announced like the other
// decisions: a mail to the agent's supervisor whose subject starts with
// the question, and a signed webhook whose card is the question's.
func TestQuestionAnnounced(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setup(t, smtp, hooks)
	cs, err := k.MCPSession(k.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "Which carrier ships order 88?",
		"options": []string{"Post", "Courier"}, "reason": "Two quotes arrived.", "deadline_seconds": 3600})
	id, _ := out["approval"].(string)
	link, _ := out["url"].(string)
	if isErr || id == "" {
		t.Fatalf("approvals_request: %v", out)
	}
	var hook receivedHook
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == id {
				hook = h
				return true
			}
		}
		return false
	}, "webhook about the question")
	d := hook.Body.Data
	if d.Kind != notify.KindQuestion || d.URL != link || !strings.Contains(d.Summary, "Two quotes arrived.") || !strings.Contains(d.Summary, "Courier") {
		t.Errorf("webhook = %+v, want the card %s", d, link)
	}
	m := mailFor(t, smtp, id)
	if m.To != "ada@example.com" || !strings.HasPrefix(m.Subject(), "Answer: Which carrier ships order 88?") {
		t.Errorf("mail to %q, subject %q", m.To, m.Subject())
	}
}

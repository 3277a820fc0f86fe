package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store"
)

// A Flow's approval request and a value an agent staged on a control are
// announced like a command proposal: the demo's expense approval and
// profile change reach the webhook and the owner's mail.
func TestFlowApprovalAnnounced(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k := assenttest.StartDemo(t, func(c *server.Config) {
		c.Notify.SMTP = &notify.SMTP{Addr: smtp.Addr(), From: "assent@example.com"}
		c.Notify.Poll = 50 * time.Millisecond
	})
	ctx := context.Background()
	if err := notifypart.SetEmail(ctx, k.DB.Settings(), k.Boot.Owner.ID, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := k.DB.Notify().AddWebhook(ctx, store.Webhook{ID: "wh_test", URL: hooks.URL, Secret: hooks.Secret, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	seeded, err := k.Demo.Seed(ctx)
	if err != nil || seeded.ApprovalStatus != "pending" {
		t.Fatalf("seed: %+v, %v", seeded, err)
	}
	var hook receivedHook
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == seeded.Approval {
				hook = h
				return true
			}
		}
		return false
	}, "webhook about the approval")
	if hook.Body.Data.Kind != notify.KindFlowApproval || hook.Body.Data.Summary == "" || hook.Body.Data.Agent == "" {
		t.Errorf("webhook = %+v", hook.Body.Data)
	}
	// The agent's proposed profile change (plan → pro) is announced too,
	// with both values.
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.Kind == notify.KindControlProposal && strings.Contains(h.Body.Data.ItemID, "profile") {
				hook = h
				return true
			}
		}
		return false
	}, "webhook about the control proposal")
	if !strings.Contains(hook.Body.Data.Summary, `"pro"`) || !strings.HasPrefix(hook.Body.Data.Title, "Change ") {
		t.Errorf("control proposal webhook = %+v", hook.Body.Data)
	}
	m := mailFor(t, smtp, seeded.Approval)
	if m.To != "ada@example.com" || !strings.HasPrefix(m.Subject(), "Approve 860.00 EUR") {
		t.Errorf("mail to %q, subject %q", m.To, m.Subject())
	}
}

package notify_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store"
)

func TestSettingsPage(t *testing.T) {
	k := assenttest.Start(t, nil)
	ctx := context.Background()
	cookie, csrf := k.SignIn()
	post := func(path string, v url.Values, c *http.Cookie, token string) *http.Response {
		v.Set("csrf", token)
		return k.PostForm(path, v, c, k.URL())
	}

	// A person sets their own address.
	if resp := post("/settings/notifications/email", url.Values{"email": {"ada@example.com"}}, cookie, csrf); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set email: %d", resp.StatusCode)
	}
	if addr, _ := notifypart.Email(ctx, k.DB.Settings(), k.Boot.Owner.ID); addr != "ada@example.com" {
		t.Fatalf("address = %q", addr)
	}
	post("/settings/notifications/email", url.Values{"email": {"not an address"}}, cookie, csrf)
	if addr, _ := notifypart.Email(ctx, k.DB.Settings(), k.Boot.Owner.ID); addr != "ada@example.com" {
		t.Fatalf("a bad address replaced the good one: %q", addr)
	}

	// The owner adds a webhook and sees its secret once.
	post("/settings/notifications/webhooks", url.Values{"url": {"https://hooks.example.com/a"}}, cookie, csrf)
	page := assenttest.ReadAll(k.Get("/settings/notifications", cookie))
	if !strings.Contains(page, "https://hooks.example.com/a") || !strings.Contains(page, "whsec_") {
		t.Fatalf("settings page after adding a webhook lacks it or its secret:\n%s", page)
	}
	if page := assenttest.ReadAll(k.Get("/settings/notifications", cookie)); strings.Contains(page, "whsec_") {
		t.Error("the secret is shown twice")
	}
	ws, err := k.DB.Notify().Webhooks(ctx)
	if err != nil || len(ws) != 1 {
		t.Fatalf("webhooks = %v, %v", ws, err)
	}

	// Another person may set their address but not touch webhooks.
	_, bob := k.Issue(store.KindHuman, "bob", "human.approve")
	bobCookie, bobCSRF := k.SignInAs(bob.ID)
	if page := assenttest.ReadAll(k.Get("/settings/notifications", bobCookie)); strings.Contains(page, "hooks.example.com") {
		t.Error("a person who is not the owner sees the webhooks")
	}
	if resp := post("/settings/notifications/webhooks/"+ws[0].ID+"/remove", url.Values{}, bobCookie, bobCSRF); resp.StatusCode != http.StatusForbidden {
		t.Errorf("remove by another person: %d", resp.StatusCode)
	}
	// Without the CSRF token nothing changes.
	if resp := post("/settings/notifications/webhooks/"+ws[0].ID+"/remove", url.Values{}, cookie, "wrong"); resp.StatusCode == http.StatusSeeOther {
		t.Error("remove without the CSRF token was taken")
	}
	if resp := post("/settings/notifications/webhooks/"+ws[0].ID+"/remove", url.Values{}, cookie, csrf); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d", resp.StatusCode)
	}
	if ws, _ := k.DB.Notify().Webhooks(ctx); len(ws) != 0 {
		t.Fatal("webhook not removed")
	}
}

func TestDeadLetterReplayedFromSettings(t *testing.T) {
	smtp := startSMTP(t)
	k, _ := setup(t, smtp, nil)
	ctx := context.Background()
	// A message to a webhook that no longer exists is dead at once.
	if _, err := k.DB.Notify().EnqueueMessages(ctx, []store.OutboxMessage{{ID: "msg_dead", Channel: "webhook:wh_gone",
		Item: "test.item:x", Payload: []byte(`{"kind":"test.item","id":"x","title":"T"}`), CreatedAt: time.Now(), NextAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		ms, _ := k.DB.Notify().ListMessages(ctx, store.MessageDead, 0)
		return len(ms) == 1
	}, "dead letter")
	cookie, csrf := k.SignIn()
	if page := assenttest.ReadAll(k.Get("/settings/notifications", cookie)); !strings.Contains(page, "was removed") {
		t.Fatalf("the dead letter and its error are not shown:\n%s", page)
	}
	// The webhook is back; the owner replays the dead letter.
	hooks := startHooks(t, 0)
	if err := k.DB.Notify().AddWebhook(ctx, store.Webhook{ID: "wh_gone", URL: hooks.URL, Secret: hooks.Secret, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	resp := k.PostForm("/settings/notifications/dead/msg_dead/replay", url.Values{"csrf": {csrf}}, cookie, k.URL())
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("replay: %d", resp.StatusCode)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		_, ok := got["msg_dead"]
		return ok
	}, "dead letter delivered after replay")
}

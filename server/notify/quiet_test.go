package notify_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store"
)

// A mail to a person in their quiet hours is stored held until the hours
// end, and sent then; the webhook is not held.
func TestQuietHoursHoldMail(t *testing.T) {
	base := time.Now().UTC()
	var offset atomic.Int64 // nanoseconds the clock is ahead
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setupPoll(t, smtp, hooks, 50*time.Millisecond, func(c *server.Config) { c.Now = now })
	ctx := context.Background()
	m := base.Hour()*60 + base.Minute()
	q, err := notify.ParseQuiet(notify.Clock((m+1440-60)%1440), notify.Clock((m+120)%1440), "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if err := notifypart.SetQuiet(ctx, k.DB.Settings(), k.Boot.Owner.ID, q); err != nil {
		t.Fatal(err)
	}
	id := propose(t, k, k.Token, "echo quiet please")

	var held store.OutboxMessage
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		ms, _ := k.DB.Notify().ListMessages(ctx, store.MessagePending, 0)
		for _, msg := range ms {
			if strings.HasPrefix(msg.Channel, "mail:") {
				held = msg
			}
		}
		return len(got) == 1 && held.ID != ""
	}, "the webhook delivered and the mail stored")
	if d := held.NextAt.Sub(base); d < 118*time.Minute || d > 121*time.Minute {
		t.Errorf("mail held until %v, %v after filing; want when the quiet hours end, about 2 h", held.NextAt, d)
	}
	if held.Attempts != 0 || len(smtp.Mails()) != 0 {
		t.Fatalf("mail sent during quiet hours: attempts %d, mails %d", held.Attempts, len(smtp.Mails()))
	}
	offset.Store(int64(3 * time.Hour))
	if m := mailFor(t, smtp, id); m.To != "ada@example.com" {
		t.Errorf("mail to %q", m.To)
	}
}

// The owner manages groups on the settings page; a person sets their
// channels and quiet hours.
func TestGroupsAndQuietHoursOnSettingsPage(t *testing.T) {
	k := assenttest.Start(t, nil)
	ctx := context.Background()
	cookie, csrf := k.SignIn()
	post := func(path string, v url.Values, c *http.Cookie, token string) *http.Response {
		v.Set("csrf", token)
		return k.PostForm(path, v, c, k.URL())
	}
	_, ben := k.Issue(store.KindHuman, "ben", "human.approve")
	if resp := post("/settings/notifications/groups", url.Values{"group": {"finance"}, "person": {ben.ID}}, cookie, csrf); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add member: %d", resp.StatusCode)
	}
	if got, err := k.DB.Groups().GroupMembers(ctx, "finance"); err != nil || len(got) != 1 || got[0] != ben.ID {
		t.Fatalf("finance = %v, %v", got, err)
	}
	if page := assenttest.ReadAll(k.Get("/settings/notifications", cookie)); !strings.Contains(page, "finance: ben") {
		t.Errorf("the groups section does not list ben")
	}
	post("/settings/notifications/groups", url.Values{"group": {"Bad Name"}, "person": {ben.ID}}, cookie, csrf)
	post("/settings/notifications/groups", url.Values{"group": {"ops"}, "person": {"p_nobody"}}, cookie, csrf)
	if all, _ := k.DB.Groups().ListGroupMembers(ctx); len(all) != 1 {
		t.Errorf("a bad name or an unknown person was added: %+v", all)
	}

	// Ben is not the owner: groups are not his to change.
	benCookie, benCSRF := k.SignInAs(ben.ID)
	if resp := post("/settings/notifications/groups/remove", url.Values{"group": {"finance"}, "person": {ben.ID}}, benCookie, benCSRF); resp.StatusCode != http.StatusForbidden {
		t.Errorf("remove by ben: %d", resp.StatusCode)
	}
	if page := assenttest.ReadAll(k.Get("/settings/notifications", benCookie)); strings.Contains(page, `id="groups"`) {
		t.Error("ben sees the groups section")
	}

	// Ben sets quiet hours and turns mail off; a bad zone changes nothing.
	if resp := post("/settings/notifications/quiet", url.Values{"start": {"22:00"}, "end": {"07:00"}, "zone": {"Europe/Berlin"}}, benCookie, benCSRF); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set quiet: %d", resp.StatusCode)
	}
	q, ok, err := notifypart.QuietOf(ctx, k.DB.Settings(), ben.ID)
	if err != nil || !ok || notify.Clock(q.Start) != "22:00" || notify.Clock(q.End) != "07:00" || q.Zone != "Europe/Berlin" {
		t.Fatalf("quiet = %+v %v %v", q, ok, err)
	}
	if on, _ := notifypart.MailOn(ctx, k.DB.Settings(), ben.ID); on {
		t.Error("mail still on after unticking it")
	}
	post("/settings/notifications/quiet", url.Values{"start": {"23:00"}, "end": {"06:00"}, "zone": {"Nowhere/Else"}, "mail": {"on"}}, benCookie, benCSRF)
	if q, _, _ := notifypart.QuietOf(ctx, k.DB.Settings(), ben.ID); notify.Clock(q.Start) != "22:00" {
		t.Errorf("a bad zone replaced the quiet hours: %+v", q)
	}
	if page := assenttest.ReadAll(k.Get("/settings/notifications", benCookie)); !strings.Contains(page, `value="22:00"`) || !strings.Contains(page, "Europe/Berlin") {
		t.Error("the page does not show the quiet hours")
	}

	if resp := post("/settings/notifications/groups/remove", url.Values{"group": {"finance"}, "person": {ben.ID}}, cookie, csrf); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d", resp.StatusCode)
	}
	if all, _ := k.DB.Groups().ListGroupMembers(ctx); len(all) != 0 {
		t.Errorf("not removed: %+v", all)
	}
}

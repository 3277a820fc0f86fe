package notify_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store"
)

// A command proposal's first announcement gives its deadline (mail body
// and webhook data) and says it escalates; at its first deadline the
// group's members are told, through the outbox (mail and a webhook of
// type decision.escalated), that it is now asked of them.
func TestEscalatedProposalAnnounced(t *testing.T) {
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Second)
	clock := func(c *server.Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	}
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setupPoll(t, smtp, hooks, 50*time.Millisecond, clock)
	_, carol := k.Issue(store.KindHuman, "carol")
	if err := notifypart.SetEmail(t.Context(), k.DB.Settings(), carol.ID, "carol@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := k.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "oncall", PrincipalID: carol.ID, AddedAt: now}); err != nil {
		t.Fatal(err)
	}
	code, v, raw := k.API("POST", "/v1/runs", k.Token, map[string]any{"template": "true", "deadline_seconds": 60, "escalate_to": "oncall"})
	id, _ := v["proposal"].(string)
	if code != 202 || id == "" {
		t.Fatalf("propose: %d %s", code, raw)
	}
	due := now.Add(time.Minute)
	first := mailFor(t, smtp, id)
	if !strings.Contains(first.Data, "Decide by "+due.Format("2006-01-02 15:04 UTC")) || !strings.Contains(first.Data, "escalated to group oncall") {
		t.Errorf("the first mail does not give the deadline and the escalation:\n%s", first.Data)
	}
	hookOf := func(typ string) (receivedHook, bool) {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Type == typ && strings.HasSuffix(h.Body.Data.ItemID, id) {
				return h, true
			}
		}
		return receivedHook{}, false
	}
	var h receivedHook
	testwait.Eventually(t, 10*time.Second, func() (ok bool) { h, ok = hookOf("decision.pending"); return ok }, "webhook about the proposal")
	if !h.Body.Data.Deadline.Equal(due) {
		t.Errorf("webhook data deadline = %v, want %v", h.Body.Data.Deadline, due)
	}

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if _, err := k.Srv.Runs().ExpireDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, func() (ok bool) { h, ok = hookOf(notify.KindDecisionEscalated); return ok }, "webhook about the escalation")
	if d := h.Body.Data; d.Group != "oncall" || len(d.For) != 1 || d.For[0] != "carol" || !d.Deadline.Equal(due.Add(time.Minute)) {
		t.Errorf("escalation webhook data = %+v, want group oncall, for carol, the new deadline", d)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		for _, m := range smtp.Mails() {
			if m.To == "carol@example.com" && strings.Contains(m.Data, id) && strings.Contains(m.Data, "Escalated to oncall") {
				return true
			}
		}
		return false
	}, "mail to carol about the escalation")
}

// A value an agent staged with a deadline and escalate_to is announced
// with its deadline, and at the first deadline the group's people are
// told it was escalated to them (decision.escalated); a proposed program
// with a deadline gives it in its first announcement too.
func TestEscalatedStagedValueAnnounced(t *testing.T) {
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Second)
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k := assenttest.StartDemo(t, func(c *server.Config) {
		c.Notify.SMTP = &notify.SMTP{Addr: smtp.Addr(), From: "assent@example.com"}
		c.Notify.Poll = 50 * time.Millisecond
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	if err := k.DB.Notify().AddWebhook(t.Context(), store.Webhook{ID: "wh_test", URL: hooks.URL, Secret: hooks.Secret, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	_, carol := k.Issue(store.KindHuman, "carol")
	if err := k.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "oncall", PrincipalID: carol.ID, AddedAt: now}); err != nil {
		t.Fatal(err)
	}
	cs, err := k.MCPSession(k.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"},
		"value": "pro", "deadline_seconds": 30, "escalate_to": "oncall"})
	if isErr || out["ok"] != true {
		t.Fatalf("stage: %v", out)
	}
	hookOf := func(typ, kind string) (receivedHook, bool) {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Type == typ && (h.Body.Data.Kind == kind) {
				return h, true
			}
		}
		return receivedHook{}, false
	}
	var h receivedHook
	testwait.Eventually(t, 10*time.Second, func() (ok bool) { h, ok = hookOf("decision.pending", notify.KindControlProposal); return ok }, "webhook about the staged value")
	due := now.Add(30 * time.Second)
	if d := h.Body.Data; !d.Deadline.Equal(due) || !strings.Contains(d.Summary, "escalated to group oncall") {
		t.Errorf("first webhook data = %+v, want the deadline %v and the escalation", d, due)
	}
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	if _, err := k.Srv.Controls().ExpireDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, func() (ok bool) {
		h, ok = hookOf(notify.KindDecisionEscalated, notify.KindDecisionEscalated)
		return ok
	}, "webhook about the escalation")
	if d := h.Body.Data; d.Group != "oncall" || len(d.For) != 1 || d.For[0] != "carol" || !strings.HasPrefix(d.ItemID, notify.KindControlProposal+":profile/plan@") {
		t.Errorf("escalation webhook data = %+v, want the staged value, for carol of group oncall", d)
	}

	code, body, raw := k.API("POST", "/v1/flows/programs?deadline_seconds=600", k.Token, []byte(proposedProgram))
	if code != 202 {
		t.Fatalf("agent load: %d %s", code, raw)
	}
	fp, _ := body["program"].(map[string]any)["fingerprint"].(string)
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, x := range got {
			if x.Body.Data.ItemID == fp {
				h = x
				return true
			}
		}
		return false
	}, "webhook about the program")
	if d := h.Body.Data; !d.Deadline.Equal(now.Add(10*time.Minute)) || !strings.Contains(d.Summary, "Decide by") {
		t.Errorf("program webhook data = %+v, want its deadline", d)
	}
}

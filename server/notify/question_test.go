package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store"
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

// The record that a question waits to be announced, written with the
// question, is cleared only once the question's messages are in the
// outbox, and a question is announced once however often it is read.
func TestQuestionAnnounceRecordCleared(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setup(t, smtp, hooks)
	cs, err := k.MCPSession(k.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "Refund order 91?"})
	id, _ := out["approval"].(string)
	if isErr || id == "" {
		t.Fatalf("approvals_request: %v", out)
	}
	asks := k.DB.Asks()
	testwait.Eventually(t, 10*time.Second, func() bool {
		waiting, err := asks.AsksToAnnounce(t.Context(), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range waiting {
			if a.ID == id {
				return false
			}
		}
		return true
	}, "the question's announce record cleared")
	msgs, err := k.DB.Notify().ListMessages(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	channels := map[string]bool{}
	for _, m := range msgs {
		if m.Item == notify.KindQuestion+":"+id {
			channels[m.Channel] = true
		}
	}
	if !channels["webhook:wh_test"] || !channels["mail:"+k.Boot.Owner.ID] {
		t.Errorf("when the record was cleared the outbox held %v for the question, want its webhook and its mail", channels)
	}
	mailFor(t, smtp, id)
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == id {
				return true
			}
		}
		return false
	}, "webhook about the question")
	n := 0
	for _, m := range smtp.Mails() {
		if strings.Contains(m.Data, id) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d mails about the question, want 1", n)
	}
}

// A question asked of a group is mailed to the group's members, not to
// the agent's supervisors (here the owner), saying so, and its webhook is
// for them.
func TestQuestionAskedOfGroupAnnounced(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setup(t, smtp, hooks)
	_, carol := k.Issue(store.KindHuman, "carol")
	if err := notifypart.SetEmail(t.Context(), k.DB.Settings(), carol.ID, "carol@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := k.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "finance", PrincipalID: carol.ID, AddedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cs, err := k.MCPSession(k.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "Pay invoice INV-12?", "group": "finance"})
	id, _ := out["approval"].(string)
	if isErr || id == "" {
		t.Fatalf("approvals_request: %v", out)
	}
	if m := mailFor(t, smtp, id); m.To != "carol@example.com" || !strings.Contains(m.Data, "Asked of group finance") {
		t.Errorf("mail to %q, want the group's member carol@example.com, saying it is asked of group finance:\n%s", m.To, m.Data)
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
	if d := hook.Body.Data; len(d.For) != 1 || d.For[0] != "carol" {
		t.Errorf("webhook data = %+v, want it for carol", d)
	}
	for _, m := range smtp.Mails() {
		if strings.Contains(m.Data, id) && m.To != "carol@example.com" {
			t.Errorf("the question was also mailed to %s", m.To)
		}
	}
}

package notify_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server"
	notifypart "github.com/assent-run/assent/server/notify"
)

// reminders returns the reminder webhooks received about item, by the
// point they remind at (the summary's "within …").
func reminders(h *hookReceiver, item string) []string {
	got, _, _ := h.Got()
	var out []string
	for _, m := range got {
		if m.Body.Type == notifypart.ReminderType && m.Body.Data.ItemID == item {
			_, within, _ := strings.Cut(m.Body.Data.Summary, "(within ")
			within, _, _ = strings.Cut(within, ")")
			out = append(out, within)
		}
	}
	return out
}

// A command proposal with a deadline 12 minutes ahead and reminders at
// 1h and 10m before it is reminded of at once (within the hour), and
// again once 10 minutes remain, each once, by webhook (type
// decision.reminder) and by mail ("Reminder: …"); a restarted server
// sends neither again.
func TestRemindersBeforeDeadline(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	var mu sync.Mutex
	skew := time.Duration(0) // kept under the receivers' 5-minute tolerance
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(skew) }
	remind := func(c *server.Config) {
		c.Now = clock
		c.RemindBefore = []time.Duration{time.Hour, 10 * time.Minute}
	}
	k, mod := setupPoll(t, smtp, hooks, 50*time.Millisecond, remind)
	code, v, raw := k.API("POST", "/v1/runs", k.Token, map[string]any{"template": "echo later", "deadline_seconds": 12 * 60})
	id, _ := v["proposal"].(string)
	if code != 202 || id == "" {
		t.Fatalf("propose: %d %s", code, raw)
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return len(reminders(hooks, id)) == 1 }, "the reminder an hour before")
	if got := reminders(hooks, id); got[0] != "1h0m0s" {
		t.Fatalf("first reminder at %v, want 1h0m0s", got)
	}
	mu.Lock()
	skew = 3 * time.Minute // 9 minutes remain
	mu.Unlock()
	testwait.Eventually(t, 10*time.Second, func() bool { return len(reminders(hooks, id)) == 2 }, "the reminder 10 minutes before")
	var subjects []string
	testwait.Eventually(t, 10*time.Second, func() bool {
		subjects = subjects[:0]
		for _, m := range smtp.Mails() {
			if strings.Contains(m.Data, id) && strings.HasPrefix(m.Subject(), "Reminder: Approve command") {
				subjects = append(subjects, m.Subject())
			}
		}
		return len(subjects) == 2
	}, "two reminder mails")

	// A proposal filed after the restart is reminded of by a pass over
	// every deadline, the first proposal's included.
	g := k.Restart(mod)
	code, v, raw = g.API("POST", "/v1/runs", g.Token, map[string]any{"template": "echo after", "deadline_seconds": 12 * 60})
	next, _ := v["proposal"].(string)
	if code != 202 || next == "" {
		t.Fatalf("propose after the restart: %d %s", code, raw)
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return len(reminders(hooks, next)) == 1 }, "the reminder of the proposal filed after the restart")
	if got := reminders(hooks, id); len(got) != 2 {
		t.Fatalf("after a restart the reminders are %v, want the two sent before", got)
	}
	// Delivery is at least once (a mail sent just before the restart may
	// be sent again); each reminder keeps its own Message-ID.
	ids := map[string]bool{}
	for _, m := range smtp.Mails() {
		if strings.Contains(m.Data, id) && strings.HasPrefix(m.Subject(), "Reminder: ") {
			mid := header(m, "Message-ID")
			if !strings.Contains(mid, ".remind-") {
				t.Errorf("reminder Message-ID %q is the announcement's", mid)
			}
			ids[mid] = true
		}
	}
	if n := len(ids); n != 2 {
		t.Fatalf("%d reminder mails after a restart, want 2", n)
	}
}

// An agent's question with a deadline 12 minutes ahead is reminded of at
// once when reminders start an hour before, like a proposal.
func TestQuestionReminded(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setupPoll(t, smtp, hooks, 50*time.Millisecond, func(c *server.Config) { c.RemindBefore = []time.Duration{time.Hour} })
	cs, err := k.MCPSession(k.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "Ship the release?", "deadline_seconds": 12 * 60})
	id, _ := out["approval"].(string)
	if isErr || id == "" {
		t.Fatalf("approvals_request: %v", out)
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return len(reminders(hooks, id)) == 1 }, "the reminder of the question")
	got, _, _ := hooks.Got()
	for _, m := range got {
		if m.Body.Type == notifypart.ReminderType && m.Body.Data.ItemID == id && !strings.HasPrefix(m.Body.Data.Title, "Reminder: Answer: Ship the release?") {
			t.Errorf("reminder title %q", m.Body.Data.Title)
		}
	}
}

// An agent's proposed Flow program with a deadline 12 minutes ahead is
// reminded of at once when reminders start an hour before; a program
// without one is not.
func TestProgramProposalReminded(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setupPoll(t, smtp, hooks, 50*time.Millisecond, func(c *server.Config) { c.RemindBefore = []time.Duration{time.Hour} })
	code, out, raw := k.API("POST", "/v1/flows/programs?deadline_seconds=720", k.Token, []byte(remindProgram("reminded")))
	fp := assenttest.As[api.ProgramProposal](t, out).Program.Fingerprint
	if code != 202 || fp == "" {
		t.Fatalf("propose: %d %s", code, raw)
	}
	code, out, raw = k.API("POST", "/v1/flows/programs", k.Token, []byte(remindProgram("unhurried")))
	open := assenttest.As[api.ProgramProposal](t, out).Program.Fingerprint
	if code != 202 || open == "" {
		t.Fatalf("propose without a deadline: %d %s", code, raw)
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return len(reminders(hooks, fp)) == 1 }, "the reminder of the program")
	got, _, _ := hooks.Got()
	for _, m := range got {
		if m.Body.Type == notifypart.ReminderType && m.Body.Data.ItemID == fp && !strings.HasPrefix(m.Body.Data.Title, "Reminder: Load program reminded") {
			t.Errorf("reminder title %q", m.Body.Data.Title)
		}
	}
	if n := len(reminders(hooks, open)); n != 0 {
		t.Fatalf("%d reminders of the program without a deadline", n)
	}
}

// remindProgram is a one-step program an agent may only propose.
func remindProgram(id string) string {
	return `{
  "schema_version": 1, "program_id": "` + id + `", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "done", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["done"]}]}],
  "transitions": [{"id": "finish", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["open"], "target_phases": ["done"], "authority": ["human"],
    "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
    "prescription": {"operation": "finish", "expected_postcondition": "it is done"}}]
}`
}

// header returns the value of the header name of m.
func header(m mail, name string) string {
	for line := range strings.Lines(m.Data) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), name+": "); ok {
			return v
		}
	}
	return ""
}

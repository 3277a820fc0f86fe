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

// proposedProgram is a program an agent may only propose: loading it is a
// person's act.
const proposedProgram = `{
  "schema_version": 1, "program_id": "announce-me", "program_version": "3", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "done", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["done"]}]}],
  "transitions": [{"id": "finish", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["open"], "target_phases": ["done"],
    "authority": ["human"], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
    "prescription": {"operation": "finish", "expected_postcondition": "it is done"}}]
}`

// An agent's proposal to load a Flow program is announced like the other
// decisions: a webhook of kind flow.program naming the program and the
// agent's reason, and a mail to the owner.
func TestProgramProposalAnnounced(t *testing.T) {
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
	code, out, raw := k.API("POST", "/v1/flows/programs?reason=The+team+asked+for+it", k.Token, []byte(proposedProgram))
	prog, _ := out["program"].(map[string]any)
	fp, _ := prog["fingerprint"].(string)
	if code != 202 || fp == "" {
		t.Fatalf("agent load: %d %s", code, raw)
	}
	var hook receivedHook
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == fp {
				hook = h
				return true
			}
		}
		return false
	}, "webhook about the proposed program")
	d := hook.Body.Data
	if d.Kind != notifypart.KindProgramProposal || !strings.HasPrefix(d.Title, "Load program announce-me (version 3)") ||
		!strings.Contains(d.Summary, "Why: The team asked for it") || d.Agent == "" || !strings.Contains(d.URL, "/inbox#section-flow-programs") {
		t.Errorf("webhook = %+v", d)
	}
	if m := mailFor(t, smtp, fp); m.To != "ada@example.com" || !strings.HasPrefix(m.Subject(), "Load program announce-me") {
		t.Errorf("mail to %q, subject %q", m.To, m.Subject())
	}
}

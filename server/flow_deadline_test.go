package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// deadlineProgram has one step that a person must approve within two
// seconds; nobody deciding declines it.
const deadlineProgram = `{
  "schema_version": 1, "program_id": "timed", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "done", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["done"]}]}],
  "transitions": [
    {"id": "finish", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["open"], "target_phases": ["done"], "authority": ["human"],
     "approval": {"deadline_seconds": 2, "fallback": "decline"},
     "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "finish", "expected_postcondition": "it is done"}}
  ]
}`

// An approval with a two-second deadline that nobody decides ends
// declined with the reason "no decision before the deadline", and the
// agent waiting on it in inbox_wait hears it; the card showed the
// deadline and what happens at it.
func TestFlowApprovalDeadlineDeclines(t *testing.T) {
	f := assenttest.StartDemo(t)
	ops, _ := f.Issue(store.KindService, "ops", "flow.load")
	code, prog, raw := f.API("POST", "/v1/flows/programs", ops, []byte(deadlineProgram))
	if code != 201 {
		t.Fatalf("load: %d %s", code, raw)
	}
	if code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": prog["fingerprint"], "id": "timed-1", "phase": "open"}); code != 201 {
		t.Fatalf("start: %d %s", code, raw)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "timed-1"})
	apr := approvalOf(t, out)
	if isErr || apr.ID == "" || apr.Deadline.IsZero() || apr.Fallback != flow.FallbackDecline {
		t.Fatalf("prescribe: %v", out)
	}
	if d := apr.Deadline.Sub(apr.CreatedAt); d.Seconds() != 2 {
		t.Fatalf("deadline %v after filing, want 2s", d)
	}
	waiting := startWait(cs, map[string]any{"items": []any{map[string]any{"approval": apr.ID}}, "timeout_ms": 60000})

	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, _ := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	if !strings.Contains(inbox, apr.ID) || !strings.Contains(inbox, `datetime="`+apr.Deadline.Format("2006-01-02T15:04:05Z")) ||
		!strings.Contains(inbox, "It is declined with the reason") {
		t.Fatalf("the card does not show the deadline and its fallback:\n%s", inbox)
	}

	w := <-waiting
	if w.err != nil || w.isErr {
		t.Fatalf("wait: %v %v", w.err, w.out)
	}
	got := w.item(0)
	if got["status"] != "declined" || got["reason"] != flow.NoDecision || w.out["timed_out"] != false {
		t.Fatalf("wait after the deadline: %v", w.out)
	}
	a, err := f.Srv.Flows().Kernel().Approval(t.Context(), apr.ID)
	if err != nil || a.Status != flow.ApprovalDeclined || a.Reason != flow.NoDecision || a.DecidedAt.Before(a.Deadline) {
		t.Fatalf("stored approval: %+v %v", a, err)
	}
	// It leaves the inbox.
	if inbox := assenttest.ReadAll(f.Get("/inbox", cookie)); strings.Contains(inbox, "Approve") && strings.Contains(inbox, apr.ID+"/approve") {
		t.Fatal("the declined approval is still decidable in the inbox")
	}
}

// An approval whose rule escalates is routed to the named group at its
// first deadline, the card says so, and at the second deadline it is
// declined.
func TestFlowApprovalDeadlineEscalates(t *testing.T) {
	f := assenttest.StartDemo(t)
	ops, _ := f.Issue(store.KindService, "ops", "flow.load")
	src := strings.Replace(deadlineProgram, `"approval": {"deadline_seconds": 2, "fallback": "decline"}`,
		`"approval": {"deadline_seconds": 2, "group": "finance", "escalate_to": "heads"}`, 1)
	code, prog, raw := f.API("POST", "/v1/flows/programs", ops, []byte(src))
	if code != 201 {
		t.Fatalf("load: %d %s", code, raw)
	}
	if code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": prog["fingerprint"], "id": "timed-2", "phase": "open"}); code != 201 {
		t.Fatalf("start: %d %s", code, raw)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "timed-2"})
	apr := approvalOf(t, out)
	if isErr || apr.ID == "" || apr.Group != "finance" || apr.EscalateTo != "heads" {
		t.Fatalf("prescribe: %v", out)
	}
	kernel := f.Srv.Flows().Kernel()
	// Signed in first: the card is read in the two seconds between the
	// escalation and the second deadline.
	cookie, _ := f.SignIn()
	testwait.Eventually(t, 30*time.Second, func() bool {
		a, err := kernel.Approval(t.Context(), apr.ID)
		return err == nil && a.Escalated()
	}, "the approval escalates at its first deadline")
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	if !strings.Contains(inbox, "escalated to group heads") || !strings.Contains(inbox, apr.ID) {
		t.Fatalf("the card does not say it escalated:\n%s", inbox)
	}
	w := waitNow(t, cs, map[string]any{"items": []any{map[string]any{"approval": apr.ID}}, "timeout_ms": 30000})
	if got := w.item(0); got["status"] != "declined" || got["reason"] != flow.NoDecision {
		t.Fatalf("wait after the second deadline: %v", w.out)
	}
	a, _ := kernel.Approval(t.Context(), apr.ID)
	if a.Group != "heads" || a.EscalatedFrom != "finance" || a.Status != flow.ApprovalDeclined {
		t.Fatalf("stored approval: %+v", a)
	}
}

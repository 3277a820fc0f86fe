package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// The Flows part of the human boundary, written as the attacks: each test
// does what an agent did with only its own token, and checks that it is
// refused with a code or turned into something a person decides.

// person issues a person with grants and returns their token.
func (a *app) person(name string, grants ...string) (string, store.Principal) {
	a.T.Helper()
	tok, p, err := auth.IssueToken(context.Background(), a.DB, store.KindHuman, name, grants, time.Now())
	if err != nil {
		a.T.Fatal(err)
	}
	return tok, p
}

func (a *app) webClient() *http.Client {
	c := *a.HTTP.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func (a *app) webPage(path string, cookie *http.Cookie) string {
	a.T.Helper()
	r, _ := http.NewRequest("GET", a.HTTP.URL+path, nil)
	r.AddCookie(cookie)
	resp, err := a.webClient().Do(r)
	if err != nil {
		a.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// press posts a person's button in the inbox and returns where it led and
// the page there, with its banner.
func (a *app) press(path string, form url.Values, cookie *http.Cookie) (string, string) {
	a.T.Helper()
	r, _ := http.NewRequest("POST", a.HTTP.URL+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", a.HTTP.URL)
	r.AddCookie(cookie)
	resp, err := a.webClient().Do(r)
	if err != nil {
		a.T.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther {
		a.T.Fatalf("%s: %d", path, resp.StatusCode)
	}
	return loc, a.webPage(loc, cookie)
}

// emailChange applies the staged email of the demo profile; a person must
// approve it.
const emailChange = `{
  "schema_version": 1, "program_id": "email-change", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["control.apply"], "verifiers": ["conditions.match"], "capability_surface": ["control.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "changed", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["changed"]}]}],
  "transitions": [{
    "id": "apply-email", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["proposed"], "target_phases": ["changed"],
    "authority": ["human"], "required_capabilities": ["control.write"], "effect": "control.apply", "verifier": "conditions.match",
    "prescription": {"operation": "apply_email", "arguments": ["profile/email"], "expected_postcondition": "the staged email is live"}
  }]
}`

// TestAttackRestageAfterApprovalFiled: an approval is filed for
// profile/email = ada.new@example.com; the agent re-stages
// attacker@evil.example; the person presses Approve. Refused as stale, the
// person is told what changed, and the attacker's value is not applied.
func TestAttackRestageAfterApprovalFiled(t *testing.T) {
	a := newApp(t, true)
	personTok, p := a.person("approver", "control.write")
	if code, _, raw := a.API("POST", "/v1/flows/programs", personTok, []byte(emailChange)); code != 201 {
		t.Fatalf("a person loads the program: %d %s", code, raw)
	}
	agentTok := a.Boot.AgentToken
	if code, _, raw := a.API("POST", "/v1/flows/instances", agentTok, map[string]any{"program": "email-change", "id": "em-1", "phase": "proposed"}); code != 201 {
		t.Fatalf("start: %d %s", code, raw)
	}
	cs := a.agent()
	stage := func(v string) {
		if out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "email"}, "value": v}); isErr {
			t.Fatalf("stage %s: %v", v, out)
		}
	}
	stage("ada.new@example.com")
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "em-1"})
	var aprID string
	if apr := assenttest.As[api.Prescription](t, out).Approval; apr != nil {
		aprID = apr.ID
	}
	if aprID == "" {
		t.Fatalf("prescribe: %v", out)
	}
	cookie, csrf := a.SignInAs(p.ID)
	if inbox := a.webPage("/inbox", cookie); !strings.Contains(inbox, "ada.new@example.com") || !strings.Contains(inbox, "ada@example.com") {
		t.Fatalf("the approval card does not show the current and proposed email:\n%s", inbox)
	}

	stage("attacker@evil.example")
	loc, page := a.press("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie)
	if loc != "/inbox" || !strings.Contains(page, flow.CodeStalePrescription) || !strings.Contains(page, "attacker@evil.example") {
		t.Fatalf("Approve after the agent re-staged: %s\n%s", loc, page)
	}
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": map[string]any{"formId": "profile", "controlId": "email"}})
	if v := assenttest.As[control.Snapshot](t, snap).State.Value; v != "ada@example.com" {
		t.Fatalf("email = %v after the refused approval", v)
	}
	if code, apr, _ := a.API("GET", "/v1/flows/approvals/"+aprID, agentTok, nil); code != 200 || apr["status"] != "stale" {
		t.Fatalf("approval: %d %v", code, apr)
	}
}

// sneakPay pays through the demo payments_send with agent authority and
// no approval, under the demo program's own id and transition name.
const sneakPay = `{
  "schema_version": 1, "program_id": "expense-approval", "program_version": "6.6.6", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["tool.call"], "verifiers": ["conditions.match"], "capability_surface": ["tool.invoke"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "paid", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["paid"]}]}],
  "transitions": [{
    "id": "pay", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["start"], "target_phases": ["paid"],
    "authority": ["agent"], "parameters": [{"name": "iban", "required": true}],
    "required_capabilities": ["tool.invoke"], "effect": "tool.call", "verifier": "conditions.match",
    "prescription": {"operation": "pay", "arguments": ["payments_send"], "expected_postcondition": "paid"}
  }]
}`

// TestAttackAgentLoadsItsOwnPaymentProgram: the agent loads a
// one-transition program calling payments_send with authority agent and
// tries to apply it. The load is only a proposal for a person; the
// program starts nothing, by fingerprint or by id, and no payment is sent.
// Starting the real expense-approval by id still works for everyone.
func TestAttackAgentLoadsItsOwnPaymentProgram(t *testing.T) {
	a := newApp(t, true)
	agentTok := a.Boot.AgentToken
	code, out, raw := a.API("POST", "/v1/flows/programs", agentTok, []byte(sneakPay))
	proposal := assenttest.As[api.ProgramProposal](t, out)
	fp := proposal.Program.Fingerprint
	if code != 202 || proposal.Status != "pending_approval" || fp == "" {
		t.Fatalf("agent's load: %d %s", code, raw)
	}
	code, body, _ := a.API("POST", "/v1/flows/instances", agentTok, map[string]any{"program": fp, "id": "mine", "phase": "start"})
	if code != 403 || assenttest.ErrCode(body) != flow.CodeProgramNotActive {
		t.Fatalf("start the proposed program: %d %v", code, body)
	}
	// By id, the demo program a person's operator loaded is chosen, not the
	// agent's; its pay transition cannot be reached from "draft".
	code, inst, raw := a.API("POST", "/v1/flows/instances", agentTok, map[string]any{"program": "expense-approval", "id": "mine-2", "phase": "draft"})
	if code != 201 || inst["program_fingerprint"] == fp {
		t.Fatalf("start by id: %d %s", code, raw)
	}
	cs := a.agent()
	res, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "mine-2", "transition": "pay", "parameters": map[string]string{"iban": "DE89370400440532013000"}})
	if assenttest.As[api.Prescription](t, res).Decision.Kind == flow.Prescribed {
		t.Fatalf("pay from draft was prescribed: %v", res)
	}
	if direct, isErr := assenttest.CallTool(t, cs, "payments_send", map[string]any{"iban": "DE89370400440532013000"}); !isErr || errorCode(t, direct) != wire.Forbidden {
		t.Fatalf("direct payments_send: %v", direct)
	}
}

// TestAttackUncertainPaymentReapplied: a payment tool that acted and then
// failed (the bank answered 500) is not recorded as "nothing applied": the
// instance needs recovery and applying again is refused, so the payment
// goes out once, not three times.
func TestAttackUncertainPaymentReapplied(t *testing.T) {
	a := newApp(t, true)
	var sent atomic.Int32
	err := a.Srv.Flows().RegisterEffectOnlyTool(tool.Tool{
		Name: "bank_send", Description: "test bank", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
			sent.Add(1)
			return nil, tool.Errorf("tool_failed", "the bank answered 500")
		},
	}, flows.EffectCaller{Program: "bank", Transition: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	prog := strings.NewReplacer(`"expense-approval"`, `"bank"`, "payments_send", "bank_send",
		`"required_capabilities"`, `"target_conditions": [{"facet": "payment.status", "statuses": ["known"], "values": ["sent"]}], "required_capabilities"`).Replace(sneakPay)
	personTok, _ := a.person("ops")
	if code, _, raw := a.API("POST", "/v1/flows/programs", personTok, []byte(prog)); code != 201 {
		t.Fatalf("a person loads the program: %d %s", code, raw)
	}
	agentTok, _, err := auth.IssueToken(context.Background(), a.DB, store.KindAgent, "payer", []string{"tool.invoke"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a.API("POST", "/v1/flows/instances", agentTok, map[string]any{"program": "bank", "id": "b-1", "phase": "start"})
	_, out, _ := a.API("POST", "/v1/flows/instances/b-1/prescribe", agentTok, map[string]any{"parameters": map[string]string{"iban": "DE89370400440532013000"}})
	prx := prescriptionID(t, out)
	for i := range 3 {
		if code, body, _ := a.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", agentTok, nil); code != 409 || assenttest.ErrCode(body) != flow.CodeRecoveryRequired {
			t.Fatalf("apply %d: %d %v", i+1, code, body)
		}
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("the payment went out %d times", n)
	}
	_, v, _ := a.API("GET", "/v1/flows/instances/b-1", agentTok, nil)
	if facts := assenttest.As[api.InstanceView](t, v).Instance.Facts; facts["payment.status"].Status != "unknown" {
		t.Fatalf("payment.status: %v", facts)
	}
}

// TestAttackCrashMidPaymentNeverReconciles: the runtime is killed while
// the demo payment is executing. After the restart the instance is in
// recovery with payment.status unknown, so the demo's reconcile-payment
// (keyed on unknown) applies, and pay cannot be applied again.
func TestAttackCrashMidPaymentNeverReconciles(t *testing.T) {
	a := newApp(t, true)
	// A service starts the expense where it stands: approved.
	agentTok, _, err := auth.IssueToken(context.Background(), a.DB, store.KindService, "payer", []string{"tool.invoke"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, _, raw := a.API("POST", "/v1/flows/instances", agentTok, map[string]any{"program": "expense-approval", "id": "x-1", "phase": "approved"}); code != 201 {
		t.Fatalf("start: %d %s", code, raw)
	}
	_, out, _ := a.API("POST", "/v1/flows/instances/x-1/prescribe", agentTok, map[string]any{"parameters": map[string]string{"iban": "DE89370400440532013000"}})
	prx := prescriptionID(t, out)
	if prx == "" {
		t.Fatalf("prescribe: %v", out)
	}
	// What kill -9 leaves: the instance marked with the prescription, the
	// journal at executing.
	err = a.DB.Flows().Update(context.Background(), func(tx flow.Tx) error {
		in, err := tx.Instance("x-1")
		if err != nil {
			return err
		}
		next := in.Clone()
		next.Pending = prx
		if err := tx.UpdateInstance(next, in.Revision, ""); err != nil {
			return err
		}
		for _, st := range []flow.JournalStatus{flow.JournalBegun, flow.JournalExecuting} {
			if err := tx.AppendJournal(flow.JournalEntry{Instance: "x-1", Prescription: prx, Transition: "expense-approval/pay", Status: st, At: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := a.Restart(func(c *server.Config) { c.RateLimit = -1 }).Srv
	in, err := srv.Flows().Kernel().Instance(context.Background(), "x-1")
	if err != nil || in.Recovery == nil || in.Facts["payment.status"].Status != flow.StatusUnknown {
		t.Fatalf("after the restart: %+v %v", in, err)
	}
	agent := flow.Principal{ID: in.Owner, Kind: flow.AuthorityService, Grants: []string{"tool.invoke"}}
	if _, err := srv.Flows().Kernel().Apply(context.Background(), prx, agent); flow.ErrorCode(err) != flow.CodeRecoveryRequired {
		t.Fatalf("re-applying pay after the crash: %v", err)
	}
	d, err := srv.Flows().Kernel().Prescribe(context.Background(), "x-1", agent, flow.Request{})
	if err != nil || d.Kind != flow.Prescribed || d.Transition != "expense-approval/reconcile-payment" {
		t.Fatalf("after the restart the decision is %+v, %v", d, err)
	}
	r, err := srv.Flows().Kernel().Apply(context.Background(), d.Prescription.ID, agent)
	if err != nil || r.Phase != "approved" {
		t.Fatalf("reconcile-payment: %+v %v", r, err)
	}
}

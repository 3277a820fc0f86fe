package flows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/examples"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

func TestFlowDemoApprovalByPerson(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	list, isErr := assenttest.CallTool(t, cs, "flows_list", map[string]any{})
	if isErr || len(list["programs"].([]any)) != 2 || !strings.Contains(string(assenttest.MustJSON(list["instances"])), demo.ExpenseID) {
		t.Fatalf("flows_list: %v", list)
	}

	// The agent asks for the next step: a person must approve.
	out, isErr := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	if isErr || decisionOf(t, out).Kind != "FRONTIER" || decisionOf(t, out).Awaiting != "human" {
		t.Fatalf("prescribe: %v", out)
	}
	aprID := approvalOf(t, out).ID
	if !strings.HasPrefix(aprID, "apr-") || decisionOf(t, out).Transition != "expense-approval/approve" {
		t.Fatalf("approval: %v", out)
	}

	// No token decides an approval, not even a person's.
	humanTok, person := f.Issue(store.KindHuman, "approver", "state.write")
	for _, tok := range []string{f.Token, humanTok} {
		if code, body, _ := f.API("POST", "/v1/flows/approvals/"+aprID+"/approve", tok, nil); code != 403 || assenttest.ErrCode(body) != "human_confirmation_required" {
			t.Fatalf("token approve: %d %v", code, body)
		}
	}

	// The person sees it in the inbox, with the program fingerprint.
	cookie, csrf := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	fp := approvalOf(t, out).Program
	for _, want := range []string{"Flow approvals", "expense-approval/approve", fp, "approve_expense", "/web/flows/approvals/" + aprID + "/approve", "Decline"} {
		if !strings.Contains(inbox, want) {
			t.Fatalf("inbox lacks %q", want)
		}
	}
	// Without the CSRF token nothing is decided.
	if resp := f.PostForm("/web/flows/approvals/"+aprID+"/approve", url.Values{}, cookie, f.HTTP.URL); resp.StatusCode != 403 {
		t.Fatalf("approve without CSRF: %d", resp.StatusCode)
	}
	loc, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie)
	if loc != "/flows/instances/"+demo.ExpenseID || !strings.Contains(page, "Approved: step") {
		t.Fatalf("approve: %s\n%s", loc, page)
	}
	if !strings.Contains(page, "rcp-") || !strings.Contains(page, "approver") || !strings.Contains(page, `id="flow-phase">approved<`) {
		t.Fatalf("instance page after approval lacks the receipt:\n%s", page)
	}

	// The agent sees the outcome and the receipt.
	view, isErr := assenttest.CallTool(t, cs, "flows_inspect", map[string]any{"instance": demo.ExpenseID, "approval": aprID})
	if isErr || approvalOf(t, view).Status != "approved" || instanceOf(t, view).Phase != "approved" {
		t.Fatalf("inspect: %v", view)
	}
	receipts := assenttest.As[api.InstanceView](t, view).Receipts
	if len(receipts) != 1 || receipts[0].ID != approvalOf(t, view).Receipt || receipts[0].Principal != person.ID {
		t.Fatalf("receipts: %v", receipts)
	}
	if inbox := assenttest.ReadAll(f.Get("/inbox", cookie)); strings.Contains(inbox, aprID) {
		t.Fatal("a decided approval is still in the inbox")
	}
}

func TestFlowDecline(t *testing.T) {
	f := assenttest.StartDemo(t)
	code, out, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, map[string]any{})
	aprID := approvalOf(t, out).ID
	if code != 200 || aprID == "" {
		t.Fatalf("prescribe: %d %v", code, out)
	}
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	// The card has a field for the reason, and the reason is recorded.
	if inbox := assenttest.ReadAll(f.Get("/inbox", cookie)); !strings.Contains(inbox, `name="reason"`) {
		t.Fatalf("the approval card has no reason field:\n%s", inbox)
	}
	if _, page := f.Decide("/web/flows/approvals/"+aprID+"/decline", url.Values{"csrf": {csrf}, "reason": {"  not a business trip  "}}, cookie); !strings.Contains(page, "not a business trip") {
		t.Fatalf("the instance page does not show the reason:\n%s", page)
	}
	code, a, _ := f.API("GET", "/v1/flows/approvals/"+aprID, f.Token, nil)
	if code != 200 || a["status"] != "declined" || a["decider"] != person.ID || a["reason"] != "not a business trip" {
		t.Fatalf("approval after decline: %d %v", code, a)
	}
	code, v, _ := f.API("GET", "/v1/flows/instances/"+demo.ExpenseID, f.Token, nil)
	if code != 200 || instanceOf(t, v).Phase != "submitted" || len(v["receipts"].([]any)) != 0 {
		t.Fatalf("instance after decline: %v", v)
	}
	// Deciding again is refused, saying who decided first and how.
	if loc, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie); loc != "/inbox" || !strings.Contains(page, "already_decided") || !strings.Contains(page, "already declined by approver") {
		t.Fatalf("second decision: %s\n%s", loc, page)
	}
}

// TestFlowOwnership checks that another principal's instance, prescription
// and approval answer exactly like ones that do not exist.
func TestFlowOwnership(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, out, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	aprID := approvalOf(t, out).ID
	other, _ := f.Issue(store.KindAgent, "other", "state.write", "tool.invoke")

	normalize := func(raw, real, fake string) string { return strings.ReplaceAll(raw, real, fake) }
	cases := []struct {
		method, path, missing string
		real, fake            string
	}{
		{"GET", "/v1/flows/instances/" + demo.ExpenseID, "/v1/flows/instances/expense-9999", demo.ExpenseID, "expense-9999"},
		{"POST", "/v1/flows/instances/" + demo.ExpenseID + "/prescribe", "/v1/flows/instances/expense-9999/prescribe", demo.ExpenseID, "expense-9999"},
		{"GET", "/v1/flows/approvals/" + aprID, "/v1/flows/approvals/apr-0000", aprID, "apr-0000"},
	}
	for _, tc := range cases {
		c1, _, raw1 := f.API(tc.method, tc.path, other, nil)
		c2, _, raw2 := f.API(tc.method, tc.missing, other, nil)
		if c1 != 404 || c1 != c2 || normalize(raw1, tc.real, tc.fake) != raw2 {
			t.Errorf("%s %s: %d %s; absent: %d %s", tc.method, tc.path, c1, raw1, c2, raw2)
		}
	}
	// Nor can it apply another's prescription.
	// A service (the operator's program) may start an expense where it
	// stands; an agent starts it as a draft.
	payer, _ := f.Issue(store.KindService, "payer", "tool.invoke")
	f.API("POST", "/v1/flows/instances", payer, map[string]any{"program": "expense-approval", "id": "exp-5", "phase": "approved"})
	_, out, _ = f.API("POST", "/v1/flows/instances/exp-5/prescribe", payer, map[string]any{"parameters": map[string]string{"iban": "DE89370400440532013000"}})
	prx := prescriptionID(t, out)
	c1, _, raw1 := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", other, nil)
	c2, _, raw2 := f.API("POST", "/v1/flows/prescriptions/prx-0000/apply", other, nil)
	if prx == "" || c1 != 404 || c1 != c2 || normalize(raw1, prx, "prx-0000") != raw2 {
		t.Errorf("apply another's prescription: %d %s; absent: %d %s", c1, raw1, c2, raw2)
	}

	// The owner's list shows the instance; the other's does not.
	_, l, _ := f.API("GET", "/v1/flows/instances", other, nil)
	if len(l["instances"].([]any)) != 0 {
		t.Fatalf("other sees %v", l)
	}
	cs, err := f.MCPSession(other, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	a, isErr := assenttest.CallTool(t, cs, "flows_inspect", map[string]any{"instance": demo.ExpenseID})
	b, _ := assenttest.CallTool(t, cs, "flows_inspect", map[string]any{"instance": "expense-9999"})
	if !isErr || errorOf(t, a).Code != "not_found" || normalize(string(assenttest.MustJSON(a)), demo.ExpenseID, "expense-9999") != string(assenttest.MustJSON(b)) {
		t.Fatalf("MCP inspect of another's instance: %v vs %v", a, b)
	}
}

// TestFlowPayThroughToolCall runs the expense's pay transition: tool.call
// calls payments_send with the parameters; the secret IBAN never comes back.
func TestFlowPayThroughToolCall(t *testing.T) {
	f := assenttest.StartDemo(t)
	tok, _ := f.Issue(store.KindService, "payer", "state.write", "tool.invoke")
	const iban = "DE89370400440532013000"
	code, inst, raw := f.API("POST", "/v1/flows/instances", tok, map[string]any{
		"program": "expense-approval", "id": "exp-7", "phase": "approved",
		"facts": map[string]any{"expense.amount": map[string]string{"status": "known", "value": "120.00 EUR"}},
	})
	if code != 201 || inst["owner"] == "" {
		t.Fatalf("start: %d %s", code, raw)
	}

	// Without the IBAN the kernel waits for parameters.
	_, out, _ := f.API("POST", "/v1/flows/instances/exp-7/prescribe", tok, nil)
	if decisionOf(t, out).Kind != "FRONTIER" || decisionOf(t, out).Awaiting != "parameters" {
		t.Fatalf("prescribe without parameters: %v", out)
	}
	// A tool refusal changes nothing.
	_, out, _ = f.API("POST", "/v1/flows/instances/exp-7/prescribe", tok, map[string]any{"parameters": map[string]string{"iban": "x"}})
	prx := prescriptionID(t, out)
	code, body, _ := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, nil)
	if code != 422 || assenttest.ErrCode(body) != "EFFECT_FAILED" {
		t.Fatalf("apply with a refused tool: %d %v", code, body)
	}

	_, out, raw = f.API("POST", "/v1/flows/instances/exp-7/prescribe", tok, map[string]any{"parameters": map[string]string{"iban": iban, "reference": "EXP-7"}})
	if decisionOf(t, out).Kind != "PRESCRIBED" || strings.Contains(raw, iban) {
		t.Fatalf("prescribe: %s", raw)
	}
	prx = prescriptionID(t, out)
	// Parameters at apply must match the binding.
	if code, body, _ := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, map[string]any{"parameters": map[string]string{"iban": "DE00000000000000000000", "reference": "EXP-7"}}); code != 400 || assenttest.ErrCode(body) != "invalid_request" {
		t.Fatalf("apply with other parameters: %d %v", code, body)
	}
	code, rc, raw := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, map[string]any{"parameters": map[string]string{"iban": iban, "reference": "EXP-7"}})
	if code != 200 || rc["phase"] != "paid" || rc["revision"] != 1.0 || strings.Contains(raw, iban) {
		t.Fatalf("apply: %d %s", code, raw)
	}
	// Applying again returns the same receipt.
	if _, again, _ := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, nil); again["id"] != rc["id"] {
		t.Fatalf("re-apply: %v, want %v", again["id"], rc["id"])
	}
	_, v, raw := f.API("GET", "/v1/flows/instances/exp-7", tok, nil)
	if instanceOf(t, v).Facts["payment.status"].Value != "sent" || strings.Contains(raw, iban) {
		t.Fatalf("inspect: %s", raw)
	}
	var statuses []string
	for _, e := range assenttest.As[api.InstanceView](t, v).Journal {
		statuses = append(statuses, string(e.Status))
	}
	if got := strings.Join(statuses, ","); got != "begun,executing,aborted,begun,executing,committed" {
		t.Fatalf("journal = %s", got)
	}
	pays := f.Demo.Payments()
	if len(pays) != 1 || pays[0].IBANLast4 != "3000" || pays[0].Instance != "exp-7" {
		t.Fatalf("payments = %+v", pays)
	}

	// An agent cannot call the payment tool directly.
	cs, err := f.MCPSession(tok, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	direct, isErr := assenttest.CallTool(t, cs, "payments_send", map[string]any{"iban": iban})
	if !isErr || errorOf(t, direct).Code != "forbidden" {
		t.Fatalf("direct payments_send: %v", direct)
	}
}

// profileProgram applies a staged plan through control.apply; it needs a
// person, and its secret parameter must never be shown.
const profileProgram = `{
  "schema_version": 1, "program_id": "plan-change", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["control.apply"], "verifiers": ["conditions.match"], "capability_surface": ["control.write", "human.approve"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "changed", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["changed"]}]}],
  "transitions": [{
    "id": "apply-plan", "selection_class": "PROGRESS", "priority": 1,
    "source_phases": ["proposed"], "target_phases": ["changed"], "authority": ["human"],
    "parameters": [{"name": "ticket", "required": true}, {"name": "pin", "required": true, "secret": true}],
    "required_capabilities": ["control.write"], "effect": "control.apply", "verifier": "conditions.match",
    "prescription": {"operation": "apply_plan", "arguments": ["profile/plan"], "expected_postcondition": "the staged plan is live"}
  }]
}`

func TestFlowControlApplyNeedsAPerson(t *testing.T) {
	f := assenttest.StartDemo(t)
	const pin = "493817"
	// The operator loads the program with a service token granted flow.load.
	ops, _ := f.Issue(store.KindService, "ops", "flow.load")
	code, prog, raw := f.API("POST", "/v1/flows/programs", ops, []byte(profileProgram))
	if code != 201 || !strings.HasPrefix(prog["fingerprint"].(string), "sha256:") {
		t.Fatalf("load: %d %s", code, raw)
	}
	if code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": prog["fingerprint"], "id": "plan-1", "phase": "proposed"}); code != 201 {
		t.Fatalf("start: %d %s", code, raw)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "team"}); isErr {
		t.Fatalf("stage: %v", out)
	}
	out, isErr := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "plan-1", "parameters": map[string]string{"ticket": "T-12", "pin": pin}})
	if isErr || decisionOf(t, out).Awaiting != "human" || strings.Contains(string(assenttest.MustJSON(out)), pin) {
		t.Fatalf("prescribe: %v", out)
	}
	aprID := approvalOf(t, out).ID

	_, person := f.Issue(store.KindHuman, "approver", "control.write")
	cookie, csrf := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	if !strings.Contains(inbox, "T-12") || !strings.Contains(inbox, "(secret, hidden)") || strings.Contains(inbox, pin) {
		t.Fatalf("inbox parameters:\n%s", inbox)
	}
	if inbox := assenttest.ReadAll(f.Get("/inbox", cookie)); !strings.Contains(inbox, "Control profile/plan") || !strings.Contains(inbox, "team") {
		t.Fatalf("the card does not show the staged plan:\n%s", inbox)
	}
	if _, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie); !strings.Contains(page, "Approved: step") {
		t.Fatalf("approve: %s", page)
	}
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": map[string]any{"formId": "profile", "controlId": "plan"}})
	if v := assenttest.As[control.Snapshot](t, snap).State.Value; v != "team" {
		t.Fatalf("plan after approval = %v", v)
	}
	for _, path := range []string{"/v1/flows/instances/plan-1", "/v1/flows/approvals/" + aprID} {
		if _, _, raw := f.API("GET", path, f.Token, nil); strings.Contains(raw, pin) {
			t.Fatalf("%s shows the secret: %s", path, raw)
		}
	}
	if page := assenttest.ReadAll(f.Get("/flows/instances/plan-1", cookie)); strings.Contains(page, pin) || !strings.Contains(page, "rcp-") {
		t.Fatalf("instance page: %s", page)
	}
}

func TestFlowHTTPErrors(t *testing.T) {
	f := assenttest.StartDemo(t)
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"invalid program", "POST", "/v1/flows/programs", []byte(`{"schema_version":1}`), 400, "PROGRAM_INVALID"},
		{"unsupported schema", "POST", "/v1/flows/programs", []byte(`{"schema_version":2}`), 400, "PROGRAM_SCHEMA_UNSUPPORTED"},
		{"unknown program", "POST", "/v1/flows/instances", map[string]any{"program": "nope", "phase": "draft"}, 404, "not_found"},
		{"bad phase", "POST", "/v1/flows/instances", map[string]any{"program": "expense-approval", "phase": "Bad Phase"}, 400, "STATE_INVALID"},
		{"unknown objective", "POST", "/v1/flows/instances", map[string]any{"program": "expense-approval", "phase": "draft", "objective": "nope"}, 400, "OBJECTIVE_UNKNOWN"},
		{"bad id", "POST", "/v1/flows/instances", map[string]any{"program": "expense-approval", "phase": "draft", "id": "../x"}, 400, "invalid_request"},
		{"taken id", "POST", "/v1/flows/instances", map[string]any{"program": "expense-approval", "phase": "draft", "id": demo.ExpenseID}, 409, "already_exists"},
		{"unknown field", "POST", "/v1/flows/instances", map[string]any{"program": "expense-approval", "phase": "draft", "owner": "x"}, 400, "invalid_request"},
		{"unknown prescription", "POST", "/v1/flows/prescriptions/prx-00/apply", nil, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, raw := f.API(tc.method, tc.path, f.Token, tc.body)
			if code != tc.status || assenttest.ErrCode(body) != tc.code {
				t.Fatalf("%d %s, want %d %s", code, raw, tc.status, tc.code)
			}
		})
	}
	// An invalid program's errors carry their JSON paths.
	_, body, _ := f.API("POST", "/v1/flows/programs", f.Token, []byte(`{"schema_version":1}`))
	if errs, _ := errorOf(t, body).Data["errors"].([]any); len(errs) == 0 {
		t.Fatalf("no error list: %v", body)
	}
}

func TestFlowRefusedDecisionsAndPrograms(t *testing.T) {
	f := assenttest.StartDemo(t)
	code, body, _ := f.API("GET", "/v1/flows/programs", f.Token, nil)
	if code != 200 || len(body["programs"].([]any)) != 2 {
		t.Fatalf("programs: %v", body)
	}
	code, body, _ = f.API("GET", "/v1/flows/programs/deployment", f.Token, nil)
	if code != 200 || !strings.Contains(string(assenttest.MustJSON(body["canonical"])), "deployment/rollback") {
		t.Fatalf("program: %d %v", code, body)
	}
	// An agent without grants: a transition it may take is refused at
	// admission.
	bare, _, err := auth.IssueToken(context.Background(), f.DB, "agent", "bare", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f.API("POST", "/v1/flows/instances", bare, map[string]any{"program": "expense-approval", "id": "d-1", "phase": "draft",
		"facts": map[string]any{"expense.amount": map[string]string{"status": "known", "value": "120.00 EUR"}}})
	_, out, _ := f.API("POST", "/v1/flows/instances/d-1/prescribe", bare, nil)
	if decisionOf(t, out).Kind != "REFUSED" || decisionOf(t, out).Code != "CAPABILITY_DENIED" {
		t.Fatalf("prescribe without grants: %v", out)
	}
	_, out, _ = f.API("POST", "/v1/flows/instances/d-1/prescribe", bare, map[string]any{"transition": "nope"})
	if decisionOf(t, out).Code != "TRANSITION_UNKNOWN" {
		t.Fatalf("unknown transition: %v", out)
	}
}

func TestFlowToolAnnotations(t *testing.T) {
	f := assenttest.Start(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][4]bool{ // readOnly, destructive, idempotent, openWorld
		"flows_list":      {true, false, true, false},
		"flows_inspect":   {true, false, true, false},
		"flows_prescribe": {false, false, true, false},
		"flows_apply":     {false, true, true, true},
	}
	seen := 0
	for _, tl := range list.Tools {
		w, ok := want[tl.Name]
		if !ok {
			continue
		}
		seen++
		a := tl.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s: annotations not all set", tl.Name)
		}
		if got := [4]bool{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}; got != w {
			t.Errorf("%s annotations = %v, want %v", tl.Name, got, w)
		}
	}
	if seen != len(want) {
		t.Fatalf("found %d of the flows tools", seen)
	}
}

func TestFlowPagesRender(t *testing.T) {
	f := assenttest.StartDemo(t)
	cookie, _ := f.SignIn()
	page := assenttest.ReadAll(f.Get("/flows", cookie))
	for _, want := range []string{"expense-approval", "deployment", "sha256:", "<svg", `role="img"`, "reconcile-payment", "RECOVERY", "iban (secret) *"} {
		if !strings.Contains(page, want) {
			t.Fatalf("/flows lacks %q", want)
		}
	}
	// A person who does not supervise the agent does not see its instance
	// until it waits for a person; the owner, who supervises the agent,
	// sees it all along.
	_, stranger := f.Issue(store.KindHuman, "stranger")
	strangerCookie, _ := f.SignInAs(stranger.ID)
	if resp := f.Get("/flows/instances/"+demo.ExpenseID, strangerCookie); resp.StatusCode != 404 {
		t.Fatalf("instance page before approval request: %d", resp.StatusCode)
	}
	if resp := f.Get("/flows/instances/"+demo.ExpenseID, cookie); resp.StatusCode != 200 {
		t.Fatalf("the supervisor's instance page before approval request: %d", resp.StatusCode)
	}
	f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	page = assenttest.ReadAll(f.Get("/flows/instances/"+demo.ExpenseID, strangerCookie))
	for _, want := range []string{"Conference travel", "over_limit", "Waiting for a person", "No transition has been committed yet"} {
		if !strings.Contains(page, want) {
			t.Fatalf("instance page lacks %q", want)
		}
	}
	part := assenttest.ReadAll(f.Get("/flows/instances/"+demo.ExpenseID+"?partial=1", cookie))
	if strings.Contains(part, "<html") || !strings.Contains(part, `id="flow-phase">submitted<`) || !strings.Contains(part, "over_limit") {
		t.Fatalf("partial instance page:\n%s", part)
	}
}

// TestFlowRunSpawn runs the deployment program: run.spawn starts the
// deploy Recipe, its end becomes the fact run.deploy, and the next step
// records the deployment.
func TestFlowRunSpawn(t *testing.T) {
	f := assenttest.StartDemo(t)
	// The demo wrote the deploy Recipe; a quicker one keeps the test short.
	recipe := `{"description":"test deploy","args":["environment","version"],"template":"echo deploying {version} to {environment}"}`
	if err := os.WriteFile(filepath.Join(f.Dir, "recipes", "deploy.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, _ := f.Issue(store.KindService, "deployer", "command.execute", "state.write")
	if code, _, raw := f.API("POST", "/v1/flows/instances", tok, map[string]any{"program": "deployment", "id": "dep-1", "phase": "ready", "objective": "deployed",
		"facts": map[string]any{"build.status": map[string]string{"status": "known", "value": "passed"}}}); code != 201 {
		t.Fatalf("start: %d %s", code, raw)
	}
	_, out, raw := f.API("POST", "/v1/flows/instances/dep-1/prescribe", tok, map[string]any{"parameters": map[string]string{"version": "1.2.3"}})
	prx := prescriptionID(t, out)
	if decisionOf(t, out).Transition != "deployment/deploy" || prx == "" {
		t.Fatalf("prescribe deploy: %s", raw)
	}
	code, rc, raw := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, nil)
	if code != 200 || rc["phase"] != "deploying" {
		t.Fatalf("apply deploy: %d %s", code, raw)
	}
	// The Run ends on its own; its end becomes a fact.
	testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
		_, v, _ := f.API("GET", "/v1/flows/instances/dep-1", tok, nil)
		if st := instanceOf(t, v).Facts["run.deploy"].Value; st == "failed" {
			t.Fatalf("run.deploy = %v", st)
		} else if st != "succeeded" {
			c.Errorf("run.deploy = %v", st)
		}
	}, "the deploy Run's end as a fact")
	code, runView, raw := f.API("GET", "/v1/runs/dep-1.deploy.0", tok, nil)
	if code != 200 || assenttest.As[run.Run](t, runView).Status != run.StatusDone {
		t.Fatalf("the deploy Run: %d %s", code, raw)
	}
	_, out, _ = f.API("POST", "/v1/flows/instances/dep-1/prescribe", tok, nil)
	prx = prescriptionID(t, out)
	if decisionOf(t, out).Transition != "deployment/mark-deployed" {
		t.Fatalf("after the Run: %v", out)
	}
	if code, rc, raw := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, nil); code != 200 || rc["phase"] != "deployed" {
		t.Fatalf("apply mark-deployed: %d %s", code, raw)
	}
	if _, out, _ = f.API("POST", "/v1/flows/instances/dep-1/prescribe", tok, nil); decisionOf(t, out).Kind != "MARKED" {
		t.Fatalf("objective: %v", out)
	}
}

// TestFlowApproverWithoutGrants: approving adds only human.approve; a
// person whose token lacks the rest is refused and the request stays open.
func TestFlowApproverWithoutGrants(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, out, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	aprID := approvalOf(t, out).ID
	// A person who holds human.approve only.
	approver := store.Principal{ID: "p_approver", Kind: store.KindHuman, Name: "approver", Grants: []string{"human.approve"}, CreatedAt: time.Now()}
	if err := f.DB.Principals().CreatePrincipal(context.Background(), approver, nil); err != nil {
		t.Fatal(err)
	}
	cookie, csrf := f.SignInAs(approver.ID)
	loc, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie)
	if loc != "/inbox" || !strings.Contains(page, "CAPABILITY_DENIED") || !strings.Contains(page, "state.write") {
		t.Fatalf("approve without grants: %s\n%s", loc, page)
	}
	if _, a, _ := f.API("GET", "/v1/flows/approvals/"+aprID, f.Token, nil); a["status"] != "pending" {
		t.Fatalf("approval after refusal: %v", a)
	}
}

// TestFlowRecoverInterruptedAtStart: an apply cut short by a crash leaves
// its instance marked; the next server start puts it in recovery mode.
func TestFlowRecoverInterruptedAtStart(t *testing.T) {
	f := assenttest.StartDemo(t)
	tok, _ := f.Issue(store.KindService, "payer", "tool.invoke")
	f.API("POST", "/v1/flows/instances", tok, map[string]any{"program": "expense-approval", "id": "exp-3", "phase": "approved"})
	_, out, _ := f.API("POST", "/v1/flows/instances/exp-3/prescribe", tok, map[string]any{"parameters": map[string]string{"iban": "DE89370400440532013000"}})
	prx := prescriptionID(t, out)
	if prx == "" {
		t.Fatalf("prescribe: %v", out)
	}
	// What a crash between begun and committed leaves behind.
	err := f.DB.Flows().Update(context.Background(), func(tx flow.Tx) error {
		inst, err := tx.Instance("exp-3")
		if err != nil {
			return err
		}
		next := inst.Clone()
		next.Pending = prx
		return tx.UpdateInstance(next, inst.Revision, "")
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := f.Restart(nil).Srv
	inst, err := srv.Flows().Kernel().Instance(context.Background(), "exp-3")
	if err != nil || inst.Recovery == nil || inst.Pending != "" || inst.Facts["payment.status"].Status != flow.StatusUnknown {
		t.Fatalf("after restart: %+v %v", inst, err)
	}
	j, _ := srv.Flows().Kernel().Journal(context.Background(), "exp-3")
	if len(j) == 0 || j[len(j)-1].Status != flow.JournalRecoveryRequired {
		t.Fatalf("journal: %+v", j)
	}
}

// TestFlowApproveFromWebScript: the web UI's own script may decide with the
// session cookie, a same-origin Origin and the CSRF header.
func TestFlowApproveFromWebScript(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, out, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	aprID := approvalOf(t, out).ID
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	post := func(hdr map[string]string) (int, map[string]any) {
		r, _ := http.NewRequest("POST", f.HTTP.URL+"/v1/flows/approvals/"+aprID+"/approve", nil)
		r.AddCookie(cookie)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		resp, err := f.HTTP.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := post(map[string]string{"Origin": f.HTTP.URL}); code != 403 || assenttest.ErrCode(m) != "bad_origin" {
		t.Fatalf("without CSRF: %d %v", code, m)
	}
	code, m := post(map[string]string{"Origin": f.HTTP.URL, "X-CSRF-Token": csrf})
	if code != 200 || !strings.HasPrefix(m["id"].(string), "rcp-") || m["principal"] != person.ID {
		t.Fatalf("approve: %d %v", code, m)
	}
	// Approving again is refused with who approved and the receipt.
	again, m2 := post(map[string]string{"Origin": f.HTTP.URL, "X-CSRF-Token": csrf})
	data := errorOf(t, m2).Data
	if again != 409 || assenttest.ErrCode(m2) != "already_decided" || data["status"] != "approved" || data["decided_by"] != person.ID || data["receipt"] != m["id"] {
		t.Fatalf("approve again: %d %v", again, m2)
	}
}

// sneakProgram calls the demo payment tool from a transition its
// registration does not name, with agent authority.
const sneakProgram = `{
  "schema_version": 1, "program_id": "sneak", "program_version": "1", "requires_runtime": ">=0.1.0",
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

// TestFlowAgentLoadIsAProposal: an agent's program is stored as a
// proposal that starts nothing; a person approves it in the inbox, and then
// it starts.
func TestFlowAgentLoadIsAProposal(t *testing.T) {
	f := assenttest.StartDemo(t)
	code, out, raw := f.API("POST", "/v1/flows/programs", f.Token, []byte(sneakProgram))
	proposal := assenttest.As[api.ProgramProposal](t, out)
	fp := proposal.Program.Fingerprint
	if code != 202 || proposal.Status != "pending_approval" || proposal.Program.Status != "proposed" || !strings.Contains(proposal.URL, "/inbox#section-flow-programs") {
		t.Fatalf("agent load: %d %s", code, raw)
	}
	for _, ref := range []string{fp, "sneak"} {
		code, body, _ := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": ref, "phase": "start"})
		if code != 403 && code != 404 || assenttest.ErrCode(body) != "PROGRAM_NOT_ACTIVE" && assenttest.ErrCode(body) != "not_found" {
			t.Fatalf("start %s: %d %v", ref, code, body)
		}
	}
	// No token decides, not even a person's.
	humanTok, person := f.Issue(store.KindHuman, "approver")
	for _, tok := range []string{f.Token, humanTok} {
		if code, body, _ := f.API("POST", "/v1/flows/programs/"+fp+"/approve", tok, nil); code != 403 || assenttest.ErrCode(body) != "human_confirmation_required" {
			t.Fatalf("token approve: %d %v", code, body)
		}
	}
	cookie, csrf := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	for _, want := range []string{"Flow programs to load", fp, "/web/flows/programs/" + fp + "/approve", "payments_send"} {
		if !strings.Contains(inbox, want) {
			t.Fatalf("inbox lacks %q:\n%s", want, inbox)
		}
	}
	loc, page := f.Decide("/web/flows/programs/"+fp+"/approve", url.Values{"csrf": {csrf}}, cookie)
	if loc != "/flows" || !strings.Contains(page, "is now active") {
		t.Fatalf("approve: %s\n%s", loc, page)
	}
	if code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "sneak", "phase": "start"}); code != 201 {
		t.Fatalf("start after approval: %d %s", code, raw)
	}
}

// TestFlowStartByIDPicksThePersonsProgram: another principal's program
// with an existing id neither breaks nor changes starting by id; a
// person's newer load does.
func TestFlowStartByIDPicksThePersonsProgram(t *testing.T) {
	f := assenttest.StartDemo(t)
	demo, err := f.Srv.Flows().Kernel().ActiveProgram(context.Background(), "expense-approval")
	if err != nil {
		t.Fatal(err)
	}
	src, ok := examples.Programs()["expense-approval.json"]
	if !ok {
		t.Fatal("no example expense-approval.json")
	}
	// Any change the kernel sees gives a new fingerprint.
	other := bytes.Replace(src, []byte(`"priority": 1`), []byte(`"priority": 9`), 1)
	if code, _, raw := f.API("POST", "/v1/flows/programs", f.Token, other); code != 202 {
		t.Fatalf("agent load: %d %s", code, raw)
	}
	code, inst, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "expense-approval", "phase": "draft"})
	if code != 201 || inst["program_fingerprint"] != demo.Fingerprint() {
		t.Fatalf("start by id after an agent's load: %d %s", code, raw)
	}
	humanTok, _ := f.Issue(store.KindHuman, "ops")
	code, prog, raw := f.API("POST", "/v1/flows/programs", humanTok, other)
	if code != 201 || prog["status"] != "active" {
		t.Fatalf("person's load: %d %s", code, raw)
	}
	code, inst, raw = f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "expense-approval", "phase": "draft"})
	if code != 201 || inst["program_fingerprint"] != prog["fingerprint"] {
		t.Fatalf("start by id after a person's load: %d %s", code, raw)
	}
}

// TestFlowEffectOnlyToolNamesItsCallers: payments_send runs only from the
// expense program's pay transition; another active program's transition is
// refused before the tool acts.
func TestFlowEffectOnlyToolNamesItsCallers(t *testing.T) {
	f := assenttest.StartDemo(t)
	humanTok, _ := f.Issue(store.KindHuman, "ops")
	if code, _, raw := f.API("POST", "/v1/flows/programs", humanTok, []byte(sneakProgram)); code != 201 {
		t.Fatalf("person's load: %d %s", code, raw)
	}
	tok, _ := f.Issue(store.KindAgent, "payer", "tool.invoke")
	f.API("POST", "/v1/flows/instances", tok, map[string]any{"program": "sneak", "id": "s-1", "phase": "start"})
	_, out, raw := f.API("POST", "/v1/flows/instances/s-1/prescribe", tok, map[string]any{"parameters": map[string]string{"iban": "DE89370400440532013000"}})
	prx := prescriptionID(t, out)
	if prx == "" {
		t.Fatalf("prescribe: %s", raw)
	}
	code, body, _ := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, nil)
	if code != 422 || assenttest.ErrCode(body) != "EFFECT_FAILED" || !strings.Contains(string(assenttest.MustJSON(body)), "forbidden") {
		t.Fatalf("apply: %d %v", code, body)
	}
	n := len(f.Demo.Payments())
	if n != 0 {
		t.Fatalf("%d payments were sent", n)
	}
}

// TestFlowToolFailureAfterTheCallIsUncertain: a tool that acted and then
// failed (a callback answering 500) leaves the outcome uncertain: the
// instance needs recovery, its target facets are unknown, and applying
// again is refused without calling the tool.
func TestFlowToolFailureAfterTheCallIsUncertain(t *testing.T) {
	f := assenttest.Start(t, nil)
	var calls atomic.Int32
	err := f.Srv.Tools().Register(tool.Tool{Name: "bank_send", Description: "test bank", Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
		calls.Add(1)
		return nil, tool.Errorf("tool_failed", "the bank answered 500")
	}})
	if err != nil {
		t.Fatal(err)
	}
	prog := strings.ReplaceAll(strings.ReplaceAll(sneakProgram, `"sneak"`, `"bank"`), "payments_send", "bank_send")
	prog = strings.Replace(prog, `"required_capabilities"`, `"target_conditions": [{"facet": "payment.status", "statuses": ["known"], "values": ["sent"]}], "required_capabilities"`, 1)
	ops, _ := f.Issue(store.KindService, "ops", "flow.load")
	if code, _, raw := f.API("POST", "/v1/flows/programs", ops, []byte(prog)); code != 201 {
		t.Fatalf("load: %d %s", code, raw)
	}
	tok, _ := f.Issue(store.KindAgent, "payer", "tool.invoke")
	f.API("POST", "/v1/flows/instances", tok, map[string]any{"program": "bank", "id": "b-1", "phase": "start"})
	_, out, _ := f.API("POST", "/v1/flows/instances/b-1/prescribe", tok, map[string]any{"parameters": map[string]string{"iban": "DE89370400440532013000"}})
	prx := prescriptionID(t, out)
	for i := range 3 {
		if code, body, _ := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, nil); code != 409 || assenttest.ErrCode(body) != "RECOVERY_REQUIRED" {
			t.Fatalf("apply %d: %d %v", i, code, body)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	_, v, _ := f.API("GET", "/v1/flows/instances/b-1", tok, nil)
	if instanceOf(t, v).Recovery == nil || instanceOf(t, v).Facts["payment.status"].Status != "unknown" {
		t.Fatalf("instance: %v", v)
	}
}

// TestFlowRunSpawnKeepsSecretParameters: a secret parameter given to
// run.spawn reaches the Run but none of its views.
func TestFlowRunSpawnKeepsSecretParameters(t *testing.T) {
	f := assenttest.Start(t, nil)
	recipe := `{"description":"test","args":["witness"],"template":"echo started"}`
	if err := os.MkdirAll(filepath.Join(f.Dir, "recipes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Dir, "recipes", "sealed.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := `{
  "schema_version": 1, "program_id": "sealed", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["run.spawn"], "verifiers": ["conditions.match"], "capability_surface": ["command.execute"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "done", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["running"]}]}],
  "transitions": [{
    "id": "go", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["ready"], "target_phases": ["running"],
    "authority": ["service"], "parameters": [{"name": "witness", "required": true, "secret": true}],
    "required_capabilities": ["command.execute"], "effect": "run.spawn", "verifier": "conditions.match",
    "prescription": {"operation": "go", "arguments": ["sealed"], "expected_postcondition": "started"}
  }]
}`
	tok, _ := f.Issue(store.KindService, "ops", "flow.load", "command.execute")
	if code, _, raw := f.API("POST", "/v1/flows/programs", tok, []byte(prog)); code != 201 {
		t.Fatalf("load: %d %s", code, raw)
	}
	f.API("POST", "/v1/flows/instances", tok, map[string]any{"program": "sealed", "id": "sd-1", "phase": "ready"})
	const secret = "correct-horse-battery"
	_, out, _ := f.API("POST", "/v1/flows/instances/sd-1/prescribe", tok, map[string]any{"parameters": map[string]string{"witness": secret}})
	prx := prescriptionID(t, out)
	if code, _, raw := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, nil); code != 200 {
		t.Fatalf("apply: %d %s", code, raw)
	}
	for _, path := range []string{"/v1/runs/sd-1.go.0", "/v1/flows/instances/sd-1"} {
		code, _, raw := f.API("GET", path, tok, nil)
		if code != 200 || strings.Contains(raw, secret) {
			t.Fatalf("%s: %d %s", path, code, raw)
		}
	}
}

// emailProgram applies the staged email of the demo profile; a person must
// approve it.
const emailProgram = `{
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

// TestFlowControlApplyBindsWhatThePersonSaw: the approval card shows the
// current and proposed email; an agent re-staging another value after the
// approval was filed makes Approve refuse as stale, and nothing is applied.
func TestFlowControlApplyBindsWhatThePersonSaw(t *testing.T) {
	f := assenttest.StartDemo(t)
	humanTok, person := f.Issue(store.KindHuman, "approver", "control.write")
	if code, _, raw := f.API("POST", "/v1/flows/programs", humanTok, []byte(emailProgram)); code != 201 {
		t.Fatalf("load: %d %s", code, raw)
	}
	f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "email-change", "id": "em-1", "phase": "proposed"})
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	stage := func(v string) {
		if out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "email"}, "value": v}); isErr {
			t.Fatalf("stage %s: %v", v, out)
		}
	}
	stage("ada.new@example.com")
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "em-1"})
	aprID := approvalOf(t, out).ID
	if b := approvalOf(t, out).Bindings; aprID == "" || len(b) != 1 || b[0].Value != "ada.new@example.com" || b[0].Current != "ada@example.com" {
		t.Fatalf("prescribe: %v", out)
	}
	cookie, csrf := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	for _, want := range []string{"Control profile/email", "ada@example.com", "ada.new@example.com", "proposal revision"} {
		if !strings.Contains(inbox, want) {
			t.Fatalf("the card lacks %q:\n%s", want, inbox)
		}
	}
	stage("attacker@evil.example")
	loc, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie)
	if loc != "/inbox" || !strings.Contains(page, "STALE_PRESCRIPTION") || !strings.Contains(page, "attacker@evil.example") {
		t.Fatalf("approve after re-staging: %s\n%s", loc, page)
	}
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": map[string]any{"formId": "profile", "controlId": "email"}})
	if v := assenttest.As[control.Snapshot](t, snap).State.Value; v != "ada@example.com" {
		t.Fatalf("email after the refused approval = %v", v)
	}
	if _, a, _ := f.API("GET", "/v1/flows/approvals/"+aprID, f.Token, nil); a["status"] != "stale" || len(a["changed"].([]any)) == 0 {
		t.Fatalf("approval: %v", a)
	}
	// The instance page keeps the refused approval and what changed.
	page = assenttest.ReadAll(f.Get("/flows/instances/em-1", cookie))
	for _, want := range []string{"Decided approvals", "Changed since it was filed", "attacker@evil.example", "Nothing was applied"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the instance page lacks %q:\n%s", want, page)
		}
	}
}

// Starting an instance under an id another principal holds answers exactly
// as starting under an id the caller holds itself: it says the id is taken
// and nothing about whose it is.
func TestFlowInstanceIDIsNoExistenceOracle(t *testing.T) {
	f := assenttest.StartDemo(t)
	other, _ := f.Issue(store.KindAgent, "other")
	start := func(tok string) (int, string) {
		code, out, raw := f.API("POST", "/v1/flows/instances", tok, map[string]any{"program": "expense-approval", "id": "mine-1", "phase": "draft"})
		if code == 201 {
			return code, ""
		}
		e, _ := out["error"].(map[string]any)
		if e == nil {
			t.Fatalf("refusal without the error shape: %s", raw)
		}
		return code, fmt.Sprint(e["code"], ": ", e["message"])
	}
	if code, msg := start(f.Token); code != 201 {
		t.Fatalf("first start: %d %s", code, msg)
	}
	ownCode, ownMsg := start(f.Token)
	otherCode, otherMsg := start(other)
	if ownCode == 201 || otherCode != ownCode || otherMsg != ownMsg {
		t.Fatalf("taken by oneself: %d %q; taken by another: %d %q", ownCode, ownMsg, otherCode, otherMsg)
	}
	if code, _, _ := f.API("GET", "/v1/flows/instances/mine-1", other, nil); code != 404 {
		t.Fatalf("another agent inspects the instance: %d, want 404", code)
	}
}

// TestFlowExpenseCardReadsLikeTheDecision: the approval card of the demo
// expense says, first, what the person decides: the amount with its
// currency, what it is for and the payee's whole IBAN in groups of four,
// with a warning while no expense to that IBAN was approved before; it
// says what the pay step will send, links to the instance, and the
// instance page can decide too.
func TestFlowExpenseCardReadsLikeTheDecision(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, out, raw := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	aprID := approvalOf(t, out).ID
	const payee = "PT50 0002 0123 1234 5678 9123 4"
	const sentence = "Approve 1,250.00 EUR for Conference travel, Lisbon, paid to " + payee
	if aprID == "" || approvalOf(t, out).Summary != sentence {
		t.Fatalf("prescribe: %s", raw)
	}
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	card := inbox[strings.Index(inbox, `id="section-flow-approvals"`):]
	card = card[:strings.Index(card, "/web/flows/approvals/"+aprID+"/decline")]
	card = card[strings.LastIndex(card, `<h3 class="summary">`):]
	for _, want := range []string{
		`<h3 class="summary">` + sentence + `</h3>`,
		"1,250.00 EUR", "Conference travel",
		`class="warn" role="note">First payment to this account: no expense paid to ` + payee + " was approved before.",
		"the next step, pay, send 1,250.00 EUR to " + payee + " through payments_send",
		`href="/flows/instances/` + demo.ExpenseID + `"`,
		"/web/flows/approvals/" + aprID + "/approve",
	} {
		if !strings.Contains(card, want) {
			t.Errorf("the card lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("inbox:\n%s", card)
	}

	// The instance page shows the same card, with Approve and Decline,
	// and the whole IBAN among the facts.
	page := assenttest.ReadAll(f.Get("/flows/instances/"+demo.ExpenseID, cookie))
	for _, want := range []string{sentence, payee, "First payment to this account", `action="/web/flows/approvals/` + aprID + `/approve"`, `action="/web/flows/approvals/` + aprID + `/decline"`, `name="reason"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the instance page lacks %q:\n%s", want, page)
		}
	}
	loc, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}, "back": {"/flows/instances/" + demo.ExpenseID}}, cookie)
	if loc != "/flows/instances/"+demo.ExpenseID || !strings.Contains(page, "Approved: step") {
		t.Fatalf("approve from the instance page: %s\n%s", loc, page)
	}
	// The decided approval keeps its summary for the agent.
	if _, a, _ := f.API("GET", "/v1/flows/approvals/"+aprID, f.Token, nil); a["status"] != "approved" || a["summary"] != sentence {
		t.Fatalf("approval: %v", a)
	}
}

// TestFlowCardNamesANewPayee is the attack: with an agent's token only, an
// expense with the seeded amount and description pays the agent's own
// IBAN, which differs from the approved payee only in its middle digits.
// Once a person approved a payment to the seeded payee, its next expense
// carries no warning; the agent's card shows the whole IBAN and warns that
// it is the first payment to it.
func TestFlowCardNamesANewPayee(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	_, out, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	aprID := approvalOf(t, out).ID
	if _, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie); !strings.Contains(page, "Approved: step") {
		t.Fatalf("approve: %s", page)
	}
	for _, tc := range []struct {
		id, iban, shown string
		warn            bool
	}{
		{"exp-same", "pt50 0002 0123 1234 5678 9123 4", "PT50 0002 0123 1234 5678 9123 4", false},
		{"exp-agent", "PT50 9999 9999 9999 9999 9123 4", "PT50 9999 9999 9999 9999 9123 4", true},
	} {
		if code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "expense-approval", "id": tc.id, "phase": "draft", "objective": "expense-paid",
			"facts": map[string]any{"expense.amount": known("1250.00 EUR"), "expense.description": known("Conference travel, Lisbon"), "expense.payee_iban": known(tc.iban)}}); code != 201 {
			t.Fatalf("start %s: %d %s", tc.id, code, raw)
		}
		var apr string
		for range 2 { // submit, then the approval
			_, out, raw := f.API("POST", "/v1/flows/instances/"+tc.id+"/prescribe", f.Token, nil)
			if apr = approvalOf(t, out).ID; apr != "" {
				break
			}
			prx := prescriptionID(t, out)
			if code, _, raw := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", f.Token, nil); prx == "" || code != 200 {
				t.Fatalf("submit %s: %d %s", tc.id, code, raw)
			}
			_ = raw
		}
		if apr == "" {
			t.Fatalf("%s: no approval was filed", tc.id)
		}
		inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
		card := inbox[:strings.Index(inbox, "/web/flows/approvals/"+apr+"/decline")]
		card = card[strings.LastIndex(card, `<h3 class="summary">`):]
		if !strings.Contains(card, "paid to "+tc.shown+"</h3>") {
			t.Errorf("%s: the card does not show the whole IBAN %q:\n%s", tc.id, tc.shown, card)
		}
		if got := strings.Contains(card, `class="warn" role="note">First payment to this account`); got != tc.warn {
			t.Errorf("%s: the card warns %v, want %v:\n%s", tc.id, got, tc.warn, card)
		}
	}
}

// TestFlowPayOnlyToTheApprovedPayee is the attack: after a person approved
// 1,250.00 EUR paid to PT50 0002 0123 1234 5678 9123 4, the agent applies pay with its own
// IBAN. The payment tool refuses it and nothing is paid; paying the
// approved payee works.
func TestFlowPayOnlyToTheApprovedPayee(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, out, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	aprID := approvalOf(t, out).ID
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	if _, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie); !strings.Contains(page, "Approved: step") {
		t.Fatalf("approve: %s", page)
	}
	pay := func(iban string) (int, map[string]any) {
		_, out, raw := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, map[string]any{"parameters": map[string]string{"iban": iban}})
		prx := prescriptionID(t, out)
		if prx == "" {
			t.Fatalf("prescribe pay: %s", raw)
		}
		code, body, _ := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", f.Token, nil)
		return code, body
	}
	const attacker = "DE89370400440532013000"
	if code, body := pay(attacker); code != 422 || assenttest.ErrCode(body) != "EFFECT_FAILED" || !strings.Contains(fmt.Sprint(body), "not the payee a person approved") {
		t.Fatalf("pay to another IBAN: %d %v", code, body)
	}
	n := len(f.Demo.Payments())
	if n != 0 {
		t.Fatalf("%d payments were sent to an IBAN nobody approved", n)
	}
	if code, body := pay("pt50 0002 0123 1234 5678 9123 4"); code != 200 || body["phase"] != "paid" {
		t.Fatalf("pay to the approved payee: %d %v", code, body)
	}
}

// TestFlowControlApplyCardShowsBothValues: a control.apply approval reads
// as "Email: current → proposed".
func TestFlowControlApplyCardShowsBothValues(t *testing.T) {
	f := assenttest.StartDemo(t)
	humanTok, person := f.Issue(store.KindHuman, "approver", "control.write")
	if code, _, raw := f.API("POST", "/v1/flows/programs", humanTok, []byte(emailProgram)); code != 201 {
		t.Fatalf("load: %d %s", code, raw)
	}
	f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "email-change", "id": "em-2", "phase": "proposed"})
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "email"}, "value": "ada.new@example.com"}); isErr {
		t.Fatalf("stage: %v", out)
	}
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "em-2"})
	const line = "Email: ada@example.com → ada.new@example.com"
	if approvalOf(t, out).Summary != "Apply the proposed change: "+line {
		t.Fatalf("prescribe: %v", out)
	}
	cookie, _ := f.SignInAs(person.ID)
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	if !strings.Contains(inbox, `<h3 class="summary">Apply the proposed change: `+line+`</h3>`) || !strings.Contains(inbox, "<li>"+line+"</li>") {
		t.Fatalf("the card lacks %q:\n%s", line, inbox)
	}
}

// TestFlowApprovalCardExplainsMissingGrants: a person whose grants lack
// what the transition needs gets no Approve button but a sentence saying
// which grant is missing and whom to ask; Decline stays.
func TestFlowApprovalCardExplainsMissingGrants(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, out, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, nil)
	aprID := approvalOf(t, out).ID
	_, weak := f.Issue(store.KindHuman, "viewer", "human.approve")
	_, strong := f.Issue(store.KindHuman, "approver", "state.write")
	for _, tc := range []struct {
		person  store.Principal
		approve bool
	}{{weak, false}, {strong, true}} {
		cookie, _ := f.SignInAs(tc.person.ID)
		for _, path := range []string{"/inbox", "/flows/instances/" + demo.ExpenseID} {
			page := assenttest.ReadAll(f.Get(path, cookie))
			approve := strings.Contains(page, `action="/web/flows/approvals/`+aprID+`/approve"`)
			explained := strings.Contains(page, "You cannot approve this: it needs state.write") && strings.Contains(page, "Ask an operator")
			if approve != tc.approve || explained == tc.approve || !strings.Contains(page, `action="/web/flows/approvals/`+aprID+`/decline"`) {
				t.Fatalf("%s for %s: approve button %v, explained %v:\n%s", path, tc.person.Name, approve, explained, page)
			}
		}
	}
}

// TestFlowEffectSummaries: run.spawn names the Recipe and its values,
// tool.call the tool and its parameters; secret values are masked.
func TestFlowEffectSummaries(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := context.Background()
	prog := func(effect, cap, args string) *flow.Program {
		p, err := f.Srv.Flows().Kernel().AddProgram(ctx, []byte(`{
  "schema_version": 1, "program_id": "sum-`+strings.ReplaceAll(effect, ".", "-")+`", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["`+effect+`"], "verifiers": ["conditions.match"], "capability_surface": ["`+cap+`"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "done", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["done"]}]}],
  "transitions": [{
    "id": "go", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["ready"], "target_phases": ["done"],
    "authority": ["human"], "parameters": [{"name": "token", "secret": true}, {"name": "version"}],
    "required_capabilities": ["`+cap+`"], "effect": "`+effect+`", "verifier": "conditions.match",
    "prescription": {"operation": "go", "arguments": `+args+`, "expected_postcondition": "done"}
  }]
}`))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	params := []flow.ApprovalParameter{{Name: "token", Secret: true, Digest: "sha256:00"}, {Name: "version", Value: "1.2.3"}}
	for _, tc := range []struct {
		name     string
		p        *flow.Program
		bindings []flow.Binding
		want     string
	}{
		{"run.spawn", prog("run.spawn", "command.execute", `["deploy", "--environment", "staging"]`), nil,
			"Start the Recipe deploy with environment: staging, token: (secret), version: 1.2.3"},
		{"tool.call", prog("tool.call", "tool.invoke", `["payments_send"]`), []flow.Binding{{Kind: "tool", Name: "payments_send", Value: "payments_send (Send a payment (demo))"}},
			"Call the tool payments_send (Send a payment (demo)) with token: (secret), version: 1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.p.Transitions()
			sum := flows.SummarizeApproval(f.Srv.Flows(), ctx, &flow.SummaryRequest{Program: tc.p, Instance: flow.Instance{ID: "i-1", Phase: "ready"}, Transition: ts[0], Parameters: params, Bindings: tc.bindings})
			if sum.Text != tc.want {
				t.Fatalf("summary = %q, want %q", sum.Text, tc.want)
			}
		})
	}
}

func TestShowIBAN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"PT50000201231234567891234", "PT50 0002 0123 1234 5678 9123 4"},
		{"de89 3704 0044 0532 0130 00", "DE89 3704 0044 0532 0130 00"},
		{"PT50999999999999999991234", "PT50 9999 9999 9999 9999 9123 4"},
		{"1234", `"1234" (not shaped like an IBAN)`},
		{"PT50-0002-0123-1234-5678", `"PT50-0002-0123-1234-5678" (not shaped like an IBAN)`},
		{"PT50\u202e0002012312345678", `"PT50\u202e0002012312345678" (not shaped like an IBAN)`},
	} {
		if got := flows.ShowIBAN(tc.in); got != tc.want {
			t.Errorf("flows.ShowIBAN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzShowIBAN: an IBAN is shown whole, in groups of at most four;
// anything else is shown quoted, never shortened.
func FuzzShowIBAN(f *testing.F) {
	for _, s := range []string{demo.PayeeIBAN, "DE89 3704 0044 0532 0130 00", "", "PT50", "ÄÖ89370400440532013000", "PT50\u202e00020123123456"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := flows.ShowIBAN(s)
		if quoted, ok := strings.CutSuffix(got, " (not shaped like an IBAN)"); ok {
			if u, err := strconv.Unquote(quoted); err != nil || u != s {
				t.Fatalf("flows.ShowIBAN(%q) = %q does not show the value", s, got)
			}
			return
		}
		if strings.ReplaceAll(got, " ", "") != flows.NormalizeIBAN(s) {
			t.Fatalf("flows.ShowIBAN(%q) = %q is not the whole IBAN", s, got)
		}
		for _, g := range strings.Split(got, " ") {
			if len(g) == 0 || len(g) > 4 {
				t.Fatalf("flows.ShowIBAN(%q) = %q has a group of %d", s, got, len(g))
			}
		}
	})
}

// limitProgram applies the staged credit limits of the accounts form; a
// person must approve it.
const limitProgram = `{
  "schema_version": 1, "program_id": "limit-change", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["control.apply"], "verifiers": ["conditions.match"], "capability_surface": ["control.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "changed", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["changed"]}]}],
  "transitions": [{
    "id": "apply-limits", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["proposed"], "target_phases": ["changed"],
    "authority": ["human"], "required_capabilities": ["control.write"], "effect": "control.apply", "verifier": "conditions.match",
    "prescription": {"operation": "apply_limits", "arguments": ["accounts/creditLimit"], "expected_postcondition": "the staged limits are live"}
  }]
}`

// TestFlowControlApplyNamesTheRecord: two controls of one form differ only
// by the customer they are about. The approval binds and shows each with
// its customer, and approving applies both.
func TestFlowControlApplyNamesTheRecord(t *testing.T) {
	f := assenttest.StartDemo(t)
	svc, _ := f.Issue(store.KindService, "billing")
	limit := func(id, label string) map[string]any {
		return map[string]any{"controlId": "creditLimit", "subject": map[string]any{"type": "customer", "id": id, "label": label},
			"metadata": map[string]any{"kind": "number", "label": "Credit limit"}, "value": 500}
	}
	if code, _, raw := f.API("POST", "/v1/forms/accounts/controls", svc, map[string]any{"controls": []any{limit("alice", "Alice"), limit("mallory", "Mallory")}}); code >= 300 {
		t.Fatalf("declare: %d %s", code, raw)
	}
	humanTok, person := f.Issue(store.KindHuman, "approver", "control.write")
	if code, _, raw := f.API("POST", "/v1/flows/programs", humanTok, []byte(limitProgram)); code != 201 {
		t.Fatalf("load: %d %s", code, raw)
	}
	if code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "limit-change", "id": "lim-1", "phase": "proposed"}); code != 201 {
		t.Fatalf("start: %d %s", code, raw)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		id    string
		value int
	}{{"alice", 800}, {"mallory", 10000}} {
		if out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "value": c.value,
			"identity": map[string]any{"formId": "accounts", "controlId": "creditLimit", "subject": map[string]any{"type": "customer", "id": c.id}}}); isErr {
			t.Fatalf("stage %s: %v", c.id, out)
		}
	}
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": "lim-1"})
	aprID := approvalOf(t, out).ID
	names := map[string]string{}
	for _, b := range approvalOf(t, out).Bindings {
		names[b.Name] = b.Value
	}
	if aprID == "" || len(names) != 2 || names["accounts/creditLimit for customer mallory (Mallory)"] != "10000" || names["accounts/creditLimit for customer alice (Alice)"] != "800" {
		t.Fatalf("the approval binds %v; want each customer's limit apart", names)
	}
	cookie, csrf := f.SignInAs(person.ID)
	if inbox := assenttest.ReadAll(f.Get("/inbox", cookie)); !strings.Contains(inbox, "for customer mallory (Mallory)") {
		t.Fatalf("the card does not say whose limit changes:\n%s", inbox)
	}
	if loc, page := f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie); !strings.Contains(page, "Approved: step") {
		t.Fatalf("approve: %s\n%s", loc, page)
	}
	for id, want := range map[string]float64{"alice": 800, "mallory": 10000} {
		snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": map[string]any{"formId": "accounts", "controlId": "creditLimit", "subject": map[string]any{"type": "customer", "id": id}}})
		if v := assenttest.As[control.Snapshot](t, snap).State.Value; v != want {
			t.Errorf("%s's limit after the approval = %v, want %v", id, v, want)
		}
	}
}

// TestApprovalCardFoldsTechnicalDetails: an approval card leads with what a
// person decides on; ids, fingerprints and capabilities are folded under
// "Technical details".
func TestApprovalCardFoldsTechnicalDetails(t *testing.T) {
	f := assenttest.StartDemo(t)
	if _, err := f.Demo.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	cookie, _ := f.SignIn()
	inbox := assenttest.ReadAll(f.Get("/inbox", cookie))
	i := strings.Index(inbox, "waits for your approval")
	if i < 0 {
		t.Fatalf("no approval card in the inbox:\n%s", inbox)
	}
	card := inbox[i:]
	card = card[:strings.Index(card, `class="actions"`)]
	fold := strings.Index(card, `<details class="item-details"><summary>Technical details</summary>`)
	if fold < 0 {
		t.Fatalf("the card folds nothing:\n%s", card)
	}
	for _, shown := range []string{"What approving achieves", "Asked by"} {
		if j := strings.Index(card, shown); j < 0 || j > fold {
			t.Errorf("%q is not shown before the folded details", shown)
		}
	}
	for _, folded := range []string{"Program fingerprint", "Capabilities", "Instance revision"} {
		if j := strings.Index(card, folded); j < fold {
			t.Errorf("%q is not folded under the technical details", folded)
		}
	}
}

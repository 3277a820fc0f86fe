package flows_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
)

// reimbursementApproval has the Kit's agent ask for a person's approval
// of the reimbursement id with amount and payee, and returns it.
func reimbursementApproval(t *testing.T, f *assenttest.Kit, id, amount, payee string) flow.Approval {
	t.Helper()
	_, out, raw := f.API("POST", "/v1/flows/instances/"+id+"/prescribe", f.Token, map[string]any{
		"transition": "approve", "parameters": map[string]string{"amount": amount, "payee": payee}})
	a := approvalOf(t, out)
	if a.ID == "" || a.Status != flow.ApprovalPending {
		t.Fatalf("prescribe %s: %s", id, raw)
	}
	return a
}

// appliedValues are the parameter values the committed step of instance
// id was applied with.
func appliedValues(t *testing.T, f *assenttest.Kit, id string) map[string]string {
	t.Helper()
	ctx := context.Background()
	j, err := f.Srv.Flows().Kernel().Journal(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range j {
		if e.Status == flow.JournalCommitted {
			rx, err := f.Srv.Flows().Kernel().Prescription(ctx, e.Prescription)
			if err != nil {
				t.Fatal(err)
			}
			return rx.Parameters
		}
	}
	t.Fatalf("nothing was applied to %s", id)
	return nil
}

// A person changes the amount of an agent's reimbursement before
// approving, through POST /v1/inbox/{id}/decision: a change the agent's
// own request could not make is refused 400 and changes nothing; an
// accepted one is what is applied, the approval and the audit log record
// both values, and the agent waiting in inbox_wait hears what changed.
func TestFlowApprovalEditedBeforeApproving(t *testing.T) {
	f := assenttest.Start(t, nil)
	f.StartReimbursement("r-1", 1)
	f.StartReimbursement("r-2", 1)

	// The program's rule holds for the agent's own request too.
	_, out, raw := f.API("POST", "/v1/flows/instances/r-2/prescribe", f.Token, map[string]any{
		"transition": "approve", "parameters": map[string]string{"amount": "5000", "payee": "acme-travel"}})
	if !strings.Contains(raw, "PARAMETER_INVALID") || approvalOf(t, out).ID != "" {
		t.Fatalf("an agent's request over the limit: %s", raw)
	}

	apr := reimbursementApproval(t, f, "r-1", "1500.00", "acme-travel")
	_, ada := f.Issue(store.KindHuman, "Ada", "state.write")
	cookie, csrf := f.SignInAs(ada.ID)
	it, ok := inboxItem(t, f, cookie, csrf, apr.ID)
	if !ok || strings.Join(it.Editable, ",") != "amount,payee" {
		t.Fatalf("inbox item %+v, %v; want amount and payee editable", it, ok)
	}
	if it.Bound["Parameter amount"] != "1500.00 EUR" || it.Bound["Parameter payee"] != "ACME Travel Ltd" {
		t.Fatalf("bound %v; want the amount with its unit and the payee's name", it.Bound)
	}
	page := assenttest.ReadAll(f.Get("/inbox", cookie))
	for _, want := range []string{`name="value:amount" value="1500.00"`, `<option value="acme-travel" selected>ACME Travel Ltd</option>`, "Approve with these values", "EUR"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the card's edit form lacks %s:\n%s", want, page)
		}
	}

	// The instance page offers the same form, and comes back to itself.
	inst := assenttest.ReadAll(f.Get("/flows/instances/r-1", cookie))
	if !strings.Contains(inst, `name="value:amount" value="1500.00"`) || !strings.Contains(inst, `<option value="acme-travel" selected>ACME Travel Ltd</option>`) {
		t.Fatalf("the instance page's approval has no edit form:\n%s", inst)
	}

	refusals := []struct {
		name   string
		values map[string]any
		status int
		code   string
	}{
		{"over the program's limit", map[string]any{"amount": 5000}, 400, "PARAMETER_INVALID"},
		{"not a number", map[string]any{"amount": "a lot"}, 400, "PARAMETER_INVALID"},
		{"a payee not offered", map[string]any{"payee": "mallory"}, 400, "PARAMETER_INVALID"},
		{"no such value", map[string]any{"iban": "X"}, 400, "invalid_request"},
		{"an object", map[string]any{"amount": map[string]any{"v": 1}}, 400, "invalid_request"},
	}
	for _, tt := range refusals {
		var o api.InboxOutcome
		c := sessionJSON(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision", map[string]any{"decision": "approve", "values": tt.values}, &o)
		if c != tt.status || o.Error == nil || string(o.Error.Code) != tt.code {
			t.Fatalf("%s: %d %+v, want %d %s", tt.name, c, o, tt.status, tt.code)
		}
		if now, _ := f.Srv.Flows().Kernel().Approval(t.Context(), apr.ID); now.Status != flow.ApprovalPending || now.Edition() != 0 {
			t.Fatalf("%s changed the approval: %+v", tt.name, now)
		}
	}

	var o api.InboxOutcome
	if c := sessionJSON(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision",
		map[string]any{"decision": "approve", "values": map[string]any{"amount": 1200, "payee": "acme-travel"}}, &o); c != http.StatusOK || o.Status != "approved" {
		t.Fatalf("approve with a changed amount = %d %+v", c, o)
	}
	if !strings.Contains(o.Message, "with your changes") {
		t.Fatalf("message %q", o.Message)
	}
	if got := appliedValues(t, f, "r-1"); got["amount"] != "1200" || got["payee"] != "acme-travel" {
		t.Fatalf("applied %v, want the person's amount 1200", got)
	}
	now, _ := f.Srv.Flows().Kernel().Approval(t.Context(), apr.ID)
	if ch := now.ChangedParameters(); now.Status != flow.ApprovalApproved || len(ch) != 1 || ch[0] != (flow.ParameterChange{Name: "amount", Was: "1500.00", Now: "1200"}) {
		t.Fatalf("approval after the change: %+v", now)
	}
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, r := range recs {
		if r.Action == "flow.approval.edit" && r.PrincipalID == ada.ID && strings.Contains(r.Detail, `"was":"1500.00","now":"1200"`) {
			audited = true
		}
	}
	if !audited {
		t.Fatalf("no audit record of the change with both values: %+v", recs)
	}

	// The agent hears it: inbox_wait and flows_inspect.
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wait, isErr := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"approval": apr.ID}}, "timeout_ms": 1000})
	items, _ := wait["items"].([]any)
	if isErr || len(items) != 1 {
		t.Fatalf("inbox_wait: %v", wait)
	}
	w, _ := items[0].(map[string]any)
	changed, _ := w["changed"].([]any)
	if w["status"] != "approved" || !strings.HasPrefix(w["reason"].(string), "approved with changes") || len(changed) != 1 || changed[0] != `amount: "1500.00" → "1200"` {
		t.Fatalf("inbox_wait outcome %v", w)
	}
	insp, isErr := assenttest.CallTool(t, cs, "flows_inspect", map[string]any{"instance": "r-1", "approval": apr.ID})
	if b, _ := json.Marshal(insp); isErr || !strings.Contains(string(b), `"now":"1200"`) {
		t.Fatalf("flows_inspect does not show the change: %v", insp)
	}
}

// With two people needed, a person's change resets the count: the
// approval given before no longer counts, the card says so, and a
// decision sent for the card before the change is refused stale.
func TestFlowApprovalEditResetsQuorum(t *testing.T) {
	f := assenttest.Start(t, nil)
	f.StartReimbursement("r-1", 2)
	apr := reimbursementApproval(t, f, "r-1", "900", "hotel-lisboa")
	_, ada := f.Issue(store.KindHuman, "Ada", "state.write")
	_, ben := f.Issue(store.KindHuman, "Ben", "state.write")
	adaCookie, adaCSRF := f.SignInAs(ada.ID)
	benCookie, benCSRF := f.SignInAs(ben.ID)

	benCard, _ := inboxItem(t, f, benCookie, benCSRF, apr.ID)
	var o api.InboxOutcome
	if c := sessionJSON(t, f, benCookie, benCSRF, "POST", "/v1/inbox/"+url.PathEscape(benCard.ID)+"/decision", map[string]any{"decision": "approve"}, &o); c != 200 || o.Status != "approved" {
		t.Fatalf("Ben approves = %d %+v", c, o)
	}
	adaCard, _ := inboxItem(t, f, adaCookie, adaCSRF, apr.ID)
	if adaCard.Needs != 1 {
		t.Fatalf("needs %d after Ben, want 1", adaCard.Needs)
	}
	if c := sessionJSON(t, f, adaCookie, adaCSRF, "POST", "/v1/inbox/"+url.PathEscape(adaCard.ID)+"/decision",
		map[string]any{"decision": "approve", "values": map[string]any{"amount": 850}, "note": "Capped at the hotel rate."}, &o); c != 200 || !strings.Contains(o.Message, "no longer count") {
		t.Fatalf("Ada changes and approves = %d %+v", c, o)
	}
	now, _ := f.Srv.Flows().Kernel().Approval(t.Context(), apr.ID)
	if now.Status != flow.ApprovalPending || now.Needs() != 1 || !now.ApprovedBy(ada.ID) || now.ApprovedBy(ben.ID) {
		t.Fatalf("after Ada's change: %+v", now)
	}
	// Ben's older card is stale.
	if c := sessionJSON(t, f, benCookie, benCSRF, "POST", "/v1/inbox/"+url.PathEscape(benCard.ID)+"/decision", map[string]any{"decision": "approve"}, &o); c != 409 || o.Error == nil || o.Error.Code != "stale" {
		t.Fatalf("Ben on his old card = %d %+v", c, o)
	}
	page := assenttest.ReadAll(f.Get("/inbox", benCookie))
	for _, want := range []string{"Changed by Ada: Amount 900 EUR → 850 EUR", "approvals given before the change no longer count", "Approved by Ada · needs 1 more person"} {
		if !strings.Contains(page, want) {
			t.Fatalf("Ben's card lacks %q:\n%s", want, page)
		}
	}
	benCard, _ = inboxItem(t, f, benCookie, benCSRF, apr.ID)
	if !strings.HasSuffix(benCard.ID, ".e1") {
		t.Fatalf("the changed card's id %s does not name its edition", benCard.ID)
	}
	if c := sessionJSON(t, f, benCookie, benCSRF, "POST", "/v1/inbox/"+url.PathEscape(benCard.ID)+"/decision", map[string]any{"decision": "approve", "note": "Fine by me."}, &o); c != 200 || o.Status != "approved" {
		t.Fatalf("Ben approves the changed values = %d %+v", c, o)
	}
	if got := appliedValues(t, f, "r-1"); got["amount"] != "850" || got["payee"] != "hotel-lisboa" {
		t.Fatalf("applied %v, want Ada's amount", got)
	}
	// Ada's note, written on the card before her change, and Ben's, on
	// the changed card, reach the agent with the outcome.
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wait, _ := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"approval": apr.ID}}, "timeout_ms": 1000})
	if b, _ := json.Marshal(wait); !strings.Contains(string(b), "Capped at the hotel rate.") || !strings.Contains(string(b), "Fine by me.") || !strings.Contains(string(b), "approved with changes") {
		t.Fatalf("inbox_wait does not carry Ada's note and the change: %s", b)
	}
	insp, _ := assenttest.CallTool(t, cs, "flows_inspect", map[string]any{"instance": "r-1", "approval": apr.ID})
	if b, _ := json.Marshal(insp); !strings.Contains(string(b), "Capped at the hotel rate.") || !strings.Contains(string(b), "Fine by me.") {
		t.Fatalf("flows_inspect does not carry Ada's note: %s", b)
	}
}

func TestNoteIDKeepsNotesAcrossChanges(t *testing.T) {
	tests := []struct{ in, want string }{
		{"flow_approval:apr-1@3", "flow_approval:apr-1@3"},
		{"flow_approval:apr-1@3.e2", "flow_approval:apr-1@3"},
		{"flow_approval:apr-1@3.e12", "flow_approval:apr-1@3"},
		{"flow_approval:apr-1", "flow_approval:apr-1"},
		{"control_proposal:f/c@4", "control_proposal:f/c@4"},
		{"question:ask_1@ab.ecd", "question:ask_1@ab.ecd"},
	}
	for _, tt := range tests {
		if got := flows.NoteID(tt.in); got != tt.want {
			t.Errorf("NoteID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The approval's own route takes the changed values too, with the edition
// of the approval the person read: a decision on an older edition is
// refused APPROVAL_CHANGED, values with decline are refused, and what is
// applied is the changed values.
func TestFlowApprovalRouteTakesValues(t *testing.T) {
	f := assenttest.Start(t, nil)
	f.StartReimbursement("r-1", 2)
	apr := reimbursementApproval(t, f, "r-1", "900", "acme-travel")
	_, ada := f.Issue(store.KindHuman, "Ada", "state.write")
	_, ben := f.Issue(store.KindHuman, "Ben", "state.write")
	adaCookie, adaCSRF := f.SignInAs(ada.ID)
	benCookie, benCSRF := f.SignInAs(ben.ID)
	path := "/v1/flows/approvals/" + apr.ID

	var out map[string]any
	if c := sessionJSON(t, f, adaCookie, adaCSRF, "POST", path+"/decline", map[string]any{"values": map[string]any{"amount": "800"}}, &out); c != 400 || assenttest.ErrCode(out) != "invalid_request" {
		t.Fatalf("decline with values = %d %v", c, out)
	}
	var a flow.Approval
	if c := sessionJSON(t, f, adaCookie, adaCSRF, "POST", path+"/approve", map[string]any{"values": map[string]any{"amount": "800"}}, &a); c != 200 || a.Edition() != 1 || a.Needs() != 1 {
		t.Fatalf("Ada changes and approves = %d %+v", c, a)
	}
	out = nil
	if c := sessionJSON(t, f, benCookie, benCSRF, "POST", path+"/approve", map[string]any{"values": map[string]any{"amount": "700"}}, &out); c != 409 || assenttest.ErrCode(out) != "APPROVAL_CHANGED" {
		t.Fatalf("Ben on the first edition = %d %v", c, out)
	}
	var rc flow.Receipt
	if c := sessionJSON(t, f, benCookie, benCSRF, "POST", path+"/approve", map[string]any{"values": map[string]any{"amount": 800}, "edition": 1}, &rc); c != 200 || rc.ID == "" {
		t.Fatalf("Ben approves Ada's values = %d %+v", c, rc)
	}
	if got := appliedValues(t, f, "r-1"); got["amount"] != "800" {
		t.Fatalf("applied %v, want 800", got)
	}
}

// The edit form of the instance page approves with the changed values and
// comes back to the instance page, saying so.
func TestFlowApprovalEditFromInstancePage(t *testing.T) {
	f := assenttest.Start(t, nil)
	f.StartReimbursement("r-1", 1)
	apr := reimbursementApproval(t, f, "r-1", "1500.00", "acme-travel")
	_, ada := f.Issue(store.KindHuman, "Ada", "state.write")
	cookie, csrf := f.SignInAs(ada.ID)
	it, _ := inboxItem(t, f, cookie, csrf, apr.ID)
	loc, page := f.Decide("/inbox/decide", url.Values{"csrf": {csrf}, "id": {it.ID}, "decision": {"approve"}, "back": {"/flows/instances/r-1"},
		"value:amount": {"1000"}, "value:payee": {"hotel-lisboa"}}, cookie)
	if loc != "/flows/instances/r-1" || !strings.Contains(page, "Approved with your changes") {
		t.Fatalf("after the form: %s\n%s", loc, page)
	}
	if got := appliedValues(t, f, "r-1"); got["amount"] != "1000" || got["payee"] != "hotel-lisboa" {
		t.Fatalf("applied %v", got)
	}
	if !strings.Contains(page, "Changed by Ada: Amount 1500.00 EUR → 1000 EUR; Payee ACME Travel Ltd → Hotel Lisboa") {
		t.Fatalf("the instance page's decided approval does not say what Ada changed:\n%s", page)
	}
}

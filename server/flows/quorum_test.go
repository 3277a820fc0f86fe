package flows_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// sessionJSON sends a JSON request with a person's session cookie and the
// CSRF header the pages use, and decodes the answer into out.
func sessionJSON(t *testing.T, f *assenttest.Kit, cookie *http.Cookie, csrf, method, path string, body, out any) int {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	r, err := http.NewRequest(method, f.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	r.AddCookie(cookie)
	r.Header.Set("Origin", f.URL())
	r.Header.Set("X-CSRF-Token", csrf)
	resp, err := f.NoRedirect().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// inboxItem finds the inbox item of approval apr in what GET /v1/inbox
// answers p.
func inboxItem(t *testing.T, f *assenttest.Kit, cookie *http.Cookie, csrf, apr string) (api.InboxItem, bool) {
	t.Helper()
	var in api.Inbox
	if c := sessionJSON(t, f, cookie, csrf, "GET", "/v1/inbox", nil, &in); c != 200 {
		t.Fatalf("GET /v1/inbox = %d", c)
	}
	for _, it := range in.Items {
		if strings.Contains(it.ID, apr) {
			return it, true
		}
	}
	return api.InboxItem{}, false
}

// The demo's large expense needs two different people: one person's
// approval is recorded and pays nothing, the same person cannot approve
// again, and a second person's approval applies it.
func TestFlowLargeExpenseNeedsTwoPeople(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, out, raw := f.API("POST", "/v1/flows/instances/"+demo.LargeExpenseID+"/prescribe", f.Token, nil)
	d := decisionOf(t, out)
	if d.Kind != "FRONTIER" || d.Awaiting != "human" || d.Transition != "expense-approval/approve-two-people" {
		t.Fatalf("prescribe the large expense: %s", raw)
	}
	apr := approvalOf(t, out)
	if apr.Quorum != 2 || apr.Needs() != 2 {
		t.Fatalf("approval quorum %d needs %d: %s", apr.Quorum, apr.Needs(), raw)
	}
	_, ada := f.Issue(store.KindHuman, "Ada", "state.write")
	_, ben := f.Issue(store.KindHuman, "Ben", "state.write")
	adaCookie, adaCSRF := f.SignInAs(ada.ID)
	benCookie, benCSRF := f.SignInAs(ben.ID)

	// Ada's own token path cannot take the step alone either.
	adaTok, _ := f.Issue(store.KindHuman, "ada-token", "state.write", "human.approve")
	_, out, raw = f.API("POST", "/v1/flows/instances/"+demo.LargeExpenseID+"/prescribe", adaTok, map[string]any{"transition": "approve-two-people"})
	if d := decisionOf(t, out); d.Kind == "PRESCRIBED" {
		t.Fatalf("one person with human.approve was prescribed the two-person step: %s", raw)
	}

	inbox := assenttest.ReadAll(f.Get("/inbox", adaCookie))
	if !strings.Contains(inbox, "Needs 2 different people to approve") {
		t.Fatalf("the card does not say it needs two people:\n%s", inbox)
	}
	if it, ok := inboxItem(t, f, adaCookie, adaCSRF, apr.ID); !ok || it.Needs != 2 {
		t.Fatalf("inbox item = %+v, %v; want needs 2", it, ok)
	}

	// Ada approves: recorded, nothing applied.
	_, page := f.Decide("/web/flows/approvals/"+apr.ID+"/approve", url.Values{"csrf": {adaCSRF}, "back": {"/inbox"}}, adaCookie)
	if !strings.Contains(page, "Your approval is recorded") || !strings.Contains(page, "needs 1 more person") {
		t.Fatalf("after Ada's approval the page does not say it needs one more person:\n%s", page)
	}
	if !strings.Contains(page, "Approved by Ada · needs 1 more person") || !strings.Contains(page, "You approved this") {
		t.Fatalf("Ada's card does not show her approval:\n%s", page)
	}
	if strings.Contains(page, "/web/flows/approvals/"+apr.ID+"/approve") {
		t.Fatal("Ada is still offered Approve after approving")
	}
	if _, out, _ := f.API("GET", "/v1/flows/instances/"+demo.LargeExpenseID, f.Token, nil); instanceOf(t, out).Phase != "submitted" {
		t.Fatalf("one approval moved the expense: %v", out)
	}
	// Her JSON inbox says the same: one more person, and only decline
	// for her.
	if it, ok := inboxItem(t, f, adaCookie, adaCSRF, apr.ID); !ok || it.Needs != 1 || len(it.Decisions) != 1 || it.Decisions[0] != "decline" {
		t.Fatalf("Ada's inbox item after her approval = %+v, %v", it, ok)
	}
	// Ada again, through JSON: refused, counted once.
	var again map[string]any
	if c := sessionJSON(t, f, adaCookie, adaCSRF, "POST", "/v1/flows/approvals/"+apr.ID+"/approve", nil, &again); c != 409 || assenttest.ErrCode(again) != "ALREADY_APPROVED" {
		t.Fatalf("Ada approves again = %d %v", c, again)
	}
	// Ben sees Ada's approval and that one more is needed.
	it, ok := inboxItem(t, f, benCookie, benCSRF, apr.ID)
	if !ok || it.Needs != 1 {
		t.Fatalf("Ben's inbox item = %+v, %v; want needs 1", it, ok)
	}
	// The agent asking again gets the same approval, still pending.
	_, out, _ = f.API("POST", "/v1/flows/instances/"+demo.LargeExpenseID+"/prescribe", f.Token, nil)
	if a := approvalOf(t, out); a.ID != apr.ID || a.Status != "pending" || len(a.Approvers) != 1 {
		t.Fatalf("after one approval the agent sees %+v", a)
	}
	if next, _ := out["next"].(string); !strings.Contains(next, "needs 2 different people to approve, 1 approved so far") {
		t.Fatalf("the agent is not told how far the approval is: %q", next)
	}

	// Ben approves through the JSON inbox: applied.
	var outcome api.InboxOutcome
	if c := sessionJSON(t, f, benCookie, benCSRF, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision", map[string]any{"decision": "approve"}, &outcome); c != 200 || outcome.Error != nil {
		t.Fatalf("Ben approves = %d %+v", c, outcome)
	}
	_, out, _ = f.API("GET", "/v1/flows/instances/"+demo.LargeExpenseID, f.Token, nil)
	if instanceOf(t, out).Phase != "approved" {
		t.Fatalf("after two people the expense is %v", out)
	}
	// The instance page names both people who approved.
	page = assenttest.ReadAll(f.Get("/flows/instances/"+demo.LargeExpenseID, benCookie))
	if !strings.Contains(page, "Ada, Ben") {
		t.Fatalf("the instance page does not name both approvers:\n%s", page)
	}
	view, err := f.Srv.Flows().Kernel().Approval(t.Context(), apr.ID)
	if err != nil || view.Status != "approved" || len(view.Approvers) != 2 || view.Approvers[0].Person != ada.ID || view.Approvers[1].Person != ben.ID {
		t.Fatalf("approval after two people = %+v, %v", view, err)
	}
}

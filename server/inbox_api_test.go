package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/client"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// session sends body as JSON with a person's session cookie and, when
// csrf is not empty, the Origin and CSRF header the pages send.
func session(t *testing.T, f *assenttest.Kit, cookie *http.Cookie, csrf, method, path string, body, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	r, err := http.NewRequest(method, f.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.AddCookie(cookie)
	if csrf != "" {
		r.Header.Set("Origin", f.URL())
		r.Header.Set("X-CSRF-Token", csrf)
	}
	resp, err := f.NoRedirect().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %d, answer is not JSON: %v", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// byKind returns the first inbox item of kind.
func byKind(in api.Inbox, kind string) (api.InboxItem, bool) {
	for _, it := range in.Items {
		if it.Kind == kind {
			return it, true
		}
	}
	return api.InboxItem{}, false
}

// A person reads every kind of open decision as JSON and decides them,
// one and several at once, each bound to what its card showed; runtime_status
// and the badge count every open decision.
func TestInboxAPI(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)

	// The agent files one of each: a control proposal, a Flow approval
	// and a command proposal.
	rev := stage(t, cs, "pro")
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	aprID := approvalOf(t, out).ID
	code, v, _ := f.API("POST", "/v1/runs", f.Token, map[string]any{"template": "echo hi", "run_id": "inbox-api"})
	cmdID, _ := v["proposal"].(string)
	if aprID == "" || code != 202 || cmdID == "" {
		t.Fatalf("filing: approval %q, spawn %d %v", aprID, code, v)
	}

	// runtime_status counts, for the agent, what it filed that waits.
	st, _ := assenttest.CallTool(t, cs, "runtime_status", map[string]any{})
	for _, kind := range []string{"proposals", "flow_approvals", "command_proposals"} {
		if n := assenttest.As[struct {
			Open map[string]int `json:"open"`
		}](t, st).Open[kind]; n < 1 {
			t.Errorf("runtime_status open.%s = %v, want at least 1: %v", kind, n, st)
		}
	}

	var in api.Inbox
	if c := session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in); c != 200 {
		t.Fatalf("GET /v1/inbox: %d", c)
	}
	ctl, okc := byKind(in, "control_proposal")
	apr, oka := byKind(in, "flow_approval")
	cmd, okm := byKind(in, "command_proposal")
	if !okc || !oka || !okm {
		t.Fatalf("inbox lacks a kind: %+v", in)
	}
	if ctl.Bound["revision"] != strconv.FormatInt(rev, 10) || ctl.Bound["value"] == "" || ctl.Needs != 1 || ctl.ProposedBy != f.Boot.Agent.ID {
		t.Errorf("control proposal item: %+v", ctl)
	}
	if apr.Bound["approval"] != aprID || cmd.Bound["proposal"] != cmdID || len(apr.Decisions) != 2 {
		t.Errorf("approval %+v, command %+v", apr, cmd)
	}

	// The badge counts every open decision, command proposals included.
	page := assenttest.ReadAll(f.Get("/inbox", cookie))
	m := regexp.MustCompile(`class="badge" aria-label="(\d+) open"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("the inbox page has no badge")
	}
	if n, _ := strconv.Atoi(m[1]); n != len(in.Items) {
		t.Errorf("badge %d, inbox lists %d decisions", n, len(in.Items))
	}

	// Only a person's session decides: an agent's token and a cookie
	// request without the CSRF header are refused.
	if c, body, _ := f.API("GET", "/v1/inbox", f.Token, nil); c != 403 || assenttest.ErrCode(body) != "human_confirmation_required" {
		t.Errorf("agent GET /v1/inbox: %d %v", c, body)
	}
	var e map[string]any
	if c := session(t, f, cookie, "", "POST", "/v1/inbox/"+url.PathEscape(apr.ID)+"/decision", api.InboxDecision{Decision: "approve"}, &e); c != 403 || assenttest.ErrCode(e) != "bad_origin" {
		t.Errorf("POST without CSRF: %d %v", c, e)
	}

	// The agent stages again: the card the person read is stale, and
	// approving it is refused without applying anything.
	stage(t, cs, "team")
	e = nil
	if c := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(ctl.ID)+"/decision", api.InboxDecision{Decision: "approve"}, &e); c != 409 || assenttest.ErrCode(e) != "stale" {
		t.Errorf("approving a stale card: %d %v", c, e)
	}
	// An answer in words without deciding: the agent's wait returns with
	// it while the approval still waits; respond needs the words.
	waiting := startWait(cs, map[string]any{"items": []any{map[string]any{"approval": aprID, "notes_seen": 0}}, "timeout_ms": 60000})
	var o api.InboxOutcome
	if c := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(apr.ID)+"/decision", api.InboxDecision{Decision: "respond", Note: "Which project is this for?"}, &o); c != 200 || o.Status != "responded" {
		t.Fatalf("respond: %d %+v", c, o)
	}
	w := <-waiting
	notes := notesOf(t, w.item(0))
	if w.err != nil || w.out["timed_out"] != false || w.item(0)["status"] != "pending" || len(notes) != 1 ||
		notes[0].Text != "Which project is this for?" || notes[0].Decision != "respond" || notes[0].By != person.ID {
		t.Fatalf("the agent hears the answer: %v %v", w.err, w.out)
	}
	e = nil
	if c := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(apr.ID)+"/decision", api.InboxDecision{Decision: "respond"}, &e); c != 400 || assenttest.ErrCode(e) != "invalid_request" {
		t.Errorf("respond without a note: %d %v", c, e)
	}

	// A batch decides items of one kind: one that mixes kinds is refused
	// as a whole, naming the kinds, and decides nothing.
	batch := api.InboxBatch{Items: []api.InboxBatchItem{
		{ID: ctl.ID, InboxDecision: api.InboxDecision{Decision: "approve"}},
		{ID: apr.ID, InboxDecision: api.InboxDecision{Decision: "approve", Note: "Book economy."}},
		{ID: cmd.ID, InboxDecision: api.InboxDecision{Decision: "decline", Note: "not on a Sunday"}},
		{ID: "command_proposal:nope@pending", InboxDecision: api.InboxDecision{Decision: "approve"}},
	}}
	e = nil
	if c := session(t, f, cookie, csrf, "POST", "/v1/inbox/decisions", batch, &e); c != 400 || assenttest.ErrCode(e) != "invalid_request" {
		t.Fatalf("a batch of three kinds: %d %v", c, e)
	}
	if msg := fmt.Sprint(e); !strings.Contains(msg, "command_proposal, control_proposal, flow_approval") {
		t.Errorf("the refusal does not name the kinds: %v", e)
	}
	in = api.Inbox{}
	session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in)
	for _, id := range []string{apr.ID, cmd.ID} {
		if !slices.ContainsFunc(in.Items, func(it api.InboxItem) bool { return it.ID == id }) {
			t.Errorf("%s was decided by a refused batch", id)
		}
	}
	// Batches of one kind each: the stale card refused on its own, the
	// approval approved, the command declined with a reason the agent
	// hears and an unknown command refused beside it.
	for _, b := range [][]int{{0}, {1}, {2, 3}} {
		var one api.InboxBatch
		for _, i := range b {
			one.Items = append(one.Items, batch.Items[i])
		}
		var got api.InboxBatchOutcome
		if c := session(t, f, cookie, csrf, "POST", "/v1/inbox/decisions", one, &got); c != 200 || len(got.Items) != len(b) {
			t.Fatalf("batch %v: %d %+v", b, c, got)
		}
		want := []struct{ status, code string }{{"refused", "stale"}, {"approved", ""}, {"declined", ""}, {"refused", "not_found"}}
		for j, i := range b {
			o, w := got.Items[j], want[i]
			code := ""
			if o.Error != nil {
				code = string(o.Error.Code)
			}
			if o.Status != w.status || code != w.code || o.ID != batch.Items[i].ID {
				t.Errorf("batch item %d: %+v, want %s %s", i, o, w.status, w.code)
			}
		}
	}
	wt := waitNow(t, cs, map[string]any{"items": []any{
		map[string]any{"approval": aprID}, map[string]any{"command_proposal": cmdID},
	}, "timeout_ms": 0})
	if wt.item(0)["status"] != "approved" || wt.item(1)["status"] != "declined" || wt.item(1)["reason"] != "not on a Sunday" || wt.item(1)["decided_by"] != person.ID {
		t.Errorf("the agent hears: %v", wt.out)
	}
	notes = notesOf(t, wt.item(0))
	if len(notes) != 2 || notes[1].Text != "Book economy." || notes[1].Decision != "approve" {
		t.Errorf("notes on the approval: %v", wt.item(0))
	}
	// Decided items leave the inbox; the staged value still waits.
	in = api.Inbox{}
	session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in)
	for _, it := range in.Items {
		if it.ID == apr.ID || it.ID == cmd.ID || strings.HasSuffix(it.ID, "@"+strconv.FormatInt(rev, 10)) && it.Kind == "control_proposal" {
			t.Errorf("still listed after the decision: %+v", it)
		}
	}
	// The notes are kept by the store: a restarted server still reports them.
	f2 := f.Restart(nil)
	cs2, err := f2.MCPSession(f2.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	wt = waitNow(t, cs2, map[string]any{"items": []any{map[string]any{"command_proposal": cmdID}}, "timeout_ms": 0})
	if notes := notesOf(t, wt.item(0)); len(notes) != 1 || notes[0].Text != "not on a Sunday" {
		t.Errorf("notes after a restart: %v", wt.out)
	}
}

// Ten proposals, on ten orders' status, approved at once through the
// typed client holding a person's session: each applied and each audited
// on its own.
func TestInboxBatchOfTen(t *testing.T) {
	f := assenttest.Start(t, nil)
	svc, _ := f.Issue(store.KindService, "crm")
	var ctrls []api.HostedControl
	for i := range 10 {
		ctrls = append(ctrls, api.HostedControl{ControlID: "status", Subject: &control.Subject{Type: "order", ID: strconv.Itoa(i)},
			Metadata: control.Metadata{Kind: "select", Label: "Status", Options: []control.Option{{Value: "open", Label: "Open"}, {Value: "shipped", Label: "Shipped"}}},
			Value:    "open"})
	}
	if c, body, _ := f.API("POST", "/v1/forms/orders/controls", svc, api.FormDeclaration{Controls: ctrls}); c != 200 {
		t.Fatalf("declare: %d %v", c, body)
	}
	for i := range 10 {
		req := api.ExecuteRequest{Action: control.Stage, Identity: control.Identity{FormID: "orders", ControlID: "status", Subject: &control.Subject{Type: "order", ID: strconv.Itoa(i)}}, Value: json.RawMessage(`"shipped"`)}
		if c, body, _ := f.API("POST", "/v1/controls/execute", f.Token, req); c != 200 {
			t.Fatalf("stage %d: %d %v", i, c, body)
		}
	}
	cookie, csrf := f.SignIn()
	cl, err := client.New(f.URL(), "", &client.Options{Session: &client.Session{Cookie: cookie.Value, CSRF: csrf}})
	if err != nil {
		t.Fatal(err)
	}
	if page := assenttest.ReadAll(f.Get("/inbox", cookie)); !strings.Contains(page, "Select all 10 proposed changes") {
		t.Error("the inbox page does not offer to select the ten proposals at once")
	}
	ctx := context.Background()
	in, err := cl.Inbox(ctx)
	if err != nil || len(in.Items) != 10 {
		t.Fatalf("inbox: %v, %d items", err, len(in.Items))
	}
	var batch api.InboxBatch
	for _, it := range in.Items {
		batch.Items = append(batch.Items, api.InboxBatchItem{ID: it.ID, InboxDecision: api.InboxDecision{Decision: api.DecisionApprove}})
	}
	out, err := cl.DecideAll(ctx, batch)
	if err != nil || len(out.Items) != 10 {
		t.Fatalf("batch: %v %+v", err, out)
	}
	for _, o := range out.Items {
		if o.Status != "approved" || o.Error != nil {
			t.Errorf("outcome %+v", o)
		}
	}
	agent, _ := client.New(f.URL(), f.Token, nil)
	for i := range 10 {
		snap, err := agent.Control(ctx, control.Identity{FormID: "orders", ControlID: "status", Subject: &control.Subject{Type: "order", ID: strconv.Itoa(i)}})
		if err != nil || snap.State.Value != "shipped" {
			t.Errorf("order %d: %v %v", i, err, snap.State.Value)
		}
	}
	if in, err := cl.Inbox(ctx); err != nil || len(in.Items) != 0 {
		t.Errorf("inbox after the batch: %v %+v", err, in)
	}
	// Deciding again: each item is no longer waiting.
	if _, err := cl.Decide(ctx, batch.Items[0].ID, api.InboxDecision{Decision: "approve"}); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("deciding a decided item: %v", err)
	}
	// An agent's token is refused.
	if _, err := agent.Inbox(ctx); err == nil || !strings.Contains(err.Error(), "human_confirmation_required") {
		t.Errorf("agent reads the inbox: %v", err)
	}
}

// A person changes the value an agent proposed and approves it: the edit
// is checked as the agent's value was, the edited value is live, and the
// agent, waiting, hears "approved with changes" and what changed.
func TestInboxEditBeforeApproving(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "editor")
	cookie, csrf := f.SignInAs(person.ID)
	rev := stage(t, cs, "pro")
	var in api.Inbox
	session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in)
	ctl, ok := byKind(in, "control_proposal")
	if !ok || len(ctl.Editable) != 1 || ctl.Editable[0] != "value" {
		t.Fatalf("control proposal item: %+v", in)
	}
	path := "/v1/inbox/" + url.PathEscape(ctl.ID) + "/decision"
	waiting := startWait(cs, map[string]any{"items": []any{map[string]any{"proposal": map[string]any{"formId": "profile", "controlId": "plan"}, "revision": rev}}})

	// A value the control refuses is refused as staging refuses it, and
	// nothing changes; an unknown value name and values with a decline
	// are refused too.
	var e map[string]any
	if c := session(t, f, cookie, csrf, "POST", path, map[string]any{"decision": "approve", "values": map[string]any{"value": "platinum"}}, &e); c == 200 || assenttest.ErrCode(e) != "invalid_value" {
		t.Errorf("an edit outside the options: %d %v", c, e)
	}
	for _, body := range []map[string]any{
		{"decision": "approve", "values": map[string]any{"colour": "red"}},
		{"decision": "decline", "values": map[string]any{"value": "team"}},
	} {
		e = nil
		if c := session(t, f, cookie, csrf, "POST", path, body, &e); c != 400 || assenttest.ErrCode(e) != "invalid_request" {
			t.Errorf("%v: %d %v", body, c, e)
		}
	}

	var o api.InboxOutcome
	if c := session(t, f, cookie, csrf, "POST", path, map[string]any{"decision": "approve", "values": map[string]any{"value": "team"}}, &o); c != 200 || o.Status != "approved" {
		t.Fatalf("approve with an edit: %d %+v", c, o)
	}
	w := <-waiting
	got := w.item(0)
	changed, _ := got["changed"].([]any)
	if w.err != nil || got["status"] != "applied" || got["decided_by"] != person.ID || !strings.Contains(got["reason"].(string), "approved with changes") ||
		len(changed) != 1 || !strings.Contains(changed[0].(string), `"pro"`) || !strings.Contains(changed[0].(string), `"team"`) {
		t.Fatalf("the agent hears: %v %v", w.err, w.out)
	}
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": map[string]any{"formId": "profile", "controlId": "plan"}})
	if v := assenttest.As[struct {
		State struct {
			Value any `json:"value"`
		} `json:"state"`
	}](t, snap).State.Value; v != "team" {
		t.Errorf("live value after the edit: %v (%v)", v, snap)
	}
}

// The inbox page's reply form sends a note without deciding; the item
// keeps waiting and the agent reads the reply.
func TestInboxWebReply(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "replier")
	cookie, csrf := f.SignInAs(person.ID)
	rev := stage(t, cs, "team")
	var in api.Inbox
	session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in)
	ctl, ok := byKind(in, "control_proposal")
	if !ok {
		t.Fatalf("inbox: %+v", in)
	}
	if page := assenttest.ReadAll(f.Get("/inbox", cookie)); !strings.Contains(page, "Reply without deciding") || !strings.Contains(page, "Approve selected") {
		t.Fatal("the inbox page lacks the reply form or Approve selected")
	}
	loc, page := f.Decide("/inbox/decide", url.Values{"csrf": {csrf}, "id": {ctl.ID}, "decision": {"respond"}, "note": {"Why the Team plan?"}, "back": {"/inbox#section-proposals"}}, cookie)
	if loc != "/inbox#section-proposals" || !strings.Contains(page, "Sent your note") {
		t.Fatalf("reply: %s", loc)
	}
	w := waitNow(t, cs, map[string]any{"items": []any{map[string]any{"proposal": map[string]any{"formId": "profile", "controlId": "plan"}, "revision": rev}}, "timeout_ms": 0})
	notes := notesOf(t, w.item(0))
	if w.item(0)["status"] != "pending" || len(notes) != 1 || notes[0].Text != "Why the Team plan?" {
		t.Fatalf("the agent reads: %v", w.out)
	}
}

// heardNote is a note as inbox_wait reports it to the agent.
type heardNote struct {
	Text     string `json:"text"`
	Decision string `json:"decision"`
	By       string `json:"by"`
}

// notesOf reads the notes of an item of an inbox_wait answer.
func notesOf(t *testing.T, item map[string]any) []heardNote {
	t.Helper()
	if item["notes"] == nil {
		return nil
	}
	return assenttest.As[[]heardNote](t, item["notes"])
}

// The inbox page offers one batch approval a kind: each kind's bar names
// it, a section with several items of a kind offers to select them all,
// and a selection that mixes kinds approves nothing.
func TestInboxWebBatchOfOneKind(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "batcher", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	stage(t, cs, "pro")
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	if approvalOf(t, out).ID == "" {
		t.Fatalf("no approval: %v", out)
	}
	var in api.Inbox
	session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in)
	ctl, okc := byKind(in, "control_proposal")
	apr, oka := byKind(in, "flow_approval")
	if !okc || !oka {
		t.Fatalf("inbox: %+v", in)
	}
	page := assenttest.ReadAll(f.Get("/inbox", cookie))
	for _, want := range []string{`id="batch-control_proposal"`, "Approve selected proposed changes", `id="batch-flow_approval"`, "Approve selected approvals",
		`form="batch-control_proposal" data-kind="control_proposal"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the inbox page lacks %s", want)
		}
	}
	_, page = f.Decide("/inbox/decide-selected", url.Values{"csrf": {csrf}, "id": {ctl.ID, apr.ID}}, cookie)
	if !strings.Contains(page, "Nothing was approved: the selection mixes") {
		t.Errorf("a mixed selection: the page says no refusal")
	}
	in = api.Inbox{}
	session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in)
	if len(in.Items) < 2 || !slices.ContainsFunc(in.Items, func(it api.InboxItem) bool { return it.ID == ctl.ID }) ||
		!slices.ContainsFunc(in.Items, func(it api.InboxItem) bool { return it.ID == apr.ID }) {
		t.Errorf("a mixed selection decided something: %+v", in)
	}
	// One kind goes through, each item on its own.
	_, page = f.Decide("/inbox/decide-selected", url.Values{"csrf": {csrf}, "id": {apr.ID}}, cookie)
	if !strings.Contains(page, "Approved 1 of 1 selected") {
		t.Errorf("one kind: the page does not say it was approved")
	}
}

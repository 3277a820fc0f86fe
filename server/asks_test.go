package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// ask calls approvals_request as cs and returns its answer.
func ask(t *testing.T, cs *mcp.ClientSession, args map[string]any) (id, link string) {
	t.Helper()
	out, isErr := assenttest.CallTool(t, cs, "approvals_request", args)
	id, _ = out["approval"].(string)
	link, _ = out["url"].(string)
	if isErr || !strings.HasPrefix(id, "ask_") || !strings.Contains(link, "/inbox#card-") {
		t.Fatalf("approvals_request: %v", out)
	}
	return id, link
}

// waitFor calls inbox_wait on the question id and returns its outcome.
func waitFor(t *testing.T, cs *mcp.ClientSession, id string, timeoutMs int) map[string]any {
	t.Helper()
	out, isErr := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"approval": id}}, "timeout_ms": timeoutMs})
	items, _ := out["items"].([]any)
	if isErr || len(items) != 1 {
		t.Fatalf("inbox_wait: %v", out)
	}
	o, _ := items[0].(map[string]any)
	return o
}

// question returns the inbox item of the question id.
func question(t *testing.T, f *assenttest.Kit, cookie *http.Cookie, csrf, id string) (api.InboxItem, bool) {
	t.Helper()
	var in api.Inbox
	if code := session(t, f, cookie, csrf, "GET", "/v1/inbox", nil, &in); code != http.StatusOK {
		t.Fatalf("GET /v1/inbox: %d", code)
	}
	for _, it := range in.Items {
		if it.Kind == "question" && it.Bound["approval"] == id {
			return it, true
		}
	}
	return api.InboxItem{}, false
}

// An agent asks over MCP, a person answers through POST
// /v1/inbox/{id}/decision, and the agent waiting in inbox_wait gets the
// answer, who gave it and the person's note. Only the asker and its
// supervisors see the question.
func TestQuestionAnsweredThroughInbox(t *testing.T) {
	f := assenttest.StartListening(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cookie, csrf := f.SignIn()

	id, link := ask(t, cs, map[string]any{"question": "Which account pays INV-7?", "options": []string{"Operating", "Reserve"},
		"reason": "The invoice names none."})
	it, ok := question(t, f, cookie, csrf, id)
	if !ok {
		t.Fatal("the question is not in its supervisor's inbox")
	}
	if it.Bound["question"] != "Which account pays INV-7?" || it.Bound["options"] != `["Operating","Reserve"]` || it.Bound["reason"] != "The invoice names none." ||
		len(it.Editable) != 1 || it.Editable[0] != "answer" || it.ProposedBy != f.Boot.Agent.ID {
		t.Errorf("inbox item %+v", it)
	}
	if !strings.HasPrefix(link, f.URL()+"/inbox#card-") {
		t.Errorf("url %q, want the card on %s/inbox", link, f.URL())
	}
	st, _ := assenttest.CallTool(t, cs, "runtime_status", map[string]any{})
	if open, _ := st["open"].(map[string]any); open["questions"] != float64(1) {
		t.Errorf("runtime_status open = %v, want one question", st["open"])
	}

	// Another agent neither waits on it nor sees it; a person who does
	// not oversee the asker does not see it.
	other, _ := f.Issue(store.KindAgent, "other", "state.write")
	ocs, err := f.MCPSession(other, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ocs.Close()
	if o := waitFor(t, ocs, id, 0); o["status"] != "not_found" {
		t.Errorf("another agent's wait: %v", o)
	}
	_, stranger := f.Issue(store.KindHuman, "stranger")
	sc, scsrf := f.SignInAs(stranger.ID)
	if _, ok := question(t, f, sc, scsrf, id); ok {
		t.Error("a person who does not oversee the asker sees the question")
	}

	// Refused: an answer that is not an option, an id bound to another
	// card.
	var out api.InboxOutcome
	if code := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision",
		map[string]any{"decision": "approve", "values": map[string]any{"answer": "Petty cash"}}, &out); code == http.StatusOK || out.Error == nil || out.Error.Code != "invalid_value" {
		t.Errorf("an answer that is no option: %d %+v", code, out.Error)
	}
	stale := it.ID[:strings.LastIndex(it.ID, "@")] + "@000000000000"
	out = api.InboxOutcome{}
	if code := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(stale)+"/decision",
		map[string]any{"decision": "approve", "values": map[string]any{"answer": "Reserve"}}, &out); code != http.StatusConflict || out.Error == nil || out.Error.Code != "stale" {
		t.Errorf("a decision bound to another card: %d %+v", code, out.Error)
	}

	got := make(chan map[string]any, 1)
	go func() { got <- waitFor(t, cs, id, 30000) }()
	out = api.InboxOutcome{}
	if code := session(t, f, cookie, csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision",
		map[string]any{"decision": "approve", "values": map[string]any{"answer": "Reserve"}, "note": "Reserve has room this month."}, &out); code != http.StatusOK || out.Status != "approved" {
		t.Fatalf("answer: %d %+v", code, out)
	}
	o := <-got
	notes, _ := o["notes"].([]any)
	if o["status"] != "answered" || o["answer"] != "Reserve" || o["decided_by"] != f.Boot.Owner.ID || len(notes) != 1 ||
		notes[0].(map[string]any)["text"] != "Reserve has room this month." {
		t.Errorf("inbox_wait outcome %v", o)
	}
	if _, ok := question(t, f, cookie, csrf, id); ok {
		t.Error("an answered question is still in the inbox")
	}
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{PrincipalID: f.Boot.Owner.ID})
	audited := false
	for _, r := range recs {
		audited = audited || (r.Action == "question.decide" && r.Subject == "question:"+id && strings.Contains(r.Detail, `"answer":"Reserve"`))
	}
	if err != nil || !audited {
		t.Errorf("the answer is not in the audit log: %v %v", recs, err)
	}
	if o := waitFor(t, ocs, id, 0); o["status"] != "not_found" {
		t.Errorf("another agent reads the answer: %v", o)
	}
}

// Questions past a bound are refused with the codes the reference names,
// and nothing is stored.
func TestQuestionBounds(t *testing.T) {
	f := assenttest.Start(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		args map[string]any
		code string
	}{
		{map[string]any{"question": strings.Repeat("x", 2001)}, "limit_exceeded"},
		{map[string]any{"question": "?", "options": []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u"}}, "limit_exceeded"},
		{map[string]any{"question": "?", "reason": strings.Repeat("r", 2001)}, "limit_exceeded"},
		{map[string]any{"question": "  "}, "invalid_value"},
		{map[string]any{"question": "?", "options": []string{"only"}}, "invalid_value"},
		{map[string]any{"question": "?", "options": []string{"same", "same"}}, "invalid_value"},
		{map[string]any{"question": "?", "options": []string{"a\u202eb", "c"}}, "invalid_value"},
		{map[string]any{"question": "?", "answer": "text", "options": []string{"a", "b"}}, "invalid_value"},
		{map[string]any{"question": "?", "deadline_seconds": 0}, "invalid_value"},
		{map[string]any{"question": "?", "deadline_seconds": 2592001}, "invalid_value"},
		{map[string]any{"question": "?", "fallback": "decline"}, "invalid_value"},
		{map[string]any{"question": "?", "deadline_seconds": 60, "fallback": "maybe"}, "invalid_value"},
		{map[string]any{"question": "?", "answer": "text", "deadline_seconds": 60, "fallback": "approve"}, "invalid_value"},
		{map[string]any{"question": "?", "answer": "maybe"}, "invalid_params"},
	} {
		out, isErr := assenttest.CallTool(t, cs, "approvals_request", tc.args)
		if !isErr || assenttest.ErrCode(out) != tc.code {
			t.Errorf("approvals_request %v = %v, want %s", tc.args, out, tc.code)
		}
	}
	for i := range 32 {
		ask(t, cs, map[string]any{"question": fmt.Sprintf("Question %d?", i)})
	}
	if out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "One more?"}); !isErr || assenttest.ErrCode(out) != "limit_exceeded" {
		t.Errorf("33rd open question: %v", out)
	}
	open, err := f.DB.Asks().OpenAsks(t.Context(), f.Boot.Agent.ID)
	if err != nil || len(open) != 32 {
		t.Errorf("%d open questions stored (%v), want 32", len(open), err)
	}
}

// A question with a 2 s deadline that no person decides ends with its
// fallback, and the agent waiting in inbox_wait is told: declined with
// the reason "no decision before the deadline" by default, or the
// fallback's answer.
func TestQuestionDeadline(t *testing.T) {
	f := assenttest.Start(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	declined, _ := ask(t, cs, map[string]any{"question": "Ship today?", "deadline_seconds": 2})
	chosen, _ := ask(t, cs, map[string]any{"question": "Which carrier?", "options": []string{"Post", "Courier"}, "deadline_seconds": 2, "fallback": "Courier"})
	out, isErr := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{
		map[string]any{"approval": declined}, map[string]any{"approval": chosen}}, "timeout_ms": 30000})
	items, _ := out["items"].([]any)
	if isErr || len(items) != 2 || out["timed_out"] != false {
		t.Fatalf("inbox_wait: %v", out)
	}
	if o := items[0].(map[string]any); o["status"] != "declined" || o["reason"] != "no decision before the deadline" || o["decided_by"] != nil {
		t.Errorf("default fallback: %v", o)
	}
	if o := items[1].(map[string]any); o["status"] != "answered" || o["answer"] != "Courier" || !strings.HasPrefix(o["reason"].(string), "no decision before the deadline") {
		t.Errorf("fallback to an option: %v", o)
	}
	a, err := f.DB.Asks().Ask(t.Context(), declined)
	if err != nil || a.State != store.AskExpired {
		t.Errorf("stored question %+v, %v; want expired", a, err)
	}
}

// A deadline that passed while no server ran is enforced when the next
// one starts.
func TestQuestionDeadlineAfterRestart(t *testing.T) {
	f := assenttest.Start(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := ask(t, cs, map[string]any{"question": "Renew the certificate?", "deadline_seconds": 1, "fallback": "approve"})
	cs.Close()
	f.Srv.Close()
	time.Sleep(1100 * time.Millisecond) // the deadline passes while no server runs
	if a, _ := f.DB.Asks().Ask(t.Context(), id); a.State != store.AskOpen {
		t.Fatalf("question ended while no server ran: %+v", a)
	}
	g := f.Restart(nil)
	cs, err = g.MCPSession(g.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if o := waitFor(t, cs, id, 30000); o["status"] != "answered" || o["answer"] != "yes" {
		t.Errorf("after a restart: %v", o)
	}
}

// Two people decide one question at once: exactly one decision is
// carried out, and the other is refused.
func TestQuestionOneDeciderWins(t *testing.T) {
	f := assenttest.Start(t, nil)
	_, ben := f.Issue(store.KindHuman, "ben")
	tok, agent, err := f.Srv.AddAgent(t.Context(), "asker", []string{"state.write"}, f.Boot.Owner.ID, ben.ID)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(tok, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type person struct {
		cookie *http.Cookie
		csrf   string
	}
	var people []person
	for _, id := range []string{f.Boot.Owner.ID, ben.ID} {
		c, csrf := f.SignInAs(id)
		people = append(people, person{c, csrf})
	}
	for round := range 5 {
		id, _ := ask(t, cs, map[string]any{"question": fmt.Sprintf("Approve batch %d?", round)})
		it, ok := question(t, f, people[0].cookie, people[0].csrf, id)
		if !ok {
			t.Fatal("question not in the inbox")
		}
		var wg sync.WaitGroup
		outs := make([]api.InboxOutcome, 2*len(people))
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := people[i%len(people)]
				answer := []string{"yes", "no"}[i%2]
				session(t, f, p.cookie, p.csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision",
					map[string]any{"decision": "approve", "values": map[string]any{"answer": answer}}, &outs[i])
			}()
		}
		wg.Wait()
		won := 0
		for _, o := range outs {
			switch {
			case o.Status == "approved":
				won++
			case o.Error == nil || (o.Error.Code != "conflict" && o.Error.Code != "not_found"):
				t.Errorf("losing decision: %+v", o)
			}
		}
		a, err := f.DB.Asks().Ask(context.Background(), id)
		if won != 1 || err != nil || a.State != store.AskAnswered || (a.DecidedBy != f.Boot.Owner.ID && a.DecidedBy != ben.ID) || a.Asker != agent.ID {
			t.Fatalf("round %d: %d decisions carried out; stored %+v, %v", round, won, a, err)
		}
	}
}

// The card shows the question as the agent wrote it, hidden characters
// as escapes, and answers through the page's own form.
func TestQuestionCardOnInboxPage(t *testing.T) {
	f := assenttest.Start(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cookie, csrf := f.SignIn()
	id, _ := ask(t, cs, map[string]any{"question": "Refund order \u202e42-RO?", "answer": "text", "reason": "The customer wrote twice.", "deadline_seconds": 3600})
	page := assenttest.ReadAll(f.Get("/inbox", cookie))
	for _, want := range []string{"Question from ", "⟨U+202E⟩", "hidden or direction-changing", "The customer wrote twice.", "Answer by", "<time datetime=", `name="value:answer"`, "Decline to answer"} {
		if !strings.Contains(page, want) {
			t.Errorf("inbox page lacks %q", want)
		}
	}
	if strings.Contains(page, "\u202e") {
		t.Error("the page carries the raw direction override")
	}
	it, _ := question(t, f, cookie, csrf, id)
	where, _ := f.Decide("/inbox/decide", url.Values{"csrf": {csrf}, "id": {it.ID}, "decision": {"approve"}, "value:answer": {"Yes, refund it."}, "back": {"/inbox"}}, cookie)
	if where != "/inbox" {
		t.Errorf("redirected to %q", where)
	}
	if o := waitFor(t, cs, id, 0); o["status"] != "answered" || o["answer"] != "Yes, refund it." {
		t.Errorf("outcome %v", o)
	}
}

// A client that declared URL-mode elicitation is asked to open the
// question's card when the agent asks.
func TestQuestionComesAsURLElicitation(t *testing.T) {
	f := assenttest.Start(t, nil)
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params)
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: f.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearer(f.Token)}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, link := ask(t, cs, map[string]any{"question": "May I archive last year's invoices?"})
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0].Mode != "url" || asked[0].URL != f.URL()+link {
		t.Errorf("elicitations %+v, want one url elicitation of %s", asked, link)
	}
}

// A question asked of a group goes to its members: a member finds it in
// their inbox, marked "Asked of group finance", and answers it; a
// supervisor of the asking agent outside the group neither lists it nor
// may answer it (not_routed).
func TestQuestionAskedOfGroup(t *testing.T) {
	f := assenttest.StartListening(t, nil)
	_, ben := f.Issue(store.KindHuman, "ben", "state.write")
	_, carol := f.Issue(store.KindHuman, "carol", "state.write")
	token, _, err := f.Srv.AddAgent(t.Context(), "clerk", f.Boot.Agent.Grants, ben.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "finance", PrincipalID: carol.ID, AddedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "Pay?", "group": "legal"}); !isErr || !strings.Contains(fmt.Sprint(out), "invalid_value") {
		t.Errorf("a group without members: %v", out)
	}
	id, _ := ask(t, cs, map[string]any{"question": "Pay invoice INV-9 of 410.00 EUR?", "group": "finance"})

	cc, ccsrf := f.SignInAs(carol.ID)
	it, ok := question(t, f, cc, ccsrf, id)
	if !ok || it.AskedOf != "Asked of group finance: carol" || it.Bound["group"] != "finance" {
		t.Fatalf("carol's card = %+v (found %v), want it asked of group finance", it, ok)
	}
	if page := assenttest.ReadAll(f.Get("/inbox", cc)); !strings.Contains(page, "Asked of group finance") {
		t.Error("the inbox page does not say the question is asked of group finance")
	}
	bc, bcsrf := f.SignInAs(ben.ID)
	if _, ok := question(t, f, bc, bcsrf, id); ok {
		t.Error("ben, who supervises the agent but is not in the group, lists the question")
	}
	var out api.InboxOutcome
	if code := session(t, f, bc, bcsrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision",
		map[string]any{"decision": "approve", "values": map[string]any{"answer": "yes"}}, &out); code != http.StatusForbidden || out.Error == nil || out.Error.Code != "not_routed" {
		t.Fatalf("ben's answer: %d %+v, want 403 not_routed", code, out.Error)
	}
	out = api.InboxOutcome{}
	if code := session(t, f, cc, ccsrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision",
		map[string]any{"decision": "approve", "values": map[string]any{"answer": "yes"}}, &out); code != http.StatusOK || out.Status != "approved" {
		t.Fatalf("carol's answer: %d %+v", code, out)
	}
	if o := waitFor(t, cs, id, 0); o["status"] != "answered" || o["answer"] != "yes" || o["decided_by"] != carol.ID {
		t.Errorf("inbox_wait outcome %v", o)
	}
}

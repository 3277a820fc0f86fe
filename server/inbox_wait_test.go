package server_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// waitResult is one inbox_wait answer: its structured content, its text
// content and whether it was an error.
type waitResult struct {
	out   map[string]any
	text  string
	isErr bool
	err   error
}

// startWait calls inbox_wait in the background; the answer arrives on the
// returned channel.
func startWait(cs *mcp.ClientSession, args map[string]any) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "inbox_wait", Arguments: args})
		if err != nil {
			ch <- waitResult{err: err}
			return
		}
		var w waitResult
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &w.out)
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				w.text = tc.Text
			}
		}
		w.isErr = res.IsError
		ch <- w
	}()
	return ch
}

func waitNow(t *testing.T, cs *mcp.ClientSession, args map[string]any) waitResult {
	t.Helper()
	w := <-startWait(cs, args)
	if w.err != nil {
		t.Fatalf("inbox_wait: %v", w.err)
	}
	return w
}

// item returns the i-th outcome of an inbox_wait answer.
func (w waitResult) item(i int) map[string]any {
	items, _ := w.out["items"].([]any)
	if i >= len(items) {
		return nil
	}
	m, _ := items[i].(map[string]any)
	return m
}

// A person declines with a reason; the agent's pending wait returns
// declined with that reason, and flows_prescribe no longer sends the agent
// back to the inbox: it reports the decline and files a new request only
// when asked to.
func TestInboxWaitDeclinedApproval(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	aprID := approvalOf(t, out).ID
	if isErr || aprID == "" || !strings.Contains(out["next"].(string), "inbox_wait") {
		t.Fatalf("prescribe: %v", out)
	}
	items := []any{map[string]any{"approval": aprID}}

	// Nothing decided yet: a wait with no time left reports pending.
	w := waitNow(t, cs, map[string]any{"items": items, "timeout_ms": 0})
	if w.isErr || w.item(0)["status"] != "pending" || w.out["timed_out"] != true || w.out["pending"] != 1.0 {
		t.Fatalf("wait before the decision: %v", w.out)
	}

	waiting := startWait(cs, map[string]any{"items": items, "timeout_ms": 300000})
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	f.Decide("/web/flows/approvals/"+aprID+"/decline", url.Values{"csrf": {csrf}, "reason": {"not a business trip"}}, cookie)
	w = <-waiting
	if w.err != nil || w.isErr {
		t.Fatalf("wait: %v %v", w.err, w.out)
	}
	got := w.item(0)
	if got["status"] != "declined" || got["reason"] != "not a business trip" || got["decided_by"] != person.ID || w.out["timed_out"] != false {
		t.Fatalf("wait after the decline: %v", w.out)
	}
	// The text content carries the same data.
	var text map[string]any
	if json.Unmarshal([]byte(w.text), &text) != nil || text["items"] == nil || !strings.Contains(w.text, "not a business trip") {
		t.Fatalf("text content: %q", w.text)
	}

	// Asking for the next step reports the decline with its reason, not
	// "a person must approve".
	out, isErr = assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	next, _ := out["next"].(string)
	if isErr || approvalOf(t, out).Status != flow.ApprovalDeclined || !strings.Contains(next, "declined") || !strings.Contains(next, "not a business trip") ||
		!strings.Contains(next, "ask_again") || strings.Contains(next, "must approve") {
		t.Fatalf("prescribe after the decline: %v", out)
	}
	// Over HTTP too.
	code, hv, _ := f.API("POST", "/v1/flows/instances/"+demo.ExpenseID+"/prescribe", f.Token, map[string]any{})
	if next, _ := hv["next"].(string); code != 200 || !strings.Contains(next, "not a business trip") || strings.Contains(next, "must approve") {
		t.Fatalf("HTTP prescribe after the decline: %d %v", code, hv)
	}
	// Asking again files a new approval request, which the person sees.
	out, isErr = assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID, "ask_again": true})
	againApr := approvalOf(t, out)
	again := againApr.ID
	if isErr || again == "" || again == aprID || againApr.Status != flow.ApprovalPending {
		t.Fatalf("ask again: %v", out)
	}
	if inbox := assenttest.ReadAll(f.Get("/inbox", cookie)); !strings.Contains(inbox, again) {
		t.Fatal("the new approval request is not in the inbox")
	}
	// From now on, prescribing returns the new request, not the decline.
	out, _ = assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	if approvalOf(t, out).ID != again {
		t.Fatalf("prescribe after asking again: %v", out)
	}
	// The declined request still reports its decline.
	w = waitNow(t, cs, map[string]any{"items": []any{map[string]any{"approval": aprID}, map[string]any{"approval": again}}, "timeout_ms": 0})
	if w.item(0)["status"] != "declined" || w.item(1)["status"] != "pending" {
		t.Fatalf("both requests: %v", w.out)
	}
}

// A person approves: the wait returns approved with the receipt.
func TestInboxWaitApprovedApproval(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	aprID := approvalOf(t, out).ID
	waiting := startWait(cs, map[string]any{"items": []any{map[string]any{"approval": aprID}}})
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	f.Decide("/web/flows/approvals/"+aprID+"/approve", url.Values{"csrf": {csrf}}, cookie)
	w := <-waiting
	got := w.item(0)
	if w.err != nil || got["status"] != "approved" || !strings.HasPrefix(got["receipt"].(string), "rcp-") || got["decided_by"] != person.ID {
		t.Fatalf("wait after approval: %v %v", w.err, w.out)
	}
}

// stage stages value on the demo plan control and returns the proposal's
// revision.
func stage(t *testing.T, cs *mcp.ClientSession, value string) int64 {
	t.Helper()
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": value})
	staged := assenttest.As[control.Result](t, out).Snapshot.State.Staged
	if isErr || staged == nil {
		t.Fatalf("stage: %v", out)
	}
	return staged.Revision
}

// Control proposals: applied and discarded by a person while the agent
// waits, decided before the wait started, replaced by a newer proposal.
func TestInboxWaitControlProposal(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, person := f.Issue(store.KindHuman, "person")
	cookie, csrf := f.SignInAs(person.ID)
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	form := func(rev int64) url.Values {
		return url.Values{"csrf": {csrf}, "formId": {"profile"}, "controlId": {"plan"}, "revision": {strconv.FormatInt(rev, 10)}}
	}

	// Applied while the agent waits (no revision: its newest proposal).
	rev := stage(t, cs, "pro")
	if w := waitNow(t, cs, map[string]any{"items": []any{map[string]any{"proposal": plan}}, "timeout_ms": 0}); w.item(0)["status"] != "pending" || w.item(0)["revision"] != float64(rev) {
		t.Fatalf("pending proposal: %v", w.out)
	}
	waiting := startWait(cs, map[string]any{"items": []any{map[string]any{"proposal": plan, "revision": rev}}})
	f.Decide("/web/controls/apply", form(rev), cookie)
	if w := <-waiting; w.err != nil || w.item(0)["status"] != "applied" || w.item(0)["decided_by"] != person.ID {
		t.Fatalf("applied: %v %v", w.err, w.out)
	}

	// Discarded while the agent waits.
	rev2 := stage(t, cs, "team")
	waiting = startWait(cs, map[string]any{"items": []any{map[string]any{"proposal": plan, "revision": rev2}}})
	f.Decide("/web/controls/discard", form(rev2), cookie)
	if w := <-waiting; w.err != nil || w.item(0)["status"] != "discarded" {
		t.Fatalf("discarded: %v %v", w.err, w.out)
	}

	// Both outcomes are known after the fact too, and a proposal replaced
	// by a newer one is stale.
	rev3 := stage(t, cs, "free")
	rev4 := stage(t, cs, "pro")
	check := func(c *testwait.C) {
		w := waitNow(t, cs, map[string]any{"items": []any{
			map[string]any{"proposal": plan, "revision": rev},
			map[string]any{"proposal": plan, "revision": rev2},
			map[string]any{"proposal": plan, "revision": rev3},
			map[string]any{"proposal": plan, "revision": rev4},
		}, "timeout_ms": 0})
		for i, want := range []string{"applied", "discarded", "stale", "pending"} {
			if w.item(i)["status"] != want {
				c.Errorf("item %d: want %s: %v", i, want, w.out)
				return
			}
		}
	}
	if f.Backend == assenttest.Postgres {
		// The replacement is learnt from the event of the newer stage,
		// which comes back through the store's shared log.
		testwait.EventuallyC(t, 10*time.Second, check, "the outcomes after the fact")
	} else {
		testwait.EventuallyC(t, 0, check, "the outcomes after the fact")
	}
}

// A command proposal declined on its page: the wait returns declined with
// the reason.
func TestInboxWaitCommandProposal(t *testing.T) {
	f := assenttest.Start(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	code, v, _ := f.API("POST", "/v1/runs", f.Token, map[string]any{"template": "echo hi", "run_id": "wait-me"})
	id, _ := v["proposal"].(string)
	if code != 202 || id == "" {
		t.Fatalf("spawn: %d %v", code, v)
	}
	// The decision is an event the proposer can see, so a waiting agent
	// learns it at once rather than at its next look.
	sub := f.Srv.Events().Subscribe(f.Srv.Events().Seq(), 64, func(e event.Event) bool {
		return e.Type == "run.proposal" && e.VisibleTo(f.Boot.Agent.ID, false)
	})
	defer sub.Close()
	waiting := startWait(cs, map[string]any{"items": []any{map[string]any{"command_proposal": id}}})
	_, person := f.Issue(store.KindHuman, "person")
	cookie, csrf := f.SignInAs(person.ID)
	f.Decide("/runs/proposals/"+id+"/decline", url.Values{"csrf": {csrf}, "reason": {"no shell commands today"}}, cookie)
	w := <-waiting
	if w.err != nil || w.item(0)["status"] != "declined" || w.item(0)["reason"] != "no shell commands today" {
		t.Fatalf("declined: %v %v", w.err, w.out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := sub.Next(ctx)
	if err != nil || !strings.Contains(string(e.Data), `"proposal":"`+id+`"`) {
		t.Fatalf("no run.proposal event for the decision: %v %s", err, e.Data)
	}
}

// The attack: a second agent waits on the first agent's approval, control
// proposal and command proposal, hoping to learn the decisions. Each is
// not_found, exactly as for an id that does not exist.
func TestInboxWaitOtherAgentsItemsAreNotFound(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	aprID := approvalOf(t, out).ID
	rev := stage(t, cs, "pro")
	_, v, _ := f.API("POST", "/v1/runs", f.Token, map[string]any{"template": "echo hi", "run_id": "not-yours"})
	propID, _ := v["proposal"].(string)
	if aprID == "" || propID == "" {
		t.Fatalf("setup: %v %v", out, v)
	}

	tokB, _ := f.Issue(store.KindAgent, "other")
	csB, err := f.MCPSession(tokB, "")
	if err != nil {
		t.Fatal(err)
	}
	defer csB.Close()
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	items := []any{
		map[string]any{"approval": aprID},
		map[string]any{"proposal": plan, "revision": rev},
		map[string]any{"proposal": plan},
		map[string]any{"command_proposal": propID},
		map[string]any{"approval": "apr-0000"},
		map[string]any{"proposal": plan, "revision": rev + 1000},
		map[string]any{"command_proposal": "nope"},
	}
	w := waitNow(t, csB, map[string]any{"items": items, "timeout_ms": 0})
	if w.isErr || w.out["pending"] != 0.0 {
		t.Fatalf("wait: %v", w.out)
	}
	for i := range items {
		got := w.item(i)
		if got["status"] != "not_found" || got["decided_by"] != nil || got["reason"] != nil {
			t.Fatalf("item %d: %v", i, got)
		}
	}
	// The same items that do not exist answer the same for their owner.
	w = waitNow(t, cs, map[string]any{"items": items[4:], "timeout_ms": 0})
	for i := range items[4:] {
		if w.item(i)["status"] != "not_found" {
			t.Fatalf("owner, item %d: %v", i, w.out)
		}
	}
}

func TestInboxWaitArguments(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range list.Tools {
		if tl.Name != "inbox_wait" {
			continue
		}
		found = true
		raw, _ := json.Marshal(tl.Annotations)
		for _, k := range []string{`"readOnlyHint":true`, `"destructiveHint":false`, `"idempotentHint":true`, `"openWorldHint":false`} {
			if !strings.Contains(string(raw), k) {
				t.Errorf("annotation %s not set: %s", k, raw)
			}
		}
	}
	if !found {
		t.Fatal("inbox_wait is not listed")
	}
	for name, args := range map[string]map[string]any{
		"no items":        {"items": []any{}},
		"two kinds":       {"items": []any{map[string]any{"approval": "apr-1", "command_proposal": "x"}}},
		"empty item":      {"items": []any{map[string]any{}}},
		"revision alone":  {"items": []any{map[string]any{"approval": "apr-1", "revision": 3}}},
		"timeout too big": {"items": []any{map[string]any{"approval": "apr-1"}}, "timeout_ms": 300001},
		"bad identity":    {"items": []any{map[string]any{"proposal": map[string]any{"formId": "", "controlId": "x"}}}},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "inbox_wait", Arguments: args})
		if err != nil {
			continue // refused by the schema
		}
		// The input schema's limits are invalid_params; what it cannot
		// state (one kind per item, a revision with its proposal),
		// invalid_request.
		if got := string(assenttest.MustJSON(res.StructuredContent)); !res.IsError || !strings.Contains(got, "invalid_request") && !strings.Contains(got, "invalid_params") {
			t.Errorf("%s: %+v", name, res.StructuredContent)
		}
	}
}

// The wait ends when the server shuts down, with the outcomes so far.
func TestInboxWaitEndsOnShutdown(t *testing.T) {
	f := assenttest.StartDemo(t)
	p := store.Principal{ID: f.Boot.Agent.ID, Kind: store.KindAgent}
	done := make(chan []server.WaitOutcome, 1)
	go func() {
		out, _, _ := server.InboxWait(f.Srv, context.Background(), p, []server.WaitItem{{Approval: "apr-none"}, {CommandProposal: "x"}}, server.WaitMax)
		done <- out
	}()
	f.Srv.EndStreams()
	if out := <-done; len(out) != 2 || out[0].Status != server.OutcomeNotFound {
		t.Fatalf("outcomes: %v", out)
	}
}

// A client that sent a progress token hears each decision as it is made,
// before the wait returns.
func TestInboxWaitProgress(t *testing.T) {
	f := assenttest.StartDemo(t)
	progress := make(chan *mcp.ProgressNotificationParams, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params:
			default:
			}
		},
	})
	hc := assenttest.Client(f.Token)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.HTTP.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, _ := assenttest.CallTool(t, cs, "flows_prescribe", map[string]any{"instance": demo.ExpenseID})
	aprID := approvalOf(t, out).ID
	rev := stage(t, cs, "pro")

	waiting := make(chan waitResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "inbox_wait", Arguments: map[string]any{"items": []any{
			map[string]any{"approval": aprID},
			map[string]any{"proposal": map[string]any{"formId": "profile", "controlId": "plan"}, "revision": rev},
		}}}
		params.SetProgressToken("wait-1")
		res, err := cs.CallTool(context.Background(), params)
		w := waitResult{err: err}
		if res != nil {
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &w.out)
		}
		waiting <- w
	}()
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	f.Decide("/web/flows/approvals/"+aprID+"/decline", url.Values{"csrf": {csrf}, "reason": {"no"}}, cookie)
	var p *mcp.ProgressNotificationParams
	select {
	case p = <-progress:
	case w := <-waiting:
		t.Fatalf("the wait returned before any progress: %v %v", w.err, w.out)
	}
	if p.ProgressToken != "wait-1" || p.Progress != 1 || p.Total != 2 {
		t.Fatalf("progress: %+v", p)
	}
	f.Decide("/web/controls/apply", url.Values{"csrf": {csrf}, "formId": {"profile"}, "controlId": {"plan"}, "revision": {strconv.FormatInt(rev, 10)}}, cookie)
	w := <-waiting
	if w.err != nil || w.item(0)["status"] != "declined" || w.item(1)["status"] != "applied" {
		t.Fatalf("wait: %v %v", w.err, w.out)
	}
}

// approvalOf returns the approval of a prescribe answer, the zero
// approval when it has none.
func approvalOf(t *testing.T, out map[string]any) flow.Approval {
	t.Helper()
	if a := assenttest.As[api.Prescription](t, out).Approval; a != nil {
		return *a
	}
	return flow.Approval{}
}

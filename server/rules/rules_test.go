package rules_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// person is a signed-in person's session.
type person struct {
	f      *assenttest.Kit
	cookie *http.Cookie
	csrf   string
	p      store.Principal
}

func signIn(f *assenttest.Kit, name string) person {
	_, p := f.Issue(store.KindHuman, name)
	cookie, csrf := f.SignInAs(p.ID)
	return person{f: f, cookie: cookie, csrf: csrf, p: p}
}

// do sends body as JSON with the person's cookie and, unless noCSRF, the
// Origin and CSRF header the pages send; out receives the answer.
func (s person) do(t *testing.T, method, path string, body, out any, noCSRF ...bool) int {
	t.Helper()
	b, _ := json.Marshal(body)
	if body == nil {
		b = nil
	}
	r, err := http.NewRequest(method, s.f.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.AddCookie(s.cookie)
	if len(noCSRF) == 0 {
		r.Header.Set("Origin", s.f.URL())
		r.Header.Set("X-CSRF-Token", s.csrf)
	}
	resp, err := s.f.NoRedirect().Do(r)
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

var plan = &api.RuleControl{FormID: "profile", ControlID: "plan"}

func values(vs ...string) []json.RawMessage {
	var out []json.RawMessage
	for _, v := range vs {
		b, _ := json.Marshal(v)
		out = append(out, b)
	}
	return out
}

func num(f float64) *float64 { return &f }

// stage has the agent stage value on the plan and returns its answer.
func stage(t *testing.T, cs *mcp.ClientSession, value string) api.CommandAnswer {
	t.Helper()
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage",
		"identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": value})
	if isErr {
		t.Fatalf("stage %s: %v", value, out)
	}
	return assenttest.As[api.CommandAnswer](t, out)
}

// A person makes, lists and revokes rules through their session; bad
// bounds, agents, services, tokens and requests without the CSRF header
// are refused, and a person sees and revokes only their own rules while
// the owner sees every one.
func TestRulesAPI(t *testing.T) {
	f := assenttest.StartDemo(t)
	alice, bob := signIn(f, "alice"), signIn(f, "bob")
	agent := f.Boot.Agent.ID
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)

	var made api.RuleView
	if c := alice.do(t, "POST", "/v1/rules", api.RuleRequest{Agent: agent, Control: plan, Values: values("pro"), Until: until}, &made); c != 201 ||
		!made.Live || made.CreatedBy != alice.p.ID || made.AgentID != agent || !made.Until.Equal(until) || len(made.Values) != 1 || !strings.HasPrefix(made.ID, "r_") {
		t.Fatalf("create: %d %+v", c, made)
	}
	// The longest a rule may last, to the nanosecond, is accepted.
	var longest api.RuleView
	if c := alice.do(t, "POST", "/v1/rules", api.RuleRequest{Agent: agent, Control: plan, Values: values("team"),
		Until: time.Now().Add(store.RuleMaxDuration - time.Millisecond)}, &longest); c != 201 {
		t.Fatalf("a rule of 90 days: %d %+v", c, longest)
	}
	var ranged api.RuleView
	if c := bob.do(t, "POST", "/v1/rules", api.RuleRequest{Agent: agent, Control: plan, Min: num(1), Until: until}, &ranged); c != 201 {
		t.Fatalf("create by bob: %d %+v", c, ranged)
	}

	for _, c := range []struct {
		name string
		req  api.RuleRequest
		code string
	}{
		{"no until", api.RuleRequest{Agent: agent, Control: plan, Values: values("pro")}, "invalid_request"},
		{"until past", api.RuleRequest{Agent: agent, Control: plan, Values: values("pro"), Until: time.Now().Add(-time.Minute)}, "invalid_request"},
		{"until over 90 days", api.RuleRequest{Agent: agent, Control: plan, Values: values("pro"), Until: time.Now().Add(91 * 24 * time.Hour)}, "invalid_request"},
		{"no bound", api.RuleRequest{Agent: agent, Control: plan, Until: until}, "invalid_request"},
		{"both bounds", api.RuleRequest{Agent: agent, Control: plan, Values: values("pro"), Max: num(3), Until: until}, "invalid_request"},
		{"min above max", api.RuleRequest{Agent: agent, Control: plan, Min: num(5), Max: num(3), Until: until}, "invalid_request"},
		{"no agent", api.RuleRequest{Control: plan, Values: values("pro"), Until: until}, "invalid_request"},
		{"a person as agent", api.RuleRequest{Agent: bob.p.ID, Control: plan, Values: values("pro"), Until: until}, "invalid_request"},
		{"unknown agent", api.RuleRequest{Agent: "p_nobody", Control: plan, Values: values("pro"), Until: until}, "invalid_request"},
		{"no control", api.RuleRequest{Agent: agent, Values: values("pro"), Until: until}, "invalid_request"},
		{"unknown control", api.RuleRequest{Agent: agent, Control: &api.RuleControl{FormID: "profile", ControlID: "nope"}, Values: values("pro"), Until: until}, "not_found"},
		{"too many values", api.RuleRequest{Agent: agent, Control: plan, Values: values(strings.Split(strings.Repeat("x,", 51), ",")...), Until: until}, "limit_exceeded"},
	} {
		var e map[string]any
		if code := alice.do(t, "POST", "/v1/rules", c.req, &e); code < 400 || assenttest.ErrCode(e) != c.code {
			t.Errorf("%s: %d %v, want %s", c.name, code, e, c.code)
		}
	}

	// Agents, services and tokens (a person's included) are refused, and
	// so is a cookie request without the CSRF header.
	svcTok, _ := f.Issue(store.KindService, "svc")
	personTok, _ := f.Issue(store.KindHuman, "carol")
	body := api.RuleRequest{Agent: agent, Control: plan, Values: values("pro"), Until: until}
	for name, tok := range map[string]string{"agent": f.Token, "service": svcTok, "person's token": personTok} {
		for _, m := range []string{"GET", "POST"} {
			if c, e, _ := f.API(m, "/v1/rules", tok, body); c != 403 || assenttest.ErrCode(e) != "human_confirmation_required" {
				t.Errorf("%s %s /v1/rules: %d %v", name, m, c, e)
			}
		}
		if c, e, _ := f.API("DELETE", "/v1/rules/"+made.ID, tok, nil); c != 403 || assenttest.ErrCode(e) != "human_confirmation_required" {
			t.Errorf("%s DELETE: %d %v", name, c, e)
		}
	}
	var e map[string]any
	if c := alice.do(t, "POST", "/v1/rules", body, &e, true); c != 403 || assenttest.ErrCode(e) != "bad_origin" {
		t.Errorf("POST without CSRF: %d %v", c, e)
	}

	// Each person lists their own; the owner lists every rule.
	var list api.RuleList
	if c := alice.do(t, "GET", "/v1/rules", nil, &list); c != 200 || len(list.Rules) != 2 ||
		list.Rules[0].ID+list.Rules[1].ID != longest.ID+made.ID && list.Rules[0].ID+list.Rules[1].ID != made.ID+longest.ID {
		t.Errorf("alice's list: %d %+v", c, list)
	}
	owner := person{f: f, p: f.Boot.Owner}
	owner.cookie, owner.csrf = f.SignIn()
	list = api.RuleList{}
	if c := owner.do(t, "GET", "/v1/rules", nil, &list); c != 200 || len(list.Rules) != 3 {
		t.Errorf("owner's list: %d %+v", c, list)
	}

	// Bob cannot revoke Alice's rule; she can, once.
	e = nil
	if c := bob.do(t, "DELETE", "/v1/rules/"+made.ID, nil, &e); c != 404 || assenttest.ErrCode(e) != "not_found" {
		t.Errorf("bob revokes alice's rule: %d %v", c, e)
	}
	var gone api.RuleView
	if c := alice.do(t, "DELETE", "/v1/rules/"+made.ID, nil, &gone); c != 200 || gone.Live || gone.RevokedBy != alice.p.ID {
		t.Errorf("revoke: %d %+v", c, gone)
	}
	e = nil
	if c := alice.do(t, "DELETE", "/v1/rules/"+made.ID, nil, &e); c != 409 || assenttest.ErrCode(e) != "conflict" {
		t.Errorf("revoke twice: %d %v", c, e)
	}
	// The owner revokes anyone's rule.
	if c := owner.do(t, "DELETE", "/v1/rules/"+ranged.ID, nil, &gone); c != 200 || gone.RevokedBy != f.Boot.Owner.ID {
		t.Errorf("owner revokes bob's rule: %d %+v", c, gone)
	}

	// Both makings and revocations are in the audit log.
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, r := range recs {
		if strings.HasPrefix(r.Action, "rule.") && strings.Contains(r.Detail, `"rule":"r_`) {
			n[r.Action]++
		}
	}
	if n["rule.create"] != 3 || n["rule.revoke"] != 2 {
		t.Errorf("audit records of rules: %v", n)
	}
}

// lastApply returns the newest audit record of an apply on the plan.
func lastApply(t *testing.T, f *assenttest.Kit) store.AuditRecord {
	t.Helper()
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{FormID: "profile"})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Action == string(control.Apply) && recs[i].ControlID == "plan" {
			return recs[i]
		}
	}
	return store.AuditRecord{}
}

// A rule lets the agent's next matching change through, applied in the
// person's name with an audit record naming the rule; a value outside it
// waits for a person; once revoked, the next matching change waits too.
func TestRuleLetsAgentThroughUntilRevoked(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	alice := signIn(f, "alice")
	var rule api.RuleView
	if c := alice.do(t, "POST", "/v1/rules", api.RuleRequest{Agent: f.Boot.Agent.ID, Control: plan, Values: values("pro", "team"),
		Until: time.Now().Add(time.Hour)}, &rule); c != 201 {
		t.Fatalf("create: %d", c)
	}

	events := f.Events("")
	defer events.Resp.Body.Close()
	got := stage(t, cs, "team")
	if got.AppliedUnderRule != rule.ID || got.Snapshot.State.Value != "team" || got.Snapshot.State.Staged != nil ||
		!strings.Contains(got.Message, rule.ID) {
		t.Fatalf("a covered value: %+v", got)
	}
	rec := lastApply(t, f)
	if !rec.OK || rec.PrincipalID != alice.p.ID || !strings.Contains(rec.Detail, `"rule":"`+rule.ID+`"`) {
		t.Errorf("the apply's audit record: %+v", rec)
	}
	// So do the event of the apply and the audit page.
	for i := 0; ; i++ {
		e := events.Next(t)
		if e.Type == "control.command" && strings.Contains(e.Data, `"action":"apply"`) {
			if !strings.Contains(e.Data, `"rule":"`+rule.ID+`"`) || !strings.Contains(e.Data, `"principalId":"`+alice.p.ID+`"`) {
				t.Errorf("the apply's event: %s", e.Data)
			}
			break
		}
		if i == 20 {
			t.Fatal("no apply event")
		}
	}
	if page := assenttest.ReadAll(f.Get("/audit", alice.cookie)); !strings.Contains(page, "applied under rule "+rule.ID) {
		t.Error("the audit page does not name the rule")
	}

	// The inbox's recent changes say which rule made the change.
	if page := assenttest.ReadAll(f.Get("/inbox", alice.cookie)); !strings.Contains(page, "alice, applied under rule "+rule.ID) {
		t.Error("the inbox's recent change does not name the rule")
	}

	// A value the rule does not allow waits for a person.
	if got := stage(t, cs, "free"); got.AppliedUnderRule != "" || got.Snapshot.State.Staged == nil || got.Snapshot.State.Value != "team" {
		t.Errorf("an uncovered value: %+v", got)
	}

	// Revoked from the rules page, the rule lets nothing through.
	page := assenttest.ReadAll(f.Get("/rules", alice.cookie))
	if !strings.Contains(page, `aria-label="Revoke rule: Let `) || !strings.Contains(page, `href="/rules"`) {
		t.Errorf("the rules page lacks a named Revoke button or the navigation link:\n%s", page)
	}
	resp := f.PostForm("/rules/"+rule.ID+"/revoke", url.Values{"csrf": {alice.csrf}}, alice.cookie, f.URL())
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke from the page: %d", resp.StatusCode)
	}
	if got := stage(t, cs, "pro"); got.AppliedUnderRule != "" || got.Snapshot.State.Staged == nil || got.Snapshot.State.Value != "team" {
		t.Errorf("after revocation: %+v", got)
	}
	if page := assenttest.ReadAll(f.Get("/rules", alice.cookie)); !strings.Contains(page, "Revoked by alice") || strings.Contains(page, `aria-label="Revoke rule`) {
		t.Error("the rules page does not show the rule revoked")
	}
}

// A rule never does more than its creator may do now: once the person is
// revoked, their rule lets nothing through.
func TestRuleNeverWidens(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	bob := signIn(f, "bob")
	var rule api.RuleView
	if c := bob.do(t, "POST", "/v1/rules", api.RuleRequest{Agent: f.Boot.Agent.ID, Control: plan, Values: values("team"),
		Until: time.Now().Add(time.Hour)}, &rule); c != 201 {
		t.Fatalf("create: %d", c)
	}
	if err := f.DB.Principals().RevokePrincipal(t.Context(), bob.p.ID); err != nil {
		t.Fatal(err)
	}
	if got := stage(t, cs, "team"); got.AppliedUnderRule != "" || got.Snapshot.State.Staged == nil || got.Snapshot.State.Value == "team" {
		t.Errorf("a revoked person's rule applied: %+v", got)
	}
	if rec := lastApply(t, f); rec.PrincipalID == bob.p.ID {
		t.Errorf("applied in a revoked person's name: %+v", rec)
	}
}

// A rule made from a card: approving the agent's proposal with "rule"
// applies it and makes the rule for that agent, control and value; the
// card's web form does the same.
func TestRuleFromCard(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	alice := signIn(f, "alice")
	stage(t, cs, "team")
	card := func() api.InboxItem {
		var in api.Inbox
		alice.do(t, "GET", "/v1/inbox", nil, &in)
		for _, it := range in.Items {
			if it.Kind == "control_proposal" && it.Bound["control"] == "profile/plan" {
				return it
			}
		}
		t.Fatalf("no plan proposal in %+v", in)
		return api.InboxItem{}
	}
	// A rule goes with approve, and bounds are checked before anything is
	// decided.
	var o api.InboxOutcome
	until := time.Now().Add(24 * time.Hour)
	it := card()
	if c := alice.do(t, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision", api.InboxDecision{Decision: "decline", Rule: &api.RuleRequest{Until: until}}, &o); c != 400 {
		t.Errorf("decline with a rule: %d %+v", c, o)
	}
	if c := alice.do(t, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision", api.InboxDecision{Decision: "approve", Rule: &api.RuleRequest{}}, &o); c != 400 {
		t.Errorf("a rule without until: %d %+v", c, o)
	}
	o = api.InboxOutcome{}
	if c := alice.do(t, "POST", "/v1/inbox/"+url.PathEscape(card().ID)+"/decision", api.InboxDecision{Decision: "approve", Rule: &api.RuleRequest{Until: until}}, &o); c != 200 ||
		o.Status != "approved" || o.Rule == "" {
		t.Fatalf("approve with a rule: %d %+v", c, o)
	}
	var list api.RuleList
	alice.do(t, "GET", "/v1/rules", nil, &list)
	if len(list.Rules) != 1 || list.Rules[0].ID != o.Rule || list.Rules[0].AgentID != f.Boot.Agent.ID ||
		len(list.Rules[0].Values) != 1 || string(list.Rules[0].Values[0]) != `"team"` {
		t.Fatalf("the rule from the card: %+v", list)
	}
	// The agent proposes "pro", which waits and is approved by hand; its
	// next "team" goes through under the card's rule.
	stage(t, cs, "pro")
	if c := alice.do(t, "POST", "/v1/inbox/"+url.PathEscape(card().ID)+"/decision", api.InboxDecision{Decision: "approve"}, &o); c != 200 {
		t.Fatalf("approve pro: %d %+v", c, o)
	}
	if got := stage(t, cs, "team"); got.AppliedUnderRule != o.Rule && got.AppliedUnderRule != list.Rules[0].ID {
		t.Errorf("the card's rule did not let team through: %+v", got)
	}

	// The card's web form: "Always allow" with a number of days.
	stage(t, cs, "free")
	if page := assenttest.ReadAll(f.Get("/inbox", alice.cookie)); !strings.Contains(page, `name="rule_days"`) {
		t.Fatal("the card offers no standing rule")
	}
	resp := f.PostForm("/inbox/decide", url.Values{"csrf": {alice.csrf}, "id": {card().ID}, "decision": {"approve"}, "rule_days": {"7"}}, alice.cookie, f.URL())
	resp.Body.Close()
	list = api.RuleList{}
	alice.do(t, "GET", "/v1/rules", nil, &list)
	if resp.StatusCode != http.StatusSeeOther || len(list.Rules) != 2 || string(list.Rules[0].Values[0]) != `"free"` ||
		time.Until(list.Rules[0].Until) < 6*24*time.Hour {
		t.Errorf("the card's form: %d %+v", resp.StatusCode, list)
	}
}

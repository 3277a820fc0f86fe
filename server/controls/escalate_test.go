package controls_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// A value an agent stages with escalate_to is refused, and nothing staged,
// when the group has no members or no deadline is given; otherwise, at its
// first deadline it is routed to the group once (even with several sweeps
// at once), with as long again: the agent's supervisor may no longer
// decide it (403 not_routed), inbox_wait says it was escalated, and at the
// second deadline it is discarded. A member of the group may apply an
// escalated value.
func TestStagedValueEscalatesOnce(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	f := assenttest.StartDemo(t, func(cfg *server.Config) { cfg.Now = c.Now })
	_, ada := f.Issue(store.KindHuman, "ada", "state.write")
	_, carol := f.Issue(store.KindHuman, "carol", "state.write")
	if err := f.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "oncall", PrincipalID: carol.ID, AddedAt: c.Now()}); err != nil {
		t.Fatal(err)
	}
	token, _, err := f.Srv.AddAgent(context.Background(), "planner", f.Boot.Agent.Grants, ada.ID)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	staged := func() map[string]any {
		snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": plan})
		st, _ := snap["state"].(map[string]any)["staged"].(map[string]any)
		return st
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		code string
	}{
		{"group without members", map[string]any{"deadline_seconds": 30, "escalate_to": "nobody"}, "invalid_value"},
		{"no deadline", map[string]any{"escalate_to": "oncall"}, "invalid_request"},
		{"not with apply", map[string]any{"action": "apply", "escalate_to": "oncall"}, "invalid_request"},
	} {
		args := map[string]any{"action": "stage", "identity": plan, "value": "pro"}
		for k, v := range tc.args {
			args[k] = v
		}
		out, isErr := assenttest.CallTool(t, cs, "controls_execute", args)
		if b, _ := json.Marshal(out); !isErr || !strings.Contains(string(b), tc.code) {
			t.Errorf("%s: %s, want %s", tc.name, b, tc.code)
		}
		if st := staged(); st != nil {
			t.Fatalf("%s: a refused stage staged %v", tc.name, st)
		}
	}

	stage := func(value string) string {
		out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": value, "deadline_seconds": 30, "escalate_to": "oncall"})
		if isErr || out["ok"] != true {
			t.Fatalf("stage: %v", out)
		}
		return itoa(int64(out["snapshot"].(map[string]any)["state"].(map[string]any)["staged"].(map[string]any)["revision"].(float64)))
	}
	sweep := func() {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := f.Srv.Controls().ExpireDue(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	rev := stage("pro")
	c.Add(30 * time.Second)
	sweep()
	if st := staged(); st == nil {
		t.Fatal("the value was discarded at its first deadline instead of escalated")
	}
	item := "profile/plan@" + rev
	if d, err := f.DB.Deadlines().Deadline(t.Context(), store.DeadlineControlProposal, item); err != nil || !d.Escalated() || !d.Due.Equal(c.Now().Add(30*time.Second)) {
		t.Fatalf("deadline after escalation = %+v %v", d, err)
	}
	recs, _ := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{})
	n := 0
	for _, r := range recs {
		if r.Action == "control.escalate" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d audit records of the escalation, want 1", n)
	}
	w, _ := assenttest.CallTool(t, cs, "inbox_wait", map[string]any{"items": []any{map[string]any{"proposal": plan}}, "timeout_ms": 0})
	if b, _ := json.Marshal(w); !strings.Contains(string(b), `"status":"pending"`) || !strings.Contains(string(b), "escalated to group oncall") {
		t.Fatalf("inbox_wait after escalation: %s", b)
	}
	form := func(csrf, rev string) url.Values {
		return url.Values{"csrf": {csrf}, "formId": {"profile"}, "controlId": {"plan"}, "revision": {rev}}
	}
	adaCookie, adaCSRF := f.SignInAs(ada.ID)
	resp := f.PostForm("/web/controls/apply", form(adaCSRF, rev), adaCookie, f.HTTP.URL)
	if body := assenttest.ReadAll(resp); resp.StatusCode != 403 || !strings.Contains(body, "not_routed") || !strings.Contains(body, "oncall") {
		t.Fatalf("the supervisor's apply after escalation: %d %s, want 403 not_routed naming oncall", resp.StatusCode, body)
	}
	c.Add(30 * time.Second)
	sweep()
	if st := staged(); st != nil {
		t.Fatalf("after the second deadline the value is still staged: %v", st)
	}
	if n := deadlineDiscards(t, f); n != 1 {
		t.Fatalf("%d discards by the deadline, want 1", n)
	}
	if _, err := f.DB.Deadlines().Deadline(t.Context(), store.DeadlineControlProposal, item); err == nil {
		t.Error("the deadline is still kept after the discard")
	}

	rev = stage("team")
	c.Add(30 * time.Second)
	sweep()
	carolCookie, carolCSRF := f.SignInAs(carol.ID)
	resp = f.PostForm("/web/controls/apply", form(carolCSRF, rev), carolCookie, f.HTTP.URL)
	if resp.StatusCode != 303 || strings.Contains(resp.Header.Get("Location"), "notice") {
		t.Fatalf("carol's apply: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if snap, _ := f.Srv.Controls().Registry().Get(t.Context(), controlID("profile", "plan")); snap.State.Value != "team" {
		t.Fatalf("after carol's apply the value is %v", snap.State.Value)
	}
}

// A staged value's escalation is kept in the store: one whose first
// deadline passed while no server ran is escalated by the next process
// (with the server's default deadline and escalate_to, and over HTTP), and
// one past its second is discarded by the process after.
func TestStagedValueEscalationSurvivesRestart(t *testing.T) {
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	withDefault := func(cfg *server.Config) {
		cfg.Now = c.Now
		cfg.DecisionDeadlines = map[string]time.Duration{server.DeadlineProposal: time.Hour}
	}
	f := assenttest.StartDemo(t, withDefault)
	_, carol := f.Issue(store.KindHuman, "carol", "state.write")
	if err := f.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "oncall", PrincipalID: carol.ID, AddedAt: c.Now()}); err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	code, out, raw := f.API("POST", "/v1/controls/execute", f.Token, map[string]any{"action": "stage", "identity": plan, "value": "team", "escalate_to": "oncall"})
	if code != 200 || out["deadline"] != store.FormatTime(c.Now().Add(time.Hour)) {
		t.Fatalf("stage: %d %s", code, raw)
	}
	rev := int64(out["snapshot"].(map[string]any)["state"].(map[string]any)["staged"].(map[string]any)["revision"].(float64))
	item := "profile/plan@" + itoa(rev)
	c.Add(2 * time.Hour)
	g := f.Restart(withDefault)
	testwait.Eventually(t, 10*time.Second, func() bool {
		d, err := g.DB.Deadlines().Deadline(t.Context(), store.DeadlineControlProposal, item)
		return err == nil && d.Escalated()
	}, "the restarted server escalates the value past its first deadline")
	if snap, ok := g.Srv.Controls().Registry().Get(t.Context(), controlID("profile", "plan")); !ok || snap.State.Staged == nil {
		t.Fatalf("after the escalation the value is no longer staged: %+v", snap.State)
	}
	c.Add(2 * time.Hour)
	h := g.Restart(withDefault)
	testwait.Eventually(t, 10*time.Second, func() bool { return deadlineDiscards(t, h) == 1 }, "the next server discards it past its second deadline")
}

package controls_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// The control buttons (/web/controls/apply and discard) refuse, 403
// not_routed, a person a staged value was not routed to, as the inbox
// does, and change nothing; the agent's supervisor applies it.
func TestControlButtonsFollowRouting(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, ada := f.Issue(store.KindHuman, "ada", "state.write")
	_, ben := f.Issue(store.KindHuman, "ben", "state.write")
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
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "pro"})
	if isErr || out["ok"] != true {
		t.Fatalf("stage: %v", out)
	}
	rev := itoa(int64(out["snapshot"].(map[string]any)["state"].(map[string]any)["staged"].(map[string]any)["revision"].(float64)))
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "formId": {"profile"}, "controlId": {"plan"}, "revision": {rev}}
	}
	benCookie, benCSRF := f.SignInAs(ben.ID)
	for _, action := range []string{"apply", "discard"} {
		resp := f.PostForm("/web/controls/"+action, form(benCSRF), benCookie, f.HTTP.URL)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		body := assenttest.ReadAll(resp)
		_ = json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != 403 || e.Error.Code != "not_routed" || !strings.Contains(e.Error.Message, "ada") {
			t.Fatalf("ben's %s: %d %s, want 403 not_routed naming ada", action, resp.StatusCode, body)
		}
	}
	snap, ok := f.Srv.Controls().Registry().Get(t.Context(), controlID("profile", "plan"))
	if !ok || snap.State.Staged == nil || snap.State.Value != "free" {
		t.Fatalf("after ben's refused buttons: %+v", snap.State)
	}
	adaCookie, adaCSRF := f.SignInAs(ada.ID)
	resp := f.PostForm("/web/controls/apply", form(adaCSRF), adaCookie, f.HTTP.URL)
	if resp.StatusCode != 303 || strings.Contains(resp.Header.Get("Location"), "notice") {
		t.Fatalf("ada's apply: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if snap, _ := f.Srv.Controls().Registry().Get(t.Context(), controlID("profile", "plan")); snap.State.Value != "pro" {
		t.Fatalf("after ada's apply the value is %v", snap.State.Value)
	}
}

// A person's apply or discard over POST /v1/controls/execute follows the
// routing the inbox and the buttons follow: refused to a person the
// agent's value was not routed to, taken from the one it was.
func TestControlExecuteFollowsRouting(t *testing.T) {
	f := assenttest.StartDemo(t)
	adaToken, ada := f.Issue(store.KindHuman, "ada", "state.write")
	benToken, _ := f.Issue(store.KindHuman, "ben", "state.write")
	token, _, err := f.Srv.AddAgent(context.Background(), "planner", f.Boot.Agent.Grants, ada.ID)
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	code, out, raw := f.API("POST", "/v1/controls/execute", token, map[string]any{"action": "stage", "identity": plan, "value": "pro"})
	if code != 200 || out["ok"] != true {
		t.Fatalf("the agent's stage: %d %s", code, raw)
	}
	for _, action := range []string{"apply", "discard"} {
		code, out, raw := f.API("POST", "/v1/controls/execute", benToken, map[string]any{"action": action, "identity": plan})
		e, _ := out["error"].(map[string]any)
		if code != 403 || e["code"] != "not_routed" || !strings.Contains(raw, "ada") {
			t.Fatalf("ben's %s: %d %s, want 403 not_routed naming ada", action, code, raw)
		}
	}
	if snap, _ := f.Srv.Controls().Registry().Get(t.Context(), controlID("profile", "plan")); snap.State.Staged == nil || snap.State.Value != "free" {
		t.Fatalf("after ben's refused commands: %+v", snap.State)
	}
	// ada passes routing; the demo's control then asks for a person's
	// confirmation on a page, which only the web UI gives.
	code, out, raw = f.API("POST", "/v1/controls/execute", adaToken, map[string]any{"action": "discard", "identity": plan})
	if e, _ := out["error"].(map[string]any); code != 403 || e["code"] != "consent_required" {
		t.Fatalf("ada's discard: %d %s, want 403 consent_required", code, raw)
	}
}

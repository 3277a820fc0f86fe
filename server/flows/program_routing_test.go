package flows_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// The program page's Approve and Decline refuse, 403 not_routed, a
// person a proposed program was not routed to, as the inbox does, and
// leave it proposed; the agent's supervisor approves it.
func TestProgramButtonsFollowRouting(t *testing.T) {
	f := assenttest.StartDemo(t)
	_, ada := f.Issue(store.KindHuman, "ada", "state.write")
	_, ben := f.Issue(store.KindHuman, "ben", "state.write")
	token, _, err := f.Srv.AddAgent(context.Background(), "planner", f.Boot.Agent.Grants, ada.ID)
	if err != nil {
		t.Fatal(err)
	}
	code, out, raw := f.API("POST", "/v1/flows/programs", token, []byte(sneakProgram))
	fp := assenttest.As[api.ProgramProposal](t, out).Program.Fingerprint
	if code != 202 || fp == "" {
		t.Fatalf("agent load: %d %s", code, raw)
	}
	benCookie, benCSRF := f.SignInAs(ben.ID)
	for _, decision := range []string{"approve", "decline"} {
		resp := f.PostForm("/web/flows/programs/"+fp+"/"+decision, url.Values{"csrf": {benCSRF}}, benCookie, f.HTTP.URL)
		body := assenttest.ReadAll(resp)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != 403 || e.Error.Code != "not_routed" || !strings.Contains(e.Error.Message, "ada") {
			t.Fatalf("ben's %s: %d %s, want 403 not_routed naming ada", decision, resp.StatusCode, body)
		}
	}
	if l, err := f.Srv.Flows().Kernel().ProgramLoad(t.Context(), fp); err != nil || l.Status != flow.ProgramProposed {
		t.Fatalf("after ben's refused buttons: %+v %v", l, err)
	}
	adaCookie, adaCSRF := f.SignInAs(ada.ID)
	if loc, page := f.Decide("/web/flows/programs/"+fp+"/approve", url.Values{"csrf": {adaCSRF}}, adaCookie); loc != "/flows" || !strings.Contains(page, "is now active") {
		t.Fatalf("ada's approve: %s\n%s", loc, page)
	}
}

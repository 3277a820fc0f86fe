package server_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// A decision goes to the supervisors of the agent that filed it: a person
// who can see the form but does not supervise the agent neither finds the
// card in their inbox nor may decide it, and the card tells its readers
// to whom it went.
func TestInboxRouting(t *testing.T) {
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
	benCookie, benCSRF := f.SignInAs(ben.ID)
	adaCookie, _ := f.SignInAs(ada.ID)
	ownerCookie, _ := f.SignInAs(f.Boot.Owner.ID)

	stage(t, cs, "pro")

	var owners api.Inbox
	if c := session(t, f, ownerCookie, "", "GET", "/v1/inbox", nil, &owners); c != 200 {
		t.Fatalf("owner's inbox: %d", c)
	}
	card, ok := byKind(owners, "control_proposal")
	if !ok || card.AskedOf != "Asked of: ada" {
		t.Fatalf("owner's card = %+v (found %v), want asked_of naming ada", card, ok)
	}
	var adas api.Inbox
	if c := session(t, f, adaCookie, "", "GET", "/v1/inbox", nil, &adas); c != 200 {
		t.Fatalf("ada's inbox: %d", c)
	}
	if _, ok := byKind(adas, "control_proposal"); !ok {
		t.Errorf("ada, the agent's supervisor, lacks its proposal: %+v", adas)
	}
	if page := assenttest.ReadAll(f.Get("/inbox", adaCookie)); !strings.Contains(page, "Asked of: ada") {
		t.Error("the inbox page does not say to whom the card went")
	}

	var bens api.Inbox
	if c := session(t, f, benCookie, "", "GET", "/v1/inbox", nil, &bens); c != 200 {
		t.Fatalf("ben's inbox: %d", c)
	}
	if _, ok := byKind(bens, "control_proposal"); ok {
		t.Errorf("ben, who does not supervise the agent, sees its proposal: %+v", bens)
	}
	if page := assenttest.ReadAll(f.Get("/inbox", benCookie)); strings.Contains(page, card.ID) {
		t.Error("the inbox page shows ben a card not routed to him")
	}
	// The badge counts what the inbox lists: ben's leaves out the card
	// routed to ada, ada's counts it.
	badge := regexp.MustCompile(`class="badge" aria-label="(\d+) open"`)
	for _, who := range []struct {
		name   string
		cookie *http.Cookie
		inbox  api.Inbox
	}{{"ben", benCookie, bens}, {"ada", adaCookie, adas}} {
		shown := "0" // no badge at all when nothing is open
		if m := badge.FindStringSubmatch(assenttest.ReadAll(f.Get("/inbox", who.cookie))); m != nil {
			shown = m[1]
		}
		if shown != strconv.Itoa(len(who.inbox.Items)) {
			t.Errorf("%s's badge = %s, want %d, the decisions their inbox lists", who.name, shown, len(who.inbox.Items))
		}
	}
	var e struct {
		Error wire.Error `json:"error"`
	}
	c := session(t, f, benCookie, benCSRF, "POST", "/v1/inbox/"+url.PathEscape(card.ID)+"/decision", api.InboxDecision{Decision: api.DecisionApprove}, &e)
	if c != 403 || e.Error.Code != wire.NotRouted || !strings.Contains(e.Error.Message, "ada") {
		t.Fatalf("ben's decision = %d %+v, want 403 not_routed", c, e)
	}
}

// The badge counts what each person's inbox lists when decisions are
// routed to two groups and to an agent's supervisor: a member of one
// group counts that group's questions only, the supervisor counts the
// command proposal and none of the groups' questions, and each badge
// equals the decisions the person's inbox lists.
func TestBadgeCountsRoutingToTwoGroups(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := t.Context()
	_, ben := f.Issue(store.KindHuman, "ben", "state.write")
	_, carol := f.Issue(store.KindHuman, "carol", "state.write")
	_, dave := f.Issue(store.KindHuman, "dave", "state.write")
	token, _, err := f.Srv.AddAgent(ctx, "clerk", f.Boot.Agent.Grants, ben.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []store.GroupMember{{Group: "finance", PrincipalID: carol.ID}, {Group: "ops", PrincipalID: dave.ID}} {
		m.AddedAt = time.Now()
		if err := f.DB.Groups().AddGroupMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := f.MCPSession(token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ask(t, cs, map[string]any{"question": "Pay invoice INV-1?", "group": "finance"})
	ask(t, cs, map[string]any{"question": "Pay invoice INV-2?", "group": "finance"})
	ask(t, cs, map[string]any{"question": "Restart the ingest job?", "group": "ops"})
	if code, v, _ := f.API("POST", "/v1/runs", token, map[string]any{"template": "echo hi", "run_id": "badge-groups"}); code != 202 || v["proposal"] == nil {
		t.Fatalf("command proposal: %d %v", code, v)
	}

	badge := regexp.MustCompile(`class="badge" aria-label="(\d+) open"`)
	for _, who := range []struct {
		name string
		id   string
		want int
	}{{"carol", carol.ID, 2}, {"dave", dave.ID, 1}, {"ben", ben.ID, 1}, {"the owner", f.Boot.Owner.ID, -1}} {
		cookie, _ := f.SignInAs(who.id)
		var in api.Inbox
		if c := session(t, f, cookie, "", "GET", "/v1/inbox", nil, &in); c != 200 {
			t.Fatalf("%s's inbox: %d", who.name, c)
		}
		shown := 0 // no badge at all when nothing is open
		if m := badge.FindStringSubmatch(assenttest.ReadAll(f.Get("/runs", cookie))); m != nil {
			shown, _ = strconv.Atoi(m[1])
		}
		if shown != len(in.Items) {
			t.Errorf("%s's badge = %d, inbox lists %d decisions: %+v", who.name, shown, len(in.Items), in.Items)
		}
		if who.want >= 0 && len(in.Items) != who.want {
			t.Errorf("%s's inbox lists %d decisions, want %d: %+v", who.name, len(in.Items), who.want, in.Items)
		}
	}
}

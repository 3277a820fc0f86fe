package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

// markerEvent is an event every subscriber receives.
var markerEvent = event.Event{Type: "test.marker"}

// team is two people, P and Q, each supervising one agent: A acts for P,
// B for Q. Both agents have shown a screen with a field, staged a value
// on it, and started a Flow instance.
type team struct {
	f          *assenttest.Kit
	pTok, qTok string
	p, q       store.Principal
	aTok, bTok string
	a, b       store.Principal
	// aScreen and bScreen are the agents' screens (and private forms).
	aScreen, bScreen string
}

// teamScreen is a screen with one text field, "note".
const teamScreen = "root = Card([title, note])\ntitle = Heading(\"Trip\")\n$note = \"\"\nnote = Input($note, label=\"Note\")\n"

func newTeam(t *testing.T) *team {
	t.Helper()
	f := assenttest.StartDemo(t)
	tm := &team{f: f}
	ctx := context.Background()
	var err error
	tm.pTok, tm.p = f.Issue(store.KindHuman, "pat")
	tm.qTok, tm.q = f.Issue(store.KindHuman, "quinn")
	grants := []string{"state.write", "tool.invoke"}
	if tm.aTok, tm.a, err = auth.IssueTokenFor(ctx, f.DB, store.KindAgent, "agent-a", grants, []string{tm.p.ID}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if tm.bTok, tm.b, err = auth.IssueTokenFor(ctx, f.DB, store.KindAgent, "agent-b", grants, []string{tm.q.ID}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tm.aScreen = tm.showScreen(tm.aTok)
	tm.bScreen = tm.showScreen(tm.bTok)
	for _, c := range []struct{ tok, screen, value, inst string }{
		{tm.aTok, tm.aScreen, "from-a", "trip-a"},
		{tm.bTok, tm.bScreen, "from-b", "trip-b"},
	} {
		body := map[string]any{"action": "stage", "identity": map[string]any{"formId": c.screen, "controlId": "note"}, "value": c.value}
		if code, _, raw := f.API("POST", "/v1/controls/execute", c.tok, body); code != http.StatusOK {
			t.Fatalf("stage %s: %d %s", c.value, code, raw)
		}
		start := map[string]any{"program": "expense-approval", "id": c.inst, "phase": "draft"}
		if code, _, raw := f.API("POST", "/v1/flows/instances", c.tok, start); code != http.StatusCreated {
			t.Fatalf("start %s: %d %s", c.inst, code, raw)
		}
	}
	return tm
}

func (tm *team) showScreen(tok string) string {
	tm.f.T.Helper()
	resp := tm.f.Req("POST", "/v1/screens", tok, strings.NewReader(teamScreen), nil)
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.ID == "" {
		tm.f.T.Fatalf("show screen: %d %v", resp.StatusCode, err)
	}
	return out.ID
}

// TestSupervisorSeesOnlyTheirAgentsItems checks every surface of the HTTP
// API and web UI: each person sees their own agent's screen, proposal,
// Flow instance and audit records, named, and none of the other agent's.
func TestSupervisorSeesOnlyTheirAgentsItems(t *testing.T) {
	tm := newTeam(t)
	f := tm.f
	type view struct {
		who        string
		tok        string
		id         string
		own, other string // agent names
		mine, not  struct{ screen, value, inst string }
	}
	var views []view
	pv := view{who: "P", tok: tm.pTok, id: tm.p.ID, own: "agent-a", other: "agent-b"}
	pv.mine.screen, pv.mine.value, pv.mine.inst = tm.aScreen, "from-a", "trip-a"
	pv.not.screen, pv.not.value, pv.not.inst = tm.bScreen, "from-b", "trip-b"
	qv := view{who: "Q", tok: tm.qTok, id: tm.q.ID, own: "agent-b", other: "agent-a"}
	qv.mine, qv.not = pv.not, pv.mine
	views = append(views, pv, qv)

	for _, v := range views {
		t.Run(v.who, func(t *testing.T) {
			// HTTP API.
			_, _, raw := f.API("GET", "/v1/screens", v.tok, nil)
			if !strings.Contains(raw, v.mine.screen) || strings.Contains(raw, v.not.screen) {
				t.Errorf("screen list: %s", raw)
			}
			if code, _, raw := f.API("GET", "/v1/screens/"+v.not.screen, v.tok, nil); code != http.StatusNotFound {
				t.Errorf("other agent's screen: %d %s", code, raw)
			}
			if code, _, raw := f.API("GET", "/v1/screens/"+v.mine.screen, v.tok, nil); code != http.StatusOK {
				t.Errorf("own agent's screen: %d %s", code, raw)
			}
			_, res, raw := f.API("GET", "/v1/flows/instances", v.tok, nil)
			if !strings.Contains(raw, `"`+v.mine.inst+`"`) || strings.Contains(raw, `"`+v.not.inst+`"`) {
				t.Errorf("instance list: %s", raw)
			}
			for _, it := range res["instances"].([]any) {
				m := it.(map[string]any)
				if m["instance_id"] == v.mine.inst && m["owner_name"] != v.own {
					t.Errorf("instance names its owner %v, want %s", m["owner_name"], v.own)
				}
			}
			if code, _, raw := f.API("GET", "/v1/flows/instances/"+v.not.inst, v.tok, nil); code != http.StatusNotFound {
				t.Errorf("other agent's instance: %d %s", code, raw)
			}
			if code, _, raw := f.API("GET", "/v1/flows/instances/"+v.mine.inst, v.tok, nil); code != http.StatusOK {
				t.Errorf("own agent's instance: %d %s", code, raw)
			}
			_, _, raw = f.API("GET", "/v1/controls?formId="+url.QueryEscape(v.not.screen), v.tok, nil)
			if strings.Contains(raw, v.not.value) {
				t.Errorf("other agent's controls: %s", raw)
			}
			_, _, raw = f.API("GET", "/v1/audit", v.tok, nil)
			if !strings.Contains(raw, v.mine.screen) || strings.Contains(raw, v.not.screen) || strings.Contains(raw, v.not.value) {
				t.Errorf("audit: %s", raw)
			}

			// Web UI.
			cookie, _ := f.SignInAs(v.id)
			for _, pg := range []struct{ path, want, not string }{
				{"/inbox", v.mine.value, v.not.value},
				{"/screens", v.mine.screen, v.not.screen},
				{"/flows", v.mine.inst, v.not.inst},
				{"/audit", v.mine.value, v.not.value},
			} {
				body := assenttest.ReadAll(f.Get(pg.path, cookie))
				if !strings.Contains(body, pg.want) || strings.Contains(body, pg.not) || !strings.Contains(body, v.own) || strings.Contains(body, v.other) {
					t.Errorf("%s: want %q and %q, not %q or %q:\n%s", pg.path, pg.want, v.own, pg.not, v.other, body)
				}
			}
			for _, path := range []string{"/screens/" + v.not.screen, "/flows/instances/" + v.not.inst} {
				if resp := f.Get(path, cookie); resp.StatusCode != http.StatusNotFound {
					t.Errorf("%s: %d", path, resp.StatusCode)
				}
			}
			if resp := f.Get("/flows/instances/"+v.mine.inst, cookie); resp.StatusCode != http.StatusOK {
				t.Errorf("own agent's instance page: %d", resp.StatusCode)
			}
		})
	}
}

// TestAgentsStayIsolated: an agent reaches none of another agent's items,
// whoever supervises them, and gets the answer for a missing one.
func TestAgentsStayIsolated(t *testing.T) {
	tm := newTeam(t)
	f := tm.f
	for _, tc := range []struct {
		name, path, missing string
	}{
		{"screen", "/v1/screens/" + tm.bScreen, "/v1/screens/scr_00000000000000000000000000000000"},
		{"instance", "/v1/flows/instances/trip-b", "/v1/flows/instances/trip-zz"},
		{"control", "/v1/controls/" + tm.bScreen + "/note", "/v1/controls/scr_00000000000000000000000000000000/note"},
	} {
		c1, _, raw1 := f.API("GET", tc.path, tm.aTok, nil)
		c2, _, _ := f.API("GET", tc.missing, tm.aTok, nil)
		if c1 != http.StatusNotFound || c1 != c2 {
			t.Errorf("%s: %d %s; missing: %d", tc.name, c1, raw1, c2)
		}
	}
	for _, path := range []string{"/v1/screens", "/v1/flows/instances", "/v1/audit", "/v1/controls"} {
		_, _, raw := f.API("GET", path, tm.aTok, nil)
		if strings.Contains(raw, tm.bScreen) || strings.Contains(raw, "trip-b") || strings.Contains(raw, "from-b") {
			t.Errorf("%s shows agent B's items: %s", path, raw)
		}
	}
	// Nor can it act on them: a stage on B's field is not_found.
	body := map[string]any{"action": "stage", "identity": map[string]any{"formId": tm.bScreen, "controlId": "note"}, "value": "hijack"}
	if code, res, raw := f.API("POST", "/v1/controls/execute", tm.aTok, body); code != http.StatusNotFound || res["reason"] != "not_found" {
		t.Errorf("stage on B's field: %d %s", code, raw)
	}
}

// TestAuditRecordsOutliveThePrivateForm: once a screen is gone, its
// form's records stay readable by its owner's supervisors only.
func TestAuditRecordsOutliveThePrivateForm(t *testing.T) {
	tm := newTeam(t)
	f := tm.f
	if code, _, raw := f.API("DELETE", "/v1/screens/"+tm.bScreen, tm.bTok, nil); code >= 300 {
		t.Fatalf("close B's screen: %d %s", code, raw)
	}
	for _, tc := range []struct {
		who  string
		tok  string
		want bool
	}{{"Q", tm.qTok, true}, {"B", tm.bTok, true}, {"P", tm.pTok, false}, {"A", tm.aTok, false}} {
		_, _, raw := f.API("GET", "/v1/audit", tc.tok, nil)
		if got := strings.Contains(raw, tm.bScreen); got != tc.want {
			t.Errorf("%s sees B's records after the screen closed: %v, want %v: %s", tc.who, got, tc.want, raw)
		}
	}
}

// TestAuditPageShowsUndoAndHidesSecrets: a person's apply and undo each
// leave a row, newest first; a secret value never appears; the filters
// narrow the list.
func TestAuditPageShowsUndoAndHidesSecrets(t *testing.T) {
	f := assenttest.StartDemo(t)
	cookie, csrf := f.SignIn()
	stage := func(id string, v any) {
		body := map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": id}, "value": v}
		f.API("POST", "/v1/controls/execute", f.Token, body)
	}
	stage("plan", "team")
	stage("apiKey", "sk-live-should-never-show")
	web := func(action string, form url.Values) {
		form.Set("csrf", csrf)
		if resp := f.PostForm("/web/controls/"+action, form, cookie, f.HTTP.URL); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d", action, resp.StatusCode)
		}
	}
	web("apply", url.Values{"formId": {"profile"}, "controlId": {"plan"}})
	web("undo", url.Values{"formId": {"profile"}, "controlId": {"plan"}})

	page := assenttest.ReadAll(f.Get("/audit", cookie))
	if strings.Contains(page, "sk-live") {
		t.Fatal("the audit page shows a secret value")
	}
	undo := strings.Index(page, `data-command="undo"`)
	apply := strings.Index(page, `data-command="apply"`)
	stg := strings.Index(page, `data-command="stage"`)
	if undo < 0 || apply < 0 || stg < 0 || !(undo < apply && apply < stg) {
		t.Fatalf("want undo, apply, stage rows newest first (at %d, %d, %d):\n%s", undo, apply, stg, page)
	}
	if !strings.Contains(page, `<time datetime="`) || !strings.Contains(page, `href="/audit"`) {
		t.Fatalf("audit page lacks times or the nav link:\n%s", page)
	}
	for _, tc := range []struct {
		query      string
		want, not  string
		wantStatus int
	}{
		{"?who=" + f.Boot.Owner.ID, `data-command="undo"`, `data-command="stage"`, http.StatusOK},
		{"?who=" + f.Boot.Agent.ID, `data-command="stage"`, `data-command="undo"`, http.StatusOK},
		{"?form=nothing-here", `id="audit-empty"`, `data-command=`, http.StatusOK},
	} {
		resp := f.Get("/audit"+tc.query, cookie)
		body := assenttest.ReadAll(resp)
		if resp.StatusCode != tc.wantStatus || !strings.Contains(body, tc.want) || strings.Contains(body, tc.not) {
			t.Errorf("/audit%s: %d, want %q and not %q", tc.query, resp.StatusCode, tc.want, tc.not)
		}
	}
}

// TestEventsReachOnlyOwnerAndSupervisors subscribes each person and each
// agent to the event stream and checks who receives what agent A's screen
// and proposal publish.
func TestEventsReachOnlyOwnerAndSupervisors(t *testing.T) {
	tm := newTeam(t)
	f := tm.f
	streams := map[string]*assenttest.SSE{}
	for who, tok := range map[string]string{"P": tm.pTok, "Q": tm.qTok, "A": tm.aTok, "B": tm.bTok} {
		resp := f.Req("GET", "/v1/events", tok, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("events for %s: %d", who, resp.StatusCode)
		}
		streams[who] = assenttest.NewSSE(resp)
	}
	// A's screen changes and A stages again; then a public marker event
	// that everyone receives ends each reader's wait.
	body := map[string]any{"action": "stage", "identity": map[string]any{"formId": tm.aScreen, "controlId": "note"}, "value": "again"}
	f.API("POST", "/v1/controls/execute", tm.aTok, body)
	f.Srv.Events().Publish(markerEvent)
	for who, want := range map[string]bool{"P": true, "Q": false, "A": true, "B": false} {
		got := false
		for {
			e := streams[who].Next(t)
			if e.Type == markerEvent.Type {
				break
			}
			if strings.Contains(e.Data, tm.aScreen) {
				got = true
			}
		}
		if got != want {
			t.Errorf("%s received A's events: %v, want %v", who, got, want)
		}
	}
}

// BenchmarkOversees measures the check every listing makes per item once
// the owner's supervisors are cached.
func BenchmarkOversees(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	b.ReportAllocs()
	for b.Loop() {
		if !srv.Oversees(ctx, boot.Owner, boot.Agent.ID) {
			b.Fatal("the owner does not oversee the first agent")
		}
	}
}

package controls_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// restart stops f's server and starts another on its store and data
// directory, as a new process would after the first one died; a Kit that
// StartDemo started installs the demo on the new server too.
func restart(t *testing.T, f *assenttest.Kit) (*server.Server, *httptest.Server) {
	t.Helper()
	next := f.Restart(nil)
	return next.Srv, next.HTTP
}

// postForm sends a person's web form to hs.
func postForm(t *testing.T, hs *httptest.Server, path string, v url.Values, cookie *http.Cookie, csrf string) *http.Response {
	t.Helper()
	v.Set("csrf", csrf)
	req, err := http.NewRequest("POST", hs.URL+path, strings.NewReader(v.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", hs.URL)
	req.Header.Set("Accept", "application/json")
	req.AddCookie(cookie)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestControlsSurviveRestart: proposals (with their revisions and
// provenance), undo histories, hosted forms and their values are where they
// were after a restart on the same store, and a person decides each.
func TestControlsSurviveRestart(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := context.Background()
	svc, _ := f.Issue(store.KindService, "billing-app")

	// A service hosts a form and records a person's edit made in the app.
	if code, _, raw := f.API("POST", "/v1/forms/billing/controls", svc, map[string]any{"controls": []map[string]any{
		{"controlId": "limit", "metadata": map[string]any{"kind": "number", "label": "Limit"}, "value": 10},
		{"controlId": "note", "metadata": map[string]any{"kind": "text", "label": "Note"}, "value": "none"},
	}}); code != http.StatusOK {
		t.Fatalf("declare: %d %s", code, raw)
	}
	if code, _, raw := f.API("PUT", "/v1/forms/billing/controls/limit/value", svc, map[string]any{"value": 42}); code != http.StatusOK {
		t.Fatalf("set value: %d %s", code, raw)
	}
	// The agent proposes; the person applies one proposal, so it can be
	// undone.
	stage := func(form, ctl string, v any) int64 {
		t.Helper()
		code, out, raw := f.API("POST", "/v1/controls/execute", f.Token, map[string]any{"action": "stage",
			"identity": map[string]any{"formId": form, "controlId": ctl}, "value": v})
		if code != http.StatusOK {
			t.Fatalf("stage %s/%s: %d %s", form, ctl, code, raw)
		}
		staged := assenttest.As[control.Result](t, out).Snapshot.State.Staged
		if staged == nil {
			t.Fatalf("stage %s/%s staged nothing: %s", form, ctl, raw)
		}
		return staged.Revision
	}
	planRev := stage("profile", "plan", "team")
	noteRev := stage("billing", "note", "net 30")
	stage("profile", "displayName", "Ada King")
	cookie, csrf := f.SignIn()
	if _, page := f.Decide("/web/controls/apply", url.Values{"csrf": {csrf}, "formId": {"profile"}, "controlId": {"displayName"}}, cookie); page == "" {
		t.Fatal("no page after apply")
	}

	srv, hs := restart(t, f)
	reg := srv.Controls().Registry()
	get := func(form, ctl string) control.Snapshot {
		t.Helper()
		snap, ok := reg.Get(ctx, control.Identity{FormID: form, ControlID: ctl})
		if !ok {
			t.Fatalf("%s/%s is gone after the restart", form, ctl)
		}
		return snap
	}
	tests := []struct {
		form, ctl string
		value     any
		staged    any
		revision  int64
	}{
		{"profile", "plan", "free", "team", planRev},
		{"profile", "displayName", "Ada King", nil, 0},
		{"billing", "limit", float64(42), nil, 0},
		{"billing", "note", "none", "net 30", noteRev},
	}
	for _, tc := range tests {
		st := get(tc.form, tc.ctl).State
		if st.Value != tc.value {
			t.Errorf("%s/%s value = %v, want %v", tc.form, tc.ctl, st.Value, tc.value)
		}
		if tc.staged == nil {
			if st.Staged != nil {
				t.Errorf("%s/%s has a proposal %v", tc.form, tc.ctl, st.StagedValue)
			}
			continue
		}
		if st.Staged == nil || st.StagedValue != tc.staged || st.Staged.Revision != tc.revision || st.Staged.Provenance.PrincipalID != f.Boot.Agent.ID {
			t.Errorf("%s/%s proposal = %+v (%v), want %v at revision %d by the agent", tc.form, tc.ctl, st.Staged, st.StagedValue, tc.staged, tc.revision)
		}
	}
	if n := len(srv.Controls().VisibleProposals(ctx, f.Boot.Owner)); n != 2 {
		t.Errorf("%d proposals in the inbox after the restart, want 2", n)
	}

	// The person decides on the new server: apply, undo; the owner of the
	// hosted form still edits its values.
	resp := postForm(t, hs, "/web/controls/apply", url.Values{"formId": {"profile"}, "controlId": {"plan"}, "revision": {strconv.FormatInt(planRev, 10)}}, cookie, csrf)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("apply after restart: %d %s", resp.StatusCode, assenttest.ReadAll(resp))
	}
	resp.Body.Close()
	resp = postForm(t, hs, "/web/controls/undo", url.Values{"formId": {"profile"}, "controlId": {"displayName"}}, cookie, csrf)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("undo after restart: %d %s", resp.StatusCode, assenttest.ReadAll(resp))
	}
	resp.Body.Close()
	if v := get("profile", "plan").State.Value; v != "team" {
		t.Errorf("plan after apply = %v", v)
	}
	if v := get("profile", "displayName").State.Value; v != "Ada Lovelace" {
		t.Errorf("displayName after undo = %v", v)
	}
	// Revisions are never handed out twice.
	res := srv.Controls().Exec(ctx, f.Boot.Agent, control.Command{Action: control.Stage, Identity: control.Identity{FormID: "profile", ControlID: "email"}, Value: "ada@example.org"},
		control.CommandContext{Source: control.SourceAgent})
	if !res.OK || res.Snapshot.State.Staged.Revision <= noteRev {
		t.Errorf("stage after restart: %+v", res)
	}
}

// flakyStore is a store whose control registry refuses every write while
// failing is set.
type flakyStore struct {
	store.Store
	failing *atomic.Bool
}

func (s flakyStore) ControlRegistry() store.Controls {
	return flakyControls{s.Store.ControlRegistry(), s.failing}
}

type flakyControls struct {
	store.Controls
	failing *atomic.Bool
}

var errDown = errors.New("the database is down")

func (c flakyControls) SaveControl(ctx context.Context, u control.Update) error {
	if c.failing.Load() {
		return errDown
	}
	return c.Controls.SaveControl(ctx, u)
}

func (c flakyControls) SaveControlAudited(ctx context.Context, u control.Update, rec store.AuditRecord, dl *store.DecisionDeadline) (int64, error) {
	if c.failing.Load() {
		return 0, errDown
	}
	return c.Controls.SaveControlAudited(ctx, u, rec, dl)
}

func (c flakyControls) SaveForm(ctx context.Context, f control.SavedForm) error {
	if c.failing.Load() {
		return errDown
	}
	return c.Controls.SaveForm(ctx, f)
}

// TestStoreUnavailableReachesTheCaller: a change the store refuses is not
// made, and the caller gets 503 store_unavailable, retryable.
func TestStoreUnavailableReachesTheCaller(t *testing.T) {
	var failing atomic.Bool
	f := assenttest.StartDemo(t, func(c *server.Config) { c.Store = flakyStore{c.Store, &failing} })
	svc, _ := f.Issue(store.KindService, "billing-app")
	failing.Store(true)
	tests := []struct {
		name, method, path, token string
		body                      any
	}{
		{"stage", "POST", "/v1/controls/execute", f.Token, map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "pro"}},
		{"declare", "POST", "/v1/forms/billing/controls", svc, map[string]any{"controls": []map[string]any{{"controlId": "limit", "metadata": map[string]any{"kind": "number"}, "value": 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, raw := f.API(tc.method, tc.path, tc.token, tc.body)
			if code != http.StatusServiceUnavailable || !isStoreUnavailable(t, out) {
				t.Fatalf("%s while the store is down: %d %s", tc.name, code, raw)
			}
		})
	}
	snap, _ := f.Srv.Controls().Registry().Get(context.Background(), control.Identity{FormID: "profile", ControlID: "plan"})
	if snap.State.Staged != nil {
		t.Error("a refused stage left a proposal")
	}
	failing.Store(false)
	if code, _, raw := f.API("POST", "/v1/controls/execute", f.Token, tests[0].body); code != http.StatusOK {
		t.Fatalf("stage once the store is back: %d %s", code, raw)
	}
}

// isStoreUnavailable reports whether an answer is the retryable
// store_unavailable error.
func isStoreUnavailable(t *testing.T, out map[string]any) bool {
	t.Helper()
	e := assenttest.As[wire.Body](t, out).Error
	return e != nil && e.Code == wire.StoreUnavailable && e.Retryable
}

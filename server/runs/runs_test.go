package runs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/run/service"
	"github.com/assent-run/assent/store"
)

// serviceEnv waits for the env file a Run wrote and returns its ASSENT_*
// values.
func serviceEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	var b []byte
	testwait.Eventually(t, 10*time.Second, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && bytes.Contains(b, []byte("ASSENT_RUN_TOKEN="))
	}, "the Run writing its environment")
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "ASSENT_") {
			env[k] = v
		}
	}
	return env
}

func TestRunsAPIEndToEnd(t *testing.T) {
	f := newRunsFixture(t)
	recipe := `{"description":"test service","template":"env > env.txt; exec sleep 300","control":["pause","resume"]}`
	if err := os.WriteFile(filepath.Join(f.Dir, "recipes", "svc.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	var spawned map[string]any
	if code := f.Do("POST", "/v1/runs", f.Token, map[string]any{"recipe": "svc", "run_id": "svc"}, &spawned); code != http.StatusCreated {
		t.Fatalf("spawn: %d %v", code, spawned)
	}
	defer func() {
		var res map[string]any
		f.Do("POST", "/v1/runs/svc/kill", f.Token, nil, &res)
	}()
	env := serviceEnv(t, filepath.Join(f.Dir, "runs", "svc", "env.txt"))
	if env["ASSENT_URL"] != f.URL() || env["ASSENT_RUN_ID"] != "svc" || env["ASSENT_RUN_INSTANCE_ID"] != spawned["run_instance_id"] || env["ASSENT_CONTROL_FIFO"] == "" {
		t.Fatalf("service environment %v", env)
	}
	svc := &service.Service{URL: env["ASSENT_URL"], Token: env["ASSENT_RUN_TOKEN"], RunID: "svc", InstanceID: env["ASSENT_RUN_INSTANCE_ID"], FIFO: env["ASSENT_CONTROL_FIFO"], HTTP: http.DefaultClient}
	ctx, cancel := context.WithCancel(context.Background())
	handled := make(chan string, 4)
	served := make(chan error, 1)
	go func() {
		served <- svc.Serve(ctx, func(ctx context.Context, c service.Control) error {
			handled <- c.Action
			return svc.Emit(ctx, service.Event{Kind: "player.state", Summary: c.Action})
		})
	}()
	defer func() {
		cancel()
		<-served
	}()

	// The owner applies a Control; the service claims it by id and settles it.
	var res map[string]any
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		code := f.Do("POST", "/v1/runs/svc/controls", f.Token, map[string]any{"action": "pause", "input": map[string]any{"reason": "operator"}}, &res)
		if code == http.StatusOK {
			return
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("apply: %d %v", code, res)
		}
		c.Errorf("apply: %d %v", code, res)
	}, "the Control applied")
	if got := <-handled; got != "pause" {
		t.Fatalf("handled %s", got)
	}
	var view map[string]any
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		f.Do("GET", "/v1/runs/svc/views/control", f.Token, nil, &view)
		recent, _ := view["recent_controls"].([]any)
		if len(recent) == 0 || recent[0].(map[string]any)["status"] != store.ControlHandled {
			c.Errorf("control view %v", view)
		}
	}, "the Control handled")
	var trace map[string]any
	f.Do("GET", "/v1/runs/svc/views/trace", f.Token, nil, &trace)
	if !strings.Contains(runsJSON(trace), "player.state") {
		t.Fatalf("service trace missing: %v", trace)
	}

	// The run-scoped token acts only on its own Run, and cannot steer.
	runTok := env["ASSENT_RUN_TOKEN"]
	var e map[string]any
	if code := f.Do("POST", "/v1/runs", runTok, map[string]any{"template": "true"}, &e); code != http.StatusForbidden {
		t.Fatalf("run token spawn: %d", code)
	}
	if code := f.Do("POST", "/v1/runs/svc/controls", runTok, map[string]any{"action": "pause"}, &e); code != http.StatusForbidden {
		t.Fatalf("run token apply: %d", code)
	}
	if code := f.Do("POST", "/v1/runs/svc/kill", runTok, nil, &e); code != http.StatusForbidden {
		t.Fatalf("run token kill: %d", code)
	}

	// Anyone else gets exactly what a missing Run gets.
	other, _, err := auth.IssueToken(context.Background(), f.DB, store.KindAgent, "other", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var foreign, missing map[string]any
	c1 := f.Do("GET", "/v1/runs/svc", other, nil, &foreign)
	c2 := f.Do("GET", "/v1/runs/nope", other, nil, &missing)
	if c1 != http.StatusNotFound || c2 != http.StatusNotFound ||
		strings.ReplaceAll(runsJSON(foreign), "svc", "X") != strings.ReplaceAll(runsJSON(missing), "nope", "X") {
		t.Fatalf("foreign %d %v, missing %d %v", c1, foreign, c2, missing)
	}

	// Kill reaches the Run; a second kill is a soft refusal.
	if code := f.Do("POST", "/v1/runs/svc/kill", f.Token, nil, &res); code != http.StatusOK || res["killed"] != true {
		t.Fatalf("kill: %d %v", code, res)
	}
}

func runsJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRunsToolsRegistered(t *testing.T) {
	f := newFixture(t, nil)
	for _, name := range []string{"actors_run_spawn", "actors_inspect", "actors_control_apply", "actors_tool_register", "spawn", "inspect", "message", "register_tool"} {
		tl, ok := f.Srv.Tools().Lookup(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if legacy := !strings.HasPrefix(name, "actors_"); tl.Hidden != legacy {
			t.Errorf("%s hidden=%v", name, tl.Hidden)
		}
	}
}

func TestRunsOverMCP(t *testing.T) {
	f := &fixture{assenttest.StartDemo(t)}
	// An agent trusted to run its own commands (command.execute): without
	// the grant an inline template waits for a person's approval.
	builder, _, err := auth.IssueToken(context.Background(), f.DB, store.KindAgent, "builder", []string{"command.execute"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(builder, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tl := range list.Tools {
		listed[tl.Name] = true
		if tl.Name == "actors_inspect" && (tl.Annotations == nil || !tl.Annotations.ReadOnlyHint) {
			t.Errorf("actors_inspect annotations %+v", tl.Annotations)
		}
	}
	for _, name := range []string{"actors_run_spawn", "actors_inspect", "actors_control_apply", "actors_tool_register"} {
		if !listed[name] {
			t.Errorf("%s not listed over MCP", name)
		}
	}
	for _, legacy := range []string{"spawn", "inspect", "message", "register_tool"} {
		if listed[legacy] {
			t.Errorf("legacy %s listed over MCP", legacy)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "spawn", Arguments: map[string]any{"template": "echo via-mcp", "as": "run:m1"}})
	if err != nil || res.IsError {
		t.Fatalf("legacy spawn: %v %+v", err, res)
	}
	// The Run outlives a server that stops supervising it, so let it finish
	// before the test's data directory is removed.
	testwait.EventuallyC(t, 15*time.Second, func(c *testwait.C) {
		st, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "actors_inspect", Arguments: map[string]any{"target": "run:m1", "view": "status"}})
		if err != nil || st.IsError || strings.Contains(runsJSON(st.StructuredContent), `"running"`) {
			c.Errorf("%v %s", err, runsJSON(st))
		}
	}, "run m1 finishing")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "actors_inspect", Arguments: map[string]any{"target": "recipes", "view": "summary"}})
	if err != nil || res.IsError || !strings.Contains(runsJSON(res.StructuredContent), "demo-player") {
		t.Fatalf("recipes summary: %v %s", err, runsJSON(res))
	}
	// A refusal carries its code.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "actors_control_apply", Arguments: map[string]any{"target": "run:nope", "action": "pause"}})
	if err != nil || !res.IsError || !strings.Contains(runsJSON(res), "not_found") {
		t.Fatalf("control on a missing run: %v %s", err, runsJSON(res))
	}
}

func TestRunsWebPages(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cookie, csrf := f.SignIn()
	if _, err := f.Srv.Runs().Manager().Spawn(ctx, f.Boot.Owner.ID, run.SpawnRequest{Template: json.RawMessage(`"echo started; exec sleep 300"`), RunID: "web1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Srv.Runs().Manager().Spawn(ctx, f.Boot.Agent.ID, run.SpawnRequest{Template: json.RawMessage(`"true"`), RunID: "agents"}); err != nil {
		t.Fatal(err)
	}
	body := func(resp *http.Response) string {
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// The person sees their own Runs and those their agents started, with
	// who started each.
	list := body(f.Get("/runs", cookie))
	if !strings.Contains(list, `href="/runs/web1"`) || !strings.Contains(list, `href="/runs/agents"`) || !strings.Contains(list, "started by agent") {
		t.Fatalf("runs page: %s", list)
	}
	if resp := f.Get("/runs/agents", cookie); resp.StatusCode != http.StatusOK {
		t.Fatalf("the agent's run on the person's page: %d", resp.StatusCode)
	}
	if resp := f.Get("/runs/nosuch", cookie); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown run: %d", resp.StatusCode)
	}
	page := body(f.Get("/runs/web1?confirm=kill", cookie))
	if !strings.Contains(page, "Kill this Run?") || !strings.Contains(page, `id="run-status">running`) {
		t.Fatalf("run page: %s", page)
	}
	// The kill needs the page's own form: Origin and CSRF.
	if resp := f.PostForm("/runs/web1/kill", url.Values{}, cookie, f.HTTP.URL); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("kill without CSRF: %d", resp.StatusCode)
	}
	if resp := f.PostForm("/runs/web1/kill", url.Values{"csrf": {csrf}}, cookie, f.HTTP.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("kill: %d %s", resp.StatusCode, body(resp))
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		v, err := f.Srv.Runs().Manager().Status(ctx, f.Boot.Owner.ID, "web1")
		if err != nil || v.Status != run.StatusKilled || v.EndedAt == "" {
			c.Errorf("status after kill: %v %v", v, err)
		}
	}, "web1 killed")
	testwait.Eventually(t, 10*time.Second, func() bool {
		v, _ := f.Srv.Runs().Manager().Status(ctx, f.Boot.Agent.ID, "agents")
		return v != nil && v.EndedAt != ""
	}, "the agent's Run ended")
	if resp := f.PostForm("/runs/web1/prune", url.Values{"csrf": {csrf}}, cookie, f.HTTP.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("prune: %d", resp.StatusCode)
	}
	if resp := f.Get("/runs/web1", cookie); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("after prune: %d", resp.StatusCode)
	}
}

// A person oversees the Runs an agent starts: they are in the person's list
// (web and HTTP) and the person can steer and stop them. Another agent
// still cannot see them.
func TestPersonSeesAndStopsAgentsRun(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cookie, csrf := f.SignIn()
	personTok, auditor := f.Issue(store.KindHuman, "auditor")
	_, jobAgent, err := auth.IssueTokenFor(ctx, f.DB, store.KindAgent, "job-agent", nil, []string{f.Boot.Owner.ID, auditor.ID}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Srv.Runs().Manager().Spawn(ctx, jobAgent.ID, run.SpawnRequest{Template: json.RawMessage(`"exec sleep 300"`), RunID: "agent-job"}); err != nil {
		t.Fatal(err)
	}
	status, out, _ := f.API("GET", "/v1/runs", personTok, nil)
	if status != http.StatusOK || !strings.Contains(string(assenttest.MustJSON(out)), `"agent-job"`) {
		t.Fatalf("a person's GET /v1/runs = %d %v", status, out)
	}
	otherTok, _ := f.Issue(store.KindAgent, "other")
	status, out, _ = f.API("GET", "/v1/runs", otherTok, nil)
	if status != http.StatusOK || strings.Contains(string(assenttest.MustJSON(out)), "agent-job") {
		t.Fatalf("another agent's GET /v1/runs = %d %v", status, out)
	}
	if status, _, _ := f.API("GET", "/v1/runs/agent-job", otherTok, nil); status != http.StatusNotFound {
		t.Fatalf("another agent's GET /v1/runs/agent-job = %d, want 404", status)
	}
	if status, _, _ := f.API("GET", "/v1/runs/agent-job", personTok, nil); status != http.StatusOK {
		t.Fatalf("a person's GET /v1/runs/agent-job = %d, want 200", status)
	}
	if resp := f.PostForm("/runs/agent-job/kill", url.Values{"csrf": {csrf}}, cookie, f.HTTP.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("kill: %d", resp.StatusCode)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		v, err := f.Srv.Runs().Manager().Status(ctx, jobAgent.ID, "agent-job")
		if err != nil || v.Status != run.StatusKilled {
			c.Errorf("status after the person's kill: %v %v", v, err)
		}
	}, "agent-job killed")
}

// webBody reads a response body.
func webBody(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// writeRecipe writes <data>/recipes/<name>.json of the fixture's server.
func (f *fixture) writeRecipe(name, doc string) {
	f.T.Helper()
	if err := os.WriteFile(filepath.Join(f.Srv.Runs().Manager().DataDir(), "recipes", name+".json"), []byte(doc), 0o600); err != nil {
		f.T.Fatal(err)
	}
}

// waitRun waits until Run id (owned by owner) satisfies ok.
func (f *fixture) waitRun(owner, id string, ok func(*run.Run) bool) *run.Run {
	f.T.Helper()
	var v *run.Run
	testwait.EventuallyC(f.T, 10*time.Second, func(c *testwait.C) {
		var err error
		if v, err = f.Srv.Runs().Manager().Status(context.Background(), owner, id); err != nil || !ok(v) {
			c.Errorf("Run %s: %v %v", id, v, err)
		}
	}, "Run "+id)
	return v
}

// killAtEnd kills Run id when the test ends and waits for its process.
func (f *fixture) killAtEnd(owner, id string) {
	f.T.Cleanup(func() {
		f.Srv.Runs().Manager().Kill(context.Background(), owner, id)
		f.waitRun(owner, id, func(v *run.Run) bool { return v.EndedAt != "" })
	})
}

// The Runs list filters by status, by who started the Run, by Recipe and
// by a text in the id, and keeps the filter in its live-refresh address.
func TestRunsPageFilters(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cookie, _ := f.SignIn()
	_, other := f.Issue(store.KindAgent, "builder")
	f.writeRecipe("svc", `{"description":"a service","template":"exec sleep 300"}`)
	spawn := func(owner, id string, req run.SpawnRequest) {
		req.RunID = id
		if _, err := f.Srv.Runs().Manager().Spawn(ctx, owner, req); err != nil {
			t.Fatal(err)
		}
		f.killAtEnd(owner, id)
	}
	spawn(f.Boot.Agent.ID, "alpha-svc", run.SpawnRequest{Recipe: "svc"})
	spawn(other.ID, "alpha-other", run.SpawnRequest{Template: json.RawMessage(`"exec sleep 300"`)})
	spawn(f.Boot.Owner.ID, "beta-done", run.SpawnRequest{Template: json.RawMessage(`"true"`)})
	f.waitRun(f.Boot.Owner.ID, "beta-done", func(v *run.Run) bool { return v.Status == run.StatusDone })

	all := []string{"alpha-svc", "alpha-other", "beta-done"}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", all},
		{"status=running", []string{"alpha-svc", "alpha-other"}},
		{"status=active", []string{"alpha-svc", "alpha-other"}},
		{"status=done", []string{"beta-done"}},
		{"status=terminal", []string{"beta-done"}},
		{"status=bogus", all},
		{"agent=" + url.QueryEscape(f.Boot.Agent.ID), []string{"alpha-svc"}},
		{"agent=" + url.QueryEscape(other.ID), []string{"alpha-other"}},
		{"agent=nobody", nil},
		{"recipe=svc", []string{"alpha-svc"}},
		{"q=ALPHA", []string{"alpha-svc", "alpha-other"}},
		{"q=other&status=running", []string{"alpha-other"}},
		{"q=" + strings.Repeat("x", 5000), nil},
	} {
		for _, partial := range []string{"", "&partial=1"} {
			resp := f.Get("/runs?"+tc.query+partial, cookie)
			page := webBody(resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%q: %d", tc.query, resp.StatusCode)
			}
			for _, id := range all {
				want := false
				for _, w := range tc.want {
					want = want || w == id
				}
				if got := strings.Contains(page, `href="/runs/`+id+`"`); got != want {
					t.Errorf("/runs?%s%s lists %s: %v, want %v", tc.query, partial, id, got, want)
				}
			}
			if len(tc.want) == 0 && !strings.Contains(page, "No Runs match this filter") {
				t.Errorf("/runs?%s: no empty-filter message", tc.query)
			}
		}
	}
	// The filter form shows the choices, and the live refresh keeps the filter.
	page := webBody(f.Get("/runs?status=running&recipe=svc&q=alpha", cookie))
	for _, want := range []string{
		`data-refresh="/runs?partial=1&amp;q=alpha&amp;recipe=svc&amp;status=running"`,
		`<option value="running" selected>running</option>`,
		`<option value="svc" selected>svc</option>`,
		`>builder</option>`,
		`id="filter-q" value="alpha"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("filtered page lacks %s", want)
		}
	}
}

// A person presses a Recipe's Control on an agent's Run: the Control is
// admitted with the person as its sender, and the page says who sent it.
func TestRunPageControlButtons(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cookie, csrf := f.SignIn()
	// The service holds its FIFO open, so Controls are delivered.
	f.writeRecipe("steer", `{"template":"exec 3<>\"$ASSENT_CONTROL_FIFO\"; exec sleep 300","control":["pause","resume"]}`)
	if _, err := f.Srv.Runs().Manager().Spawn(ctx, f.Boot.Agent.ID, run.SpawnRequest{Recipe: "steer", RunID: "steered"}); err != nil {
		t.Fatal(err)
	}
	f.killAtEnd(f.Boot.Agent.ID, "steered")
	page := webBody(f.Get("/runs/steered", cookie))
	for _, want := range []string{`id="control-pause"`, `id="control-resume"`, `action="/runs/steered/control"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("run page lacks %s: %s", want, page)
		}
	}
	if resp := f.PostForm("/runs/steered/control", url.Values{"action": {"pause"}}, cookie, f.HTTP.URL); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("control without CSRF: %d", resp.StatusCode)
	}
	for _, tc := range []struct {
		action string
		status int
		code   string
	}{
		{"pause", http.StatusSeeOther, ""},
		{"explode", http.StatusBadRequest, run.CodeUndeclaredAction},
		{"kill", http.StatusBadRequest, run.CodeInvalidRequest},
		{"", http.StatusBadRequest, run.CodeInvalidRequest},
		{"resume", http.StatusSeeOther, ""},
	} {
		resp := f.PostForm("/runs/steered/control", url.Values{"csrf": {csrf}, "action": {tc.action}}, cookie, f.HTTP.URL)
		body := webBody(resp)
		if resp.StatusCode != tc.status {
			t.Fatalf("control %q: %d %s", tc.action, resp.StatusCode, body)
		}
		if tc.code != "" && !strings.Contains(body, `data-code="`+tc.code+`"`) {
			t.Fatalf("control %q: no %s notice: %s", tc.action, tc.code, body)
		}
	}
	// The agent sends one itself; it cannot claim to be someone else.
	if status, out, _ := f.API("POST", "/v1/runs/steered/controls", f.Token, map[string]any{"action": "pause", "sender_id": f.Boot.Owner.ID}); status != http.StatusBadRequest {
		t.Fatalf("an agent naming a sender: %d %v", status, out)
	}
	if status, out, _ := f.API("POST", "/v1/runs/steered/controls", f.Token, map[string]any{"action": "pause"}); status != http.StatusOK {
		t.Fatalf("the agent's pause: %d %v", status, out)
	}
	cv, err := f.Srv.Runs().Manager().Inspect(ctx, f.Boot.Agent.ID, run.InspectRequest{Target: "run:steered", View: "control"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cv.(*run.ControlView).RecentControls { // newest first
		got = append(got, c.Action+"/"+c.Status+"/"+c.SenderID)
	}
	want := []string{"pause/delivered/" + f.Boot.Agent.ID, "resume/delivered/" + f.Boot.Owner.ID, "pause/delivered/" + f.Boot.Owner.ID}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("journal %v, want %v", got, want)
	}
	if v := f.waitRun(f.Boot.Agent.ID, "steered", func(*run.Run) bool { return true }); v.Status != run.StatusRunning {
		t.Fatalf("a Control form killed the Run: %v", v)
	}
	page = webBody(f.Get("/runs/steered", cookie))
	for _, want := range []string{`<td class="sender" data-label="Sent by">` + f.Boot.Owner.Name + `</td>`, `<td class="sender" data-label="Sent by">` + f.Boot.Agent.Name + `</td>`} {
		if !strings.Contains(page, want) {
			t.Fatalf("control journal lacks %s: %s", want, page)
		}
	}
}

// The Run's status says paused when the newest pause or resume event of
// its Trace is a pause, whatever the service calls itself.
func TestRunPageShowsPaused(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cookie, _ := f.SignIn()
	v, err := f.Srv.Runs().Manager().Spawn(ctx, f.Boot.Agent.ID, run.SpawnRequest{Template: json.RawMessage(`"exec sleep 300"`), RunID: "player"})
	if err != nil {
		t.Fatal(err)
	}
	f.killAtEnd(f.Boot.Agent.ID, "player")
	instance := v.InstanceID
	for _, tc := range []struct {
		kind, want string
	}{
		{"player.tick", `id="run-status">running</dd>`},
		{"player.paused", `id="run-status">running (paused)</dd>`},
		{"player.tick", `id="run-status">running (paused)</dd>`},
		{"player.resumed", `id="run-status">running</dd>`},
		{"encoder.paused", `id="run-status">running (paused)</dd>`},
		{"encoder.resumed", `id="run-status">running</dd>`},
		{"pausedness", `id="run-status">running</dd>`},
	} {
		if _, err := f.Srv.Runs().Manager().AppendTrace(ctx, f.Boot.Agent.ID, "player", instance, run.TraceInput{Kind: tc.kind}); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/runs/player", "/runs/player?partial=1"} {
			if page := webBody(f.Get(path, cookie)); !strings.Contains(page, tc.want) {
				t.Fatalf("after %s, %s lacks %s", tc.kind, path, tc.want)
			}
		}
	}
}

// A person starts a Recipe from the Runs page as their own Run, with its
// arguments; bad input is refused with its code and starts nothing.
func TestStartRecipeFromRunsPage(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cookie, csrf := f.SignIn()
	f.writeRecipe("hello", `{"description":"says hello","args":["greeting:string=hi","times:int=1"],"template":"echo {greeting} {times}; exec sleep 300"}`)
	page := webBody(f.Get("/runs", cookie))
	for _, want := range []string{`id="start-hello"`, `name="arg.greeting"`, `placeholder="hi"`, `name="arg.times"`, `says hello`} {
		if !strings.Contains(page, want) {
			t.Fatalf("runs page lacks %s: %s", want, page)
		}
	}
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf": {csrf}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"no recipe", form("run_id", "x"), http.StatusBadRequest, run.CodeInvalidRequest},
		{"unknown recipe", form("recipe", "nosuch"), http.StatusNotFound, run.CodeNotFound},
		{"path as recipe", form("recipe", "../assent"), http.StatusBadRequest, run.CodeInvalidRequest},
		{"unknown argument", form("recipe", "hello", "arg.shell", "rm -rf /"), http.StatusBadRequest, run.CodeInvalidRequest},
		{"badly typed argument", form("recipe", "hello", "arg.times", "many"), http.StatusBadRequest, run.CodeInvalidRequest},
		{"runtime-owned value", form("recipe", "hello", "arg.state_dir", "/"), http.StatusBadRequest, run.CodeInvalidRequest},
		{"bad run id", form("recipe", "hello", "run_id", "../up"), http.StatusBadRequest, ""},
	} {
		resp := f.PostForm("/runs/start", tc.form, cookie, f.HTTP.URL)
		body := webBody(resp)
		if resp.StatusCode != tc.status || tc.code != "" && !strings.Contains(body, `data-code="`+tc.code+`"`) {
			t.Errorf("%s: %d, want %d %s: %s", tc.name, resp.StatusCode, tc.status, tc.code, body)
		}
	}
	if runs, _ := f.Srv.Runs().Manager().ListAll(ctx, "all"); len(runs) != 0 {
		t.Fatalf("refused starts left Runs: %v", runs)
	}
	if resp := f.PostForm("/runs/start", url.Values{"recipe": {"hello"}}, cookie, f.HTTP.URL); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("start without CSRF: %d", resp.StatusCode)
	}
	// An agent's token is no web session.
	resp := f.Req("POST", "/runs/start", f.Token, strings.NewReader(url.Values{"recipe": {"hello"}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": f.HTTP.URL})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an agent's token started a Recipe from the page: %d", resp.StatusCode)
	}
	resp.Body.Close()
	if runs, _ := f.Srv.Runs().Manager().ListAll(ctx, "all"); len(runs) != 0 {
		t.Fatalf("an agent's token started a Run: %v", runs)
	}

	resp = f.PostForm("/runs/start", form("recipe", "hello", "run_id", "mine", "arg.greeting", "bonjour", "arg.times", ""), cookie, f.HTTP.URL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs/mine" {
		t.Fatalf("start: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), webBody(resp))
	}
	f.killAtEnd(f.Boot.Owner.ID, "mine")
	if owner, err := f.Srv.Runs().Manager().Owner(ctx, "mine"); err != nil || owner != f.Boot.Owner.ID {
		t.Fatalf("the started Run is owned by %q (%v), want the person", owner, err)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if out, _ := f.Srv.Runs().Manager().Logs(ctx, f.Boot.Owner.ID, "mine", "stdout", 10); !strings.Contains(out, "bonjour 1") {
			c.Errorf("stdout %q, want the given argument and the default", out)
		}
	}, "the Run's greeting")
	if list := webBody(f.Get("/runs?recipe=hello", cookie)); !strings.Contains(list, `href="/runs/mine"`) {
		t.Fatalf("the started Run is not listed: %s", list)
	}
}

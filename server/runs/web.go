package runs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// The Runs pages of the web UI: the Runs a person oversees, filtered by
// status, starter, Recipe and id; each Run with its status as its service
// reports it, the Recipe's Controls as buttons, a live Trace, the Control
// journal with who sent each Control, its output, and kill, archive and
// prune behind a confirmation. A person also starts Recipes from here.

type runRow struct {
	ID, Status, Recipe, Started, Owner string
	Generation                         any
}

// runTraceRow is one Trace event on a Run's page; Seq numbers it from the
// oldest event kept (1).
type runTraceRow struct {
	Seq                      int
	TS, Kind, Summary, Level string
}

// tracePageSize is how many Trace events a Run's page shows at once.
const tracePageSize = 50

type runControlRow struct{ Action, Status, Sender, SentAt, TS, Error string }

type runConfirm struct{ Action, Title, Text, Button string }

type runPage struct {
	ID, Status, Recipe, Notice, Code string
	Paused                           bool
	Generation, ExitCode             any
	Pending, Limit                   any
	Backpressured                    bool
	Actions, RuntimeActions          []string
	// Steer lists the Recipe's declared Controls a person may send now.
	Steer          []string
	Trace          []runTraceRow
	TraceCompacted bool
	// TraceTotal is how many events the Trace keeps; TraceOlder and
	// TraceNewer link to the pages before and after this one ("" at the
	// ends), and TraceBefore is this page's bound (0: the newest page).
	TraceTotal, TraceFirst, TraceLast int
	TraceOlder, TraceNewer            string
	TraceBefore                       int
	Controls                          []runControlRow
	Stdout, Stderr                    string
	Confirm                           *runConfirm
}

// runOption is one choice of a filter.
type runOption struct {
	Value, Label string
	Selected     bool
}

// runFilter is the Runs list's filter, from the query string.
type runFilter struct {
	Status, Agent, Recipe, Query string
}

// runStatusFilters are the status filter's choices, besides all.
var runStatusFilters = []string{"active", "terminal", string(run.StatusRunning), string(run.StatusDone), string(run.StatusFailed),
	string(run.StatusExited), string(run.StatusCancelled), string(run.StatusKilled), string(run.StatusLost)}

// maxRunQuery bounds the id search text.
const maxRunQuery = 200

func parseRunFilter(q url.Values) runFilter {
	f := runFilter{Agent: q.Get("agent"), Recipe: q.Get("recipe"), Query: strings.TrimSpace(strings.ToValidUTF8(q.Get("q"), ""))}
	for _, s := range runStatusFilters {
		if q.Get("status") == s {
			f.Status = s
		}
	}
	if len(f.Query) > maxRunQuery {
		n := maxRunQuery
		for n > 0 && !utf8.RuneStart(f.Query[n]) {
			n--
		}
		f.Query = strings.TrimSpace(f.Query[:n])
	}
	return f
}

// values returns the filter as query parameters, leaving out empty ones.
func (f runFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "agent": f.Agent, "recipe": f.Recipe, "q": f.Query} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func (f runFilter) match(v run.Run) bool {
	status := v.Status
	switch f.Status {
	case "":
	case "active":
		if status != run.StatusRunning {
			return false
		}
	case "terminal":
		if status == run.StatusRunning {
			return false
		}
	default:
		if string(status) != f.Status {
			return false
		}
	}
	if f.Agent != "" && v.OwnerID != f.Agent {
		return false
	}
	if f.Recipe != "" && v.Recipe != f.Recipe {
		return false
	}
	return f.Query == "" || strings.Contains(strings.ToLower(v.ID), strings.ToLower(f.Query))
}

// recipeForm is a Recipe a person may start, with its arguments.
type recipeForm struct {
	Name, Description string
	Args              []recipeArg
}

type recipeArg struct{ Name, Type, Default string }

type runsPage struct {
	Runs                 []runRow
	Filter               runFilter
	Filtered             bool
	Refresh              string
	Statuses             []runOption
	Agents, Recipes      []runOption
	Start                []recipeForm
	Notice, Code, Recipe string
}

func (s *Part) routesRunsWeb(mux *host.Mux) {
	mux.Handle("GET /runs", s.WebPage(s.handleRunsPage))
	mux.Handle("POST /runs/start", s.WebPage(s.handleRunStart))
	mux.Handle("GET /runs/{id}", s.WebPage(s.handleRunPage))
	mux.Handle("POST /runs/{id}/control", s.WebPage(s.handleRunWebControl))
	for _, action := range []string{"kill", "archive", "prune"} {
		mux.Handle("POST /runs/{id}/"+action, s.WebPage(s.handleRunWebAction(action)))
	}
	s.routesRunProposals(mux)
}

// runNotice returns what a page tells a person about err, and its code.
func runNotice(err error) (notice, code string) {
	var e *run.Error
	if errors.As(err, &e) {
		return e.Message, e.Code
	}
	return err.Error(), "internal"
}

func (s *Part) handleRunsPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	s.renderRunsPage(w, r, pg, http.StatusOK, runsPage{})
}

// renderRunsPage draws the Runs list as r's query filters it; d carries a
// notice and the Recipe it is about.
func (s *Part) renderRunsPage(w http.ResponseWriter, r *http.Request, pg host.Page, status int, d runsPage) {
	ctx := r.Context()
	runs, err := s.listRuns(ctx, *pg.Principal, "all")
	if store.Unavailable(err) {
		host.WriteToolError(w, err)
		return
	}
	if err != nil {
		host.WriteError(w, wire.Internal, "the Runs could not be listed; reload the page, and report it if it persists")
		return
	}
	f := parseRunFilter(r.URL.Query())
	names := s.PrincipalNames(ctx)
	owners, recipes := map[string]bool{}, map[string]bool{}
	d.Runs = make([]runRow, 0, len(runs))
	for i := len(runs) - 1; i >= 0; i-- {
		v := runs[i]
		owners[v.OwnerID] = true
		if v.Recipe != "" {
			recipes[v.Recipe] = true
		}
		if !f.match(v) {
			continue
		}
		d.Runs = append(d.Runs, runRow{ID: v.ID, Status: string(v.Status), Recipe: v.Recipe, Started: v.StartedAt,
			Owner: host.NameOr(names, v.OwnerID), Generation: v.Generation})
	}
	d.Filter = f
	fv := f.values()
	d.Filtered = len(fv) > 0
	fv.Set("partial", "1")
	d.Refresh = "/runs?" + fv.Encode()
	d.Statuses = []runOption{{Value: "", Label: "any status", Selected: f.Status == ""}}
	for _, st := range runStatusFilters {
		d.Statuses = append(d.Statuses, runOption{Value: st, Label: st, Selected: f.Status == st})
	}
	d.Agents = []runOption{{Value: "", Label: "anyone", Selected: f.Agent == ""}}
	for _, id := range sortedSet(owners) {
		d.Agents = append(d.Agents, runOption{Value: id, Label: host.NameOr(names, id), Selected: f.Agent == id})
	}
	d.Recipes = []runOption{{Value: "", Label: "any Recipe", Selected: f.Recipe == ""}}
	for _, rc := range sortedSet(recipes) {
		d.Recipes = append(d.Recipes, runOption{Value: rc, Label: rc, Selected: f.Recipe == rc})
	}
	d.Start = s.recipeForms(ctx, *pg.Principal)
	pg.Title = "Runs"
	pg.Data = d
	if r.URL.Query().Get("partial") == "1" {
		s.Web.RenderPartial(w, "runs", "run-list", pg)
		return
	}
	s.Web.Render(w, status, "runs", pg)
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// recipeForms lists the valid, enabled Recipes of <data>/recipes.
func (s *Part) recipeForms(ctx context.Context, p store.Principal) []recipeForm {
	v, err := s.runs.Inspect(ctx, p.ID, run.InspectRequest{Target: "recipes", View: "summary"})
	if err != nil {
		return nil
	}
	sum, _ := v.(*run.RecipesSummary)
	if sum == nil {
		return nil
	}
	var out []recipeForm
	for _, a := range sum.Active {
		name := a.ID
		rec, _, err := s.runs.LoadRecipe(name)
		if err != nil {
			continue
		}
		f := recipeForm{Name: name, Description: rec.Description}
		for _, arg := range rec.ArgList() {
			ra := recipeArg{Name: arg.Name, Type: arg.Type}
			if arg.Default != nil && !arg.Secret {
				ra.Default = *arg.Default
			}
			f.Args = append(f.Args, ra)
		}
		out = append(out, f)
	}
	return out
}

// handleRunStart starts a Recipe of <data>/recipes as the person's own
// Run: a form post from the Runs page, Origin- and CSRF-checked. Each
// non-empty "arg.<name>" field is a value of the Recipe's argument.
func (s *Part) handleRunStart(w http.ResponseWriter, r *http.Request, pg host.Page) {
	owner := ownerOf(*pg.Principal)
	if owner == "" {
		s.renderRunsPage(w, r, pg, http.StatusForbidden, runsPage{Notice: "This sign-in cannot start Runs.", Code: "forbidden"})
		return
	}
	name := strings.TrimSpace(r.PostFormValue("recipe"))
	values := map[string]json.RawMessage{}
	for k, vs := range r.PostForm {
		arg, ok := strings.CutPrefix(k, "arg.")
		if !ok || len(vs) == 0 || strings.TrimSpace(vs[0]) == "" {
			continue
		}
		b, _ := json.Marshal(strings.TrimSpace(vs[0]))
		values[arg] = b
	}
	req := run.SpawnRequest{Recipe: name, RunID: strings.TrimSpace(r.PostFormValue("run_id")), Values: values}
	if name == "" {
		s.renderRunsPage(w, r, pg, http.StatusBadRequest, runsPage{Notice: "Choose a Recipe to start.", Code: run.CodeInvalidRequest})
		return
	}
	res, err := s.runs.Spawn(r.Context(), owner, req)
	if err != nil {
		notice, code := runNotice(err)
		s.renderRunsPage(w, r, pg, runWebStatus(code), runsPage{Notice: "The Recipe " + name + " was not started: " + notice, Code: code, Recipe: name})
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(res.ID), http.StatusSeeOther)
}

// runWebStatus is the HTTP status of a page that reports a refusal.
func runWebStatus(code string) int {
	switch code {
	case run.CodeInvalidRequest, run.CodeInvalidRecipe, run.CodeUndeclaredAction:
		return http.StatusBadRequest
	case run.CodeNotFound:
		return http.StatusNotFound
	case run.CodeEndpointNotReady, run.CodeDeliveryFailed:
		return http.StatusServiceUnavailable
	}
	return http.StatusConflict
}

var runConfirms = map[string]runConfirm{
	"kill":    {Action: "kill", Title: "Kill this Run?", Text: "Its whole process group is stopped at once (SIGKILL). Work in progress is lost.", Button: "Kill the Run"},
	"archive": {Action: "archive", Title: "Archive this Run?", Text: "Its files move to the archive and its address keeps a tombstone.", Button: "Archive the Run"},
	"prune":   {Action: "prune", Title: "Prune this Run?", Text: "Its files and records are deleted for good.", Button: "Prune the Run"},
}

// runPageData gathers what the Run page shows of Run id; ok is false when
// the person cannot see it.
//
// The Trace is shown a page at a time, oldest first: the newest
// tracePageSize events, or with before > 0 those numbered below it.
func (s *Part) runPageData(ctx context.Context, pg host.Page, id string, before int) (p runPage, ok bool) {
	owner, _ := s.runActor(ctx, *pg.Principal, id)
	st, err := s.runs.Status(ctx, owner, id)
	if err != nil {
		return runPage{ID: id}, false
	}
	p = runPage{ID: id, Status: string(st.Status), Recipe: st.Recipe, Generation: st.Generation}
	if st.ExitCode != nil {
		p.ExitCode = *st.ExitCode
	}
	if v, err := s.runs.Inspect(ctx, owner, run.InspectRequest{Target: "run:" + id, View: "control"}); err == nil {
		cv := v.(*run.ControlView)
		p.Pending, p.Limit = cv.Pending, cv.PendingLimit
		p.Backpressured = cv.Backpressured
		p.Actions = cv.ActorActions
		p.RuntimeActions = cv.RuntimeActions
		names := s.PrincipalNames(ctx)
		for _, c := range cv.RecentControls {
			ts := max(c.QueuedAt, c.DeliveredAt, c.ClaimedAt, c.HandledAt, c.FailedAt)
			sender := ""
			if c.SenderID != "" {
				sender = host.NameOr(names, c.SenderID)
			}
			p.Controls = append(p.Controls, runControlRow{Action: c.Action, Status: c.Status, Sender: sender,
				SentAt: c.QueuedAt, TS: ts, Error: c.Error})
		}
	}
	if st.Archived {
		p.RuntimeActions = []string{"prune"}
	} else if st.Status == run.StatusRunning {
		p.Steer = p.Actions
	}
	s.tracePage(ctx, &p, before)
	if st.Status == run.StatusRunning {
		p.Paused = s.runPaused(ctx, owner, id)
	}
	// The logs of a Run another node supervises come from that node; a
	// node that does not answer soon leaves them out rather than hold the
	// page.
	// Both are asked for at once, so each has the whole wait.
	logCtx, cancel := context.WithTimeout(ctx, pageLogsWait)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { p.Stderr, _ = s.runs.Logs(logCtx, owner, id, "stderr", 20) })
	p.Stdout, _ = s.runs.Logs(logCtx, owner, id, "stdout", 40)
	wg.Wait()
	return p, true
}

// tracePage fills p's Trace with the page of events numbered below before
// (the newest page when before is 0 or past the end), oldest first, with
// links to the older and newer pages. The Trace is bounded by compaction,
// so reading it whole is bounded too.
func (s *Part) tracePage(ctx context.Context, p *runPage, before int) {
	evs, err := s.Store.Runs.Trace(ctx, p.ID, 0)
	if err != nil {
		return
	}
	p.TraceTotal = len(evs)
	for _, e := range evs {
		if e.Kind == store.TraceCompactedKind {
			p.TraceCompacted = true
			break
		}
	}
	if before <= 0 || before > len(evs) {
		before = len(evs) + 1
	} else {
		p.TraceBefore = before
	}
	first := max(1, before-tracePageSize)
	for n := first; n < before; n++ {
		e := evs[n-1]
		summary := e.Summary
		if summary == "" {
			summary = e.Kind
		}
		p.Trace = append(p.Trace, runTraceRow{Seq: n, TS: store.FormatTime(e.TS), Kind: e.Kind, Summary: run.RedactText(summary), Level: e.Level})
	}
	if len(p.Trace) > 0 {
		p.TraceFirst, p.TraceLast = first, before-1
	}
	base := "/runs/" + url.PathEscape(p.ID)
	if first > 1 {
		p.TraceOlder = base + "?before=" + strconv.Itoa(first) + "#trace-title"
	}
	if before <= len(evs) {
		if next := before + tracePageSize; next <= len(evs) {
			p.TraceNewer = base + "?before=" + strconv.Itoa(next) + "#trace-title"
		} else {
			p.TraceNewer = base + "#trace-title"
		}
	}
}

// pageLogsWait bounds how long a Run's page waits for its logs.
const pageLogsWait = 2 * time.Second

// runPaused reports whether the service of Run id says it is paused: the
// newest Trace event whose kind ends in ".paused" or ".resumed" is a
// ".paused" one.
func (s *Part) runPaused(ctx context.Context, owner, id string) bool {
	v, err := s.runs.Inspect(ctx, owner, run.InspectRequest{Target: "run:" + id, View: "trace", Source: "runtime", Lines: 200})
	if err != nil {
		return false
	}
	for _, it := range v.(*run.TraceView).Items { // newest first
		switch kind := it.Kind; {
		case strings.HasSuffix(kind, ".paused"):
			return true
		case strings.HasSuffix(kind, ".resumed"):
			return false
		}
	}
	return false
}

func (s *Part) handleRunPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	id := r.PathValue("id")
	before, _ := strconv.Atoi(r.URL.Query().Get("before"))
	p, ok := s.runPageData(r.Context(), pg, id, before)
	if !ok {
		pg.Title = "Run not found"
		pg.Data = runPage{ID: id, Notice: "There is no Run with this id that you can see. The Runs you and your agents started are listed under Runs."}
		s.Web.Render(w, http.StatusNotFound, "run", pg)
		return
	}
	if c, ok := runConfirms[r.URL.Query().Get("confirm")]; ok {
		p.Confirm = &c
	}
	pg.Title = "Run " + id
	pg.Data = p
	if r.URL.Query().Get("partial") == "1" {
		s.Web.RenderPartial(w, "run", "run-detail", pg)
		return
	}
	s.Web.Render(w, http.StatusOK, "run", pg)
}

// handleRunWebControl sends one of the Recipe's declared Controls from
// the Run page (a form post, Origin- and CSRF-checked). A person acting on
// an agent's Run acts as its owner; the journal records the person as the
// sender.
func (s *Part) handleRunWebControl(w http.ResponseWriter, r *http.Request, pg host.Page) {
	ctx := r.Context()
	id := r.PathValue("id")
	action := r.PostFormValue("action")
	switch strings.TrimSpace(action) {
	case "kill", "archive", "prune":
		// These have their own confirmed forms.
		action = ""
	}
	owner, _ := s.runActor(ctx, *pg.Principal, id)
	var err error
	if action == "" {
		err = &run.Error{Code: run.CodeInvalidRequest, Message: "Choose one of the Controls this Run's Recipe declares."}
	} else {
		_, err = s.runs.ApplyAs(ctx, owner, pg.Principal.ID, id, action, nil)
	}
	if err == nil {
		http.Redirect(w, r, "/runs/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	notice, code := runNotice(err)
	p, ok := s.runPageData(ctx, pg, id, 0)
	status := runWebStatus(code)
	if !ok {
		status = http.StatusNotFound
	}
	p.Notice, p.Code = "The Control was not sent: "+notice, code
	pg.Title = "Run " + id
	pg.Data = p
	s.Web.Render(w, status, "run", pg)
}

// handleRunWebAction performs a confirmed kill, archive or prune: a real
// form post from the page's confirmation, Origin- and CSRF-checked.
func (s *Part) handleRunWebAction(action string) func(http.ResponseWriter, *http.Request, host.Page) {
	return func(w http.ResponseWriter, r *http.Request, pg host.Page) {
		ctx := r.Context()
		id := r.PathValue("id")
		owner, _ := s.runActor(ctx, *pg.Principal, id)
		var err error
		var kill *run.KillResult
		switch action {
		case "kill":
			kill, err = s.runs.Kill(ctx, owner, id)
		case "archive":
			_, err = s.runs.Archive(ctx, owner, id)
		default:
			_, err = s.runs.Prune(ctx, owner, id, r.PostFormValue("preserve_artifacts") == "true")
		}
		if err == nil && action == "prune" {
			http.Redirect(w, r, "/runs", http.StatusSeeOther)
			return
		}
		notice := ""
		switch {
		case err != nil:
			notice = err.Error()
		case kill != nil && !kill.Killed:
			notice = "The Run was not killed: " + kill.Reason + "."
		}
		target := "/runs/" + url.PathEscape(id)
		if notice != "" {
			pg.Title = "Run " + id
			pg.Data = runPage{ID: id, Notice: notice}
			s.Web.Render(w, http.StatusConflict, "run", pg)
			return
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
	}
}

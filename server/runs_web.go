package server

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/assent-run/assent/run"
)

// The Runs pages of the web UI: a person's Runs, each with its status, a
// live Trace, the Control journal and its output, and kill, archive and
// prune behind a confirmation.

type runRow struct {
	ID, Status, Recipe, Started, Owner string
	Generation                         any
}

type runTraceRow struct{ TS, Kind, Summary, Level string }

type runControlRow struct{ Action, Status, TS, Error string }

type runConfirm struct{ Action, Title, Text, Button string }

type runPage struct {
	ID, Status, Recipe, Notice string
	Generation, ExitCode       any
	Pending, Limit             any
	Backpressured              bool
	Actions, RuntimeActions    []string
	Trace                      []runTraceRow
	TraceCompacted             bool
	Controls                   []runControlRow
	Stdout, Stderr             string
	Confirm                    *runConfirm
}

func (s *Server) routesRunsWeb(mux *http.ServeMux) {
	mux.Handle("GET /runs", s.webPage(s.handleRunsPage))
	mux.Handle("GET /runs/{id}", s.webPage(s.handleRunPage))
	for _, action := range []string{"kill", "archive", "prune"} {
		mux.Handle("POST /runs/{id}/"+action, s.webPage(s.handleRunWebAction(action)))
	}
	s.routesRunProposals(mux)
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func (s *Server) handleRunsPage(w http.ResponseWriter, r *http.Request, pg page) {
	runs, err := s.listRuns(r.Context(), *pg.Principal, "all")
	if err != nil {
		http.Error(w, "the Runs could not be listed", http.StatusInternalServerError)
		return
	}
	names := s.principalNames(r.Context())
	rows := make([]runRow, 0, len(runs))
	for i := len(runs) - 1; i >= 0; i-- {
		v := runs[i]
		rows = append(rows, runRow{ID: str(v["run"]), Status: str(v["status"]), Recipe: str(v["recipe"]), Started: str(v["started_at"]),
			Owner: nameOr(names, str(v["owner_id"])), Generation: v["generation"]})
	}
	pg.Title = "Runs"
	pg.Data = map[string]any{"Runs": rows}
	if r.URL.Query().Get("partial") == "1" {
		s.web.renderPartial(w, "runs", "run-list", pg)
		return
	}
	s.web.render(w, http.StatusOK, "runs", pg)
}

var runConfirms = map[string]runConfirm{
	"kill":    {Action: "kill", Title: "Kill this Run?", Text: "Its whole process group is stopped at once (SIGKILL). Work in progress is lost.", Button: "Kill the Run"},
	"archive": {Action: "archive", Title: "Archive this Run?", Text: "Its files move to the archive and its address keeps a tombstone.", Button: "Archive the Run"},
	"prune":   {Action: "prune", Title: "Prune this Run?", Text: "Its files and records are deleted for good.", Button: "Prune the Run"},
}

func (s *Server) handleRunPage(w http.ResponseWriter, r *http.Request, pg page) {
	ctx := r.Context()
	id := r.PathValue("id")
	owner, _ := s.runActor(ctx, *pg.Principal, id)
	st, err := s.runs.Status(ctx, owner, id)
	if err != nil {
		pg.Title = "Run not found"
		pg.Data = runPage{ID: id, Notice: "There is no Run with this id that you can see. The Runs you and your agents started are listed under Runs."}
		s.web.render(w, http.StatusNotFound, "run", pg)
		return
	}
	p := runPage{ID: id, Status: str(st["status"]), Recipe: str(st["recipe"]), Generation: st["generation"], ExitCode: st["exit_code"]}
	if cv, err := s.runs.Inspect(ctx, owner, run.InspectRequest{Target: "run:" + id, View: "control"}); err == nil {
		p.Pending, p.Limit = cv["pending"], cv["pending_limit"]
		p.Backpressured, _ = cv["backpressured"].(bool)
		p.Actions, _ = cv["actor_actions"].([]string)
		p.RuntimeActions, _ = cv["runtime_actions"].([]string)
		recent, _ := cv["recent_controls"].([]map[string]any)
		for _, c := range recent {
			ts := str(c["queued_at"])
			for _, k := range []string{"delivered_at", "claimed_at", "handled_at", "failed_at"} {
				if v := str(c[k]); v > ts {
					ts = v
				}
			}
			p.Controls = append(p.Controls, runControlRow{Action: str(c["action"]), Status: str(c["status"]), TS: ts, Error: str(c["error"])})
		}
	}
	if st["archived"] == true {
		p.RuntimeActions = []string{"prune"}
	}
	if tv, err := s.runs.Inspect(ctx, owner, run.InspectRequest{Target: "run:" + id, View: "trace", Source: "all"}); err == nil {
		items, _ := tv["items"].([]map[string]any)
		for _, it := range items {
			if src := str(it["source"]); src == "lifecycle" || src == "runtime" {
				p.Trace = append(p.Trace, runTraceRow{TS: str(it["ts"]), Kind: str(it["kind"]), Summary: str(it["summary"]), Level: str(it["level"])})
			}
		}
		if sum, ok := tv["summary"].(map[string]any); ok {
			p.TraceCompacted = sum["compacted"] == true
		}
	}
	p.Stdout, _ = s.runs.Logs(ctx, owner, id, "stdout", 40)
	p.Stderr, _ = s.runs.Logs(ctx, owner, id, "stderr", 20)
	if c, ok := runConfirms[r.URL.Query().Get("confirm")]; ok {
		p.Confirm = &c
	}
	pg.Title = "Run " + id
	pg.Data = p
	if r.URL.Query().Get("partial") == "1" {
		s.web.renderPartial(w, "run", "run-detail", pg)
		return
	}
	s.web.render(w, http.StatusOK, "run", pg)
}

// handleRunWebAction performs a confirmed kill, archive or prune: a real
// form post from the page's confirmation, Origin- and CSRF-checked.
func (s *Server) handleRunWebAction(action string) func(http.ResponseWriter, *http.Request, page) {
	return func(w http.ResponseWriter, r *http.Request, pg page) {
		ctx := r.Context()
		id := r.PathValue("id")
		owner, _ := s.runActor(ctx, *pg.Principal, id)
		var err error
		var res map[string]any
		switch action {
		case "kill":
			res, err = s.runs.Kill(ctx, owner, id)
		case "archive":
			res, err = s.runs.Archive(ctx, owner, id)
		default:
			res, err = s.runs.Prune(ctx, owner, id, r.PostFormValue("preserve_artifacts") == "true")
		}
		if err == nil && action == "prune" {
			http.Redirect(w, r, "/runs", http.StatusSeeOther)
			return
		}
		notice := ""
		switch {
		case err != nil:
			notice = err.Error()
		case res["killed"] == false:
			notice = "The Run was not killed: " + str(res["reason"]) + "."
		}
		target := "/runs/" + url.PathEscape(id)
		if notice != "" {
			pg.Title = "Run " + id
			pg.Data = runPage{ID: id, Notice: notice}
			s.web.render(w, http.StatusConflict, "run", pg)
			return
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
	}
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/wire"
	"github.com/assent-run/assent/store"
)

// What an agent may execute: an agent without the command.execute grant
// cannot start an inline command or register a tool itself; its request
// is filed as a proposal that a person approves or declines here, seeing
// the exact command. Registered tools stay private to their owner until a
// person publishes them on the tools page.

func (s *Server) routesRunProposals(mux *routeMux) {
	mux.Handle("GET /runs/proposals/{id}", s.webPage(s.handleProposalPage))
	mux.Handle("POST /runs/proposals/{id}/approve", s.webPage(s.handleWebProposalDecide(true)))
	mux.Handle("POST /runs/proposals/{id}/decline", s.webPage(s.handleWebProposalDecide(false)))
	mux.Handle("GET /tools", s.webPage(s.handleToolsPage))
	mux.Handle("POST /tools/{name}/publish", s.webPage(s.handleWebToolPublish))

	h := func(f http.HandlerFunc) http.Handler { return s.authed(f) }
	mux.Handle("GET /v1/proposals", h(s.handleProposalList))
	mux.Handle("GET /v1/proposals/{id}", h(s.handleProposalGet))
	mux.Handle("POST /v1/proposals/{id}/approve", h(s.handleProposalDecide(true)))
	mux.Handle("POST /v1/proposals/{id}/decline", h(s.handleProposalDecide(false)))
	mux.Handle("POST /v1/tools/{name}/publish", h(s.handleToolPublish))
}

// writeProposalError answers a refused proposal or publication.
func writeProposalError(w http.ResponseWriter, err error) { writeRunError(w, err) }

// auditProposal records a person's decision in the audit log.
func (s *Server) auditProposal(ctx context.Context, p store.Principal, source, id, action string, err error) {
	rec := store.AuditRecord{Time: s.now(), PrincipalID: p.ID, Source: source, Subject: "proposal:" + id, Action: action, OK: err == nil}
	if err != nil {
		rec.Reason = err.Error()
	}
	if _, aerr := s.store.AppendAudit(ctx, rec); aerr != nil {
		s.log.Error("audit proposal decision", "proposal", id, "err", aerr)
	}
}

// publishProposalDecision tells the proposer, and the people who oversee
// it, that a person decided pr, so an agent waiting in inbox_wait learns
// it at once.
func (s *Server) publishProposalDecision(pr store.Proposal, approved bool) {
	b, err := json.Marshal(map[string]any{"proposal": pr.ID, "approved": approved, "status": pr.Status})
	if err != nil {
		return
	}
	s.bus.Publish(s.ownedEvent("run.proposal", pr.ProposerID, b))
}

func (s *Server) handleProposalList(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	status := r.URL.Query().Get("status")
	switch status {
	case "", store.ProposalPending, store.ProposalApproved, store.ProposalDeclined:
	default:
		writeError(w, wire.InvalidRequest, "status is one of pending, approved, declined")
		return
	}
	props, err := s.runTools.Proposals(r.Context(), p, status)
	if err != nil {
		writeRunError(w, err)
		return
	}
	out := make([]*run.Proposal, 0, len(props))
	for _, pr := range props {
		out = append(out, run.ProposalView(pr, s.runTools.ProposalURL(pr.ID)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"proposals": out})
}

func (s *Server) handleProposalGet(w http.ResponseWriter, r *http.Request) {
	pr, err := s.runTools.Proposal(r.Context(), principalOf(r), r.PathValue("id"))
	if err != nil {
		writeProposalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, run.ProposalView(pr, s.runTools.ProposalURL(pr.ID)))
}

// handleProposalDecide is a person's decision over the HTTP API, with a
// person's bearer token (or a web session). Agents and services are
// refused forbidden.
func (s *Server) handleProposalDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		if r.ContentLength != 0 && !decodeJSON(w, r, 4096, &body) {
			return
		}
		p, id := principalOf(r), r.PathValue("id")
		var pr store.Proposal
		var err error
		action := "proposal.decline"
		if approve {
			action = "proposal.approve"
			pr, err = s.runTools.Approve(r.Context(), p, id)
		} else {
			pr, err = s.runTools.Decline(r.Context(), p, id, body.Reason)
		}
		if p.Kind == store.KindHuman {
			s.auditProposal(r.Context(), p, "api", id, action, err)
		}
		if err != nil {
			writeProposalError(w, err)
			return
		}
		s.publishProposalDecision(pr, approve)
		writeJSON(w, http.StatusOK, run.ProposalView(pr, s.runTools.ProposalURL(pr.ID)))
	}
}

func (s *Server) handleToolPublish(w http.ResponseWriter, r *http.Request) {
	v, err := s.runTools.Publish(r.Context(), principalOf(r), r.PathValue("name"))
	if err != nil {
		writeProposalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// proposalPage is the web page of one proposal.
type proposalPage struct {
	ID, Kind, Status, Target, Proposer, Created string
	Script, WorkDir, Recipe                     string
	Env, Controls                               []string
	Values                                      []inboxField
	DecidedBy, DecidedAt, Reason                string
	RunLink, ToolName                           string
	Pending                                     bool
	Notice                                      string
}

func (s *Server) proposalPageData(ctx context.Context, pr store.Proposal) proposalPage {
	names := s.principalNames(ctx)
	script, values := run.ShownProposal(pr)
	pg := proposalPage{ID: pr.ID, Kind: pr.Kind, Status: pr.Status, Target: pr.Target, Proposer: nameOr(names, pr.ProposerID),
		Created: store.FormatTime(pr.CreatedAt), Script: script, WorkDir: pr.WorkDir, Env: pr.EnvNames, Controls: pr.Controls,
		Reason: pr.Reason, Pending: pr.Status == store.ProposalPending}
	var recipe any
	if json.Unmarshal(pr.Recipe, &recipe) == nil {
		b, _ := json.MarshalIndent(recipe, "", "  ")
		pg.Recipe = string(b)
	}
	pg.Values = shownValues(values)
	if pr.DecidedBy != "" {
		pg.DecidedBy = nameOr(names, pr.DecidedBy)
	}
	if !pr.DecidedAt.IsZero() {
		pg.DecidedAt = store.FormatTime(pr.DecidedAt)
	}
	if pr.Status == store.ProposalApproved {
		if pr.Kind == store.ProposalSpawn {
			pg.RunLink = pr.Target
		} else {
			pg.ToolName = pr.Target
		}
	}
	return pg
}

func (s *Server) handleProposalPage(w http.ResponseWriter, r *http.Request, pg page) {
	id := r.PathValue("id")
	pr, err := s.runTools.Proposal(r.Context(), *pg.Principal, id)
	if err != nil {
		pg.Title = "Proposal not found"
		pg.Data = proposalPage{ID: id, Notice: "This proposal does not exist, or it is not yours to see."}
		s.web.render(w, http.StatusNotFound, "runproposal", pg)
		return
	}
	data := s.proposalPageData(r.Context(), pr)
	data.Notice = s.takeNotice(w, r)
	if pg.Principal.Kind != store.KindHuman {
		data.Pending = false // only a person is offered the decision
	}
	pg.Title = "Proposal " + id
	pg.Data = data
	s.web.render(w, http.StatusOK, "runproposal", pg)
}

// handleWebProposalDecide is a person's Approve or Decline: a real form
// post from the inbox or the proposal page, Origin- and CSRF-checked.
func (s *Server) handleWebProposalDecide(approve bool) func(http.ResponseWriter, *http.Request, page) {
	return func(w http.ResponseWriter, r *http.Request, pg page) {
		id := r.PathValue("id")
		p := *pg.Principal
		var pr store.Proposal
		var err error
		action := "proposal.decline"
		if approve {
			action = "proposal.approve"
			pr, err = s.runTools.Approve(r.Context(), p, id)
		} else {
			pr, err = s.runTools.Decline(r.Context(), p, id, r.PostFormValue("reason"))
		}
		if p.Kind == store.KindHuman {
			s.auditProposal(r.Context(), p, "user", id, action, err)
		}
		if err == nil {
			s.publishProposalDecision(pr, approve)
		}
		back := safeBack(r.PostFormValue("back"), "/runs/proposals/"+url.PathEscape(id))
		switch {
		case err != nil:
			s.setNotice(w, r, fmt.Sprintf("%s refused: %s", strings.TrimPrefix(action, "proposal."), errMessage(err)))
		case approve:
			s.setNotice(w, r, "Approved: proposal "+id+" was carried out.")
		default:
			s.setNotice(w, r, "Declined: proposal "+id+".")
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

// shownValues lists values by name, each as JSON.
func shownValues(values map[string]json.RawMessage) []inboxField {
	out := make([]inboxField, 0, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		out = append(out, inboxField{Label: k, Value: string(values[k])})
	}
	return out
}

func errMessage(err error) string {
	var e *run.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// inboxRunProposals lists the commands and tools that wait for a person,
// each with the exact command, working directory, environment names,
// declared controls and values, and Approve and Decline.
func (s *Server) inboxRunProposals(ctx context.Context, p store.Principal) ([]inboxSection, error) {
	if p.Kind != store.KindHuman || s.runTools == nil {
		return nil, nil
	}
	pending, err := s.runTools.Proposals(ctx, p, store.ProposalPending)
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	names := s.principalNames(ctx)
	sec := inboxSection{ID: "run-proposals", Title: "Commands to approve", Empty: "No command waits for your approval."}
	for _, pr := range pending {
		title := "Run a command: " + pr.Target
		if pr.Kind == store.ProposalTool {
			title = "Register a tool: " + pr.Target
		}
		script, shown := run.ShownProposal(pr)
		var values []string
		for _, f := range shownValues(shown) {
			values = append(values, f.Label+"="+f.Value)
		}
		base := "/runs/proposals/" + url.PathEscape(pr.ID)
		item := inboxItem{
			Title: title,
			Fields: []inboxField{
				{Label: "Proposed by", Value: nameOr(names, pr.ProposerID)},
				{Label: "Command", Value: script},
				{Label: "Working directory", Value: pr.WorkDir},
				{Label: "Environment", Value: joinOr(pr.EnvNames, "none")},
				{Label: "Controls", Value: joinOr(pr.Controls, "none")},
				{Label: "Values", Value: joinOr(values, "none")},
				{Label: "Filed", Value: store.FormatTime(pr.CreatedAt)},
				{Label: "Details", Value: base},
			},
			Note: "Approving runs exactly this command, as the proposer's own Run, with the Run user's rights.",
			Actions: []inboxAction{
				{Label: "Approve", URL: base + "/approve", Values: map[string]string{"back": "/inbox"}, Primary: true},
				{Label: "Decline", URL: base + "/decline", Values: map[string]string{"back": "/inbox"}, Danger: true},
			},
		}
		if pr.Kind == store.ProposalTool {
			item.Note = "Approving registers this tool for its proposer only; every call runs this command with the caller's values. Publish it on the tools page to offer it to others."
		}
		if pr.Reason != "" {
			item.Warn = pr.Reason
		}
		sec.Items = append(sec.Items, item)
	}
	return []inboxSection{sec}, nil
}

// toolsPage is the web page of registered tools.
type toolsPage struct {
	Tools  []toolRow
	Notice string
}

type toolRow struct {
	run.ToolInfo
	OwnerName string
}

func (s *Server) handleToolsPage(w http.ResponseWriter, r *http.Request, pg page) {
	infos, err := s.runTools.RegisteredTools(r.Context(), *pg.Principal)
	if err != nil {
		writeError(w, wire.Internal, "the tools could not be listed; reload the page, and report it if it persists")
		return
	}
	names := s.principalNames(r.Context())
	rows := make([]toolRow, 0, len(infos))
	for _, t := range infos {
		rows = append(rows, toolRow{ToolInfo: t, OwnerName: nameOr(names, t.Owner)})
	}
	pg.Title = "Registered tools"
	pg.Data = toolsPage{Tools: rows, Notice: s.takeNotice(w, r)}
	s.web.render(w, http.StatusOK, "tools", pg)
}

func (s *Server) handleWebToolPublish(w http.ResponseWriter, r *http.Request, pg page) {
	name := r.PathValue("name")
	p := *pg.Principal
	_, err := s.runTools.Publish(r.Context(), p, name)
	if p.Kind == store.KindHuman {
		rec := store.AuditRecord{Time: s.now(), PrincipalID: p.ID, Source: "user", Subject: "tool:" + name, Action: "tool.publish", OK: err == nil}
		if err != nil {
			rec.Reason = err.Error()
		}
		if _, aerr := s.store.AppendAudit(r.Context(), rec); aerr != nil {
			s.log.Error("audit tool publish", "tool", name, "err", aerr)
		}
	}
	if err != nil {
		s.setNotice(w, r, "publish refused: "+errMessage(err))
	} else {
		s.setNotice(w, r, "Published: every principal now sees the tool "+name+".")
	}
	http.Redirect(w, r, "/tools", http.StatusSeeOther)
}

package runs

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

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// What an agent may execute: an agent without the command.execute grant
// cannot start an inline command or register a tool itself; its request
// is filed as a proposal that a person approves or declines here, seeing
// the exact command. Registered tools stay private to their owner until a
// person publishes them on the tools page.

func (s *Part) routesRunProposals(mux *host.Mux) {
	mux.Handle("GET /runs/proposals/{id}", s.WebPage(s.handleProposalPage))
	mux.Handle("POST /runs/proposals/{id}/approve", s.WebPage(s.handleWebProposalDecide(true)))
	mux.Handle("POST /runs/proposals/{id}/decline", s.WebPage(s.handleWebProposalDecide(false)))
	mux.Handle("GET /tools", s.WebPage(s.handleToolsPage))
	mux.Handle("POST /tools/{name}/publish", s.WebPage(s.handleWebToolPublish))

	h := func(f http.HandlerFunc) http.Handler { return s.Authed(f) }
	mux.Handle("GET /v1/proposals", h(s.handleProposalList))
	mux.Handle("GET /v1/proposals/{id}", h(s.handleProposalGet))
	mux.Handle("POST /v1/proposals/{id}/approve", h(s.handleProposalDecide(true)))
	mux.Handle("POST /v1/proposals/{id}/decline", h(s.handleProposalDecide(false)))
	mux.Handle("POST /v1/tools/{name}/publish", h(s.handleToolPublish))
}

// writeProposalError answers a refused proposal or publication.
func writeProposalError(w http.ResponseWriter, err error) { writeRunError(w, err) }

// auditProposal records a person's decision in the audit log.
func (s *Part) auditProposal(ctx context.Context, p store.Principal, source, id, action string, err error) {
	rec := store.AuditRecord{Time: s.Now(), PrincipalID: p.ID, Source: source, Subject: "proposal:" + id, Action: action, OK: err == nil}
	if err != nil {
		rec.Reason = err.Error()
	}
	if _, aerr := s.Store.AppendAudit(ctx, rec); aerr != nil {
		s.Log.Error("audit proposal decision", "proposal", id, "err", aerr)
	}
}

// publishProposalDecision tells the proposer, and the people who oversee
// it, that a person decided pr, so an agent waiting in inbox_wait learns
// it at once.
func (s *Part) publishProposalDecision(pr store.Proposal, approved bool) {
	b, err := json.Marshal(map[string]any{"proposal": pr.ID, "approved": approved, "status": pr.Status})
	if err != nil {
		return
	}
	s.Bus.Publish(s.OwnedEvent("run.proposal", pr.ProposerID, b))
}

func (s *Part) handleProposalList(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	status := r.URL.Query().Get("status")
	switch status {
	case "", store.ProposalPending, store.ProposalApproved, store.ProposalDeclined:
	default:
		host.WriteError(w, wire.InvalidRequest, "status is one of pending, approved, declined")
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
	host.WriteJSON(w, http.StatusOK, map[string]any{"proposals": out})
}

func (s *Part) handleProposalGet(w http.ResponseWriter, r *http.Request) {
	pr, err := s.runTools.Proposal(r.Context(), host.PrincipalOf(r), r.PathValue("id"))
	if err != nil {
		writeProposalError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, run.ProposalView(pr, s.runTools.ProposalURL(pr.ID)))
}

// handleProposalDecide is a person's decision over the HTTP API, with a
// person's bearer token (or a web session). Agents and services are
// refused forbidden.
func (s *Part) handleProposalDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body api.DecisionRequest
		if r.ContentLength != 0 && !host.DecodeJSON(w, r, 4096, &body) {
			return
		}
		p, id := host.PrincipalOf(r), r.PathValue("id")
		if p.Kind == store.KindHuman {
			// Routed as the inbox is: once escalated, to its group.
			if filed, ferr := s.Store.Proposals.Proposal(r.Context(), id); ferr == nil {
				if err := s.Routed(r.Context(), p, filed.ProposerID, s.runTools.ProposalEscalatedTo(r.Context(), id)); err != nil {
					host.WriteToolError(w, err)
					return
				}
			}
		}
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
		host.WriteJSON(w, http.StatusOK, run.ProposalView(pr, s.runTools.ProposalURL(pr.ID)))
	}
}

func (s *Part) handleToolPublish(w http.ResponseWriter, r *http.Request) {
	v, err := s.runTools.Publish(r.Context(), host.PrincipalOf(r), r.PathValue("name"))
	if err != nil {
		writeProposalError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, v)
}

// proposalPage is the web page of one proposal.
type proposalPage struct {
	ID, Kind, Status, Target, Proposer, Created string
	Script, WorkDir, Recipe                     string
	Env, Controls                               []string
	Values                                      []host.InboxField
	DecidedBy, DecidedAt, Reason, Why           string
	RunLink, ToolName                           string
	Pending                                     bool
	Notice                                      string
}

func (s *Part) proposalPageData(ctx context.Context, pr store.Proposal) proposalPage {
	names := s.PrincipalNames(ctx)
	script, values := run.ShownProposal(pr)
	pg := proposalPage{ID: pr.ID, Kind: pr.Kind, Status: pr.Status, Target: pr.Target, Proposer: host.NameOr(names, pr.ProposerID),
		Created: store.FormatTime(pr.CreatedAt), Script: script, WorkDir: pr.WorkDir, Env: pr.EnvNames, Controls: pr.Controls,
		Reason: pr.Reason, Why: pr.Why, Pending: pr.Status == store.ProposalPending}
	var recipe any
	if json.Unmarshal(pr.Recipe, &recipe) == nil {
		b, _ := json.MarshalIndent(recipe, "", "  ")
		pg.Recipe = string(b)
	}
	pg.Values = shownValues(values)
	if pr.DecidedBy != "" {
		pg.DecidedBy = host.NameOr(names, pr.DecidedBy)
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

func (s *Part) handleProposalPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	id := r.PathValue("id")
	pr, err := s.runTools.Proposal(r.Context(), *pg.Principal, id)
	if err != nil {
		pg.Title = "Proposal not found"
		pg.Data = proposalPage{ID: id, Notice: "This proposal does not exist, or it is not yours to see."}
		s.Web.Render(w, http.StatusNotFound, "runproposal", pg)
		return
	}
	data := s.proposalPageData(r.Context(), pr)
	data.Notice = s.TakeNotice(w, r)
	if pg.Principal.Kind != store.KindHuman {
		data.Pending = false // only a person is offered the decision
	}
	pg.Title = "Proposal " + id
	pg.Data = data
	s.Web.Render(w, http.StatusOK, "runproposal", pg)
}

// handleWebProposalDecide is a person's Approve or Decline: a real form
// post from the inbox or the proposal page, Origin- and CSRF-checked.
func (s *Part) handleWebProposalDecide(approve bool) func(http.ResponseWriter, *http.Request, host.Page) {
	return func(w http.ResponseWriter, r *http.Request, pg host.Page) {
		id := r.PathValue("id")
		action := "proposal.decline"
		if approve {
			action = "proposal.approve"
		}
		_, err := s.decideProposal(r.Context(), *pg.Principal, id, approve, r.PostFormValue("reason"))
		back := host.SafeBack(r.PostFormValue("back"), "/runs/proposals/"+url.PathEscape(id))
		switch {
		case err != nil:
			s.SetNotice(w, r, fmt.Sprintf("%s refused: %s", strings.TrimPrefix(action, "proposal."), errMessage(err)))
		case approve:
			s.SetNotice(w, r, "Approved: proposal "+id+" was carried out.")
		default:
			s.SetNotice(w, r, "Declined: proposal "+id+".")
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

// decideProposal is a person's approval or decline of a proposal, as the
// web UI makes it: audited as the user's, and announced.
func (s *Part) decideProposal(ctx context.Context, p store.Principal, id string, approve bool, reason string) (store.Proposal, error) {
	var pr store.Proposal
	var err error
	action := "proposal.decline"
	if p.Kind == store.KindHuman {
		if filed, ferr := s.Store.Proposals.Proposal(ctx, id); ferr == nil {
			if err := s.Routed(ctx, p, filed.ProposerID, s.runTools.ProposalEscalatedTo(ctx, id)); err != nil {
				return store.Proposal{}, err
			}
		}
	}
	if approve {
		action = "proposal.approve"
		pr, err = s.runTools.Approve(ctx, p, id)
	} else {
		pr, err = s.runTools.Decline(ctx, p, id, reason)
	}
	if p.Kind == store.KindHuman {
		s.auditProposal(ctx, p, "user", id, action, err)
	}
	if err == nil {
		s.publishProposalDecision(pr, approve)
	}
	return pr, err
}

// proposalDecision makes a proposal's card decidable through the inbox
// API, by the same function as its buttons.
func (s *Part) proposalDecision(pr store.Proposal, script string) *host.Decision {
	return &host.Decision{
		Key: "command_proposal:" + pr.ID, Binding: "pending", Kind: "command_proposal",
		Bound: map[string]string{"proposal": pr.ID, "kind": string(pr.Kind), "target": pr.Target, "command": script,
			"workdir": pr.WorkDir},
		ProposedBy: pr.ProposerID, DeclineNote: true,
		Decide: func(ctx context.Context, p store.Principal, d host.DecideArgs) (string, error) {
			if _, err := s.decideProposal(ctx, p, pr.ID, d.Approve, d.Note); err != nil {
				var re *run.Error
				if errors.As(err, &re) {
					return "", wire.New(wire.Code(re.Code), re.Message)
				}
				return "", err
			}
			if d.Approve {
				return "Approved: proposal " + pr.ID + " was carried out.", nil
			}
			return "Declined: proposal " + pr.ID + ".", nil
		},
	}
}

// shownValues lists values by name, each as JSON.
func shownValues(values map[string]json.RawMessage) []host.InboxField {
	out := make([]host.InboxField, 0, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		out = append(out, host.InboxField{Label: k, Value: string(values[k])})
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
// Inbox lists the tool and Recipe proposals waiting for p.
func (s *Part) Inbox(ctx context.Context, p store.Principal) ([]host.InboxSection, error) {
	if p.Kind != store.KindHuman || s.runTools == nil {
		return nil, nil
	}
	pending, err := s.runTools.Proposals(ctx, p, store.ProposalPending)
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	names := s.PrincipalNames(ctx)
	sec := host.InboxSection{ID: "run-proposals", Title: "Commands to approve", Empty: "No command waits for your approval."}
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
		item := host.InboxItem{
			Title: title,
			Fields: []host.InboxField{
				{Label: "Proposed by", Value: host.NameOr(names, pr.ProposerID)},
				{Label: "Command", Value: script},
				{Label: "Values", Value: host.JoinOr(values, "none")},
				host.InboxTime("Asked", pr.CreatedAt),
			},
			Details: []host.InboxField{
				{Label: "Working directory", Value: pr.WorkDir},
				{Label: "Environment", Value: host.JoinOr(pr.EnvNames, "none")},
				{Label: "Controls", Value: host.JoinOr(pr.Controls, "none")},
				{Label: "Proposal", Value: pr.ID},
			},
			Why:  pr.Why,
			Link: base, LinkLabel: "Open the full proposal",
			Note: "Approving runs exactly this command, as the proposer's own Run, with the Run user's rights.",
			Actions: []host.InboxAction{
				{Label: "Approve", URL: base + "/approve", Primary: true},
				{Label: "Decline", URL: base + "/decline", Danger: true, Input: "reason", InputLabel: "Reason for declining (optional)"},
			},
		}
		group := ""
		if dl, err := s.runTools.ProposalDeadlineOf(ctx, pr.ID); err == nil {
			item.Fields = append(item.Fields, host.InboxTime("Decide by", dl.Due))
			then := "declined: " + run.NoDecision
			switch {
			case dl.Escalated():
				group = dl.EscalateTo
				item.Fields = append(item.Fields, host.InboxField{Label: "Escalated", Value: "Escalated to " + group + ": nobody decided before the first deadline"})
			case dl.EscalateTo != "":
				then = "escalated to group " + dl.EscalateTo + ", which has as long again to decide; then declined: " + run.NoDecision
			}
			item.Details = append(item.Details, host.InboxField{Label: "Without a decision by then", Value: then})
		}
		if pr.Kind == store.ProposalTool {
			item.Note = "Approving registers this tool for its proposer only; every call runs this command with the caller's values. Publish it on the tools page to offer it to others."
		}
		if pr.Reason != "" {
			item.Warn = pr.Reason
		}
		item.Decision = s.proposalDecision(pr, script)
		item.Decision.Group = group
		sec.Items = append(sec.Items, item)
	}
	return []host.InboxSection{sec}, nil
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

func (s *Part) handleToolsPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	infos, err := s.runTools.RegisteredTools(r.Context(), *pg.Principal)
	if store.Unavailable(err) {
		host.WriteToolError(w, err)
		return
	}
	if err != nil {
		host.WriteError(w, wire.Internal, "the tools could not be listed; reload the page, and report it if it persists")
		return
	}
	names := s.PrincipalNames(r.Context())
	rows := make([]toolRow, 0, len(infos))
	for _, t := range infos {
		rows = append(rows, toolRow{ToolInfo: t, OwnerName: host.NameOr(names, t.Owner)})
	}
	pg.Title = "Registered tools"
	pg.Data = toolsPage{Tools: rows, Notice: s.TakeNotice(w, r)}
	s.Web.Render(w, http.StatusOK, "tools", pg)
}

func (s *Part) handleWebToolPublish(w http.ResponseWriter, r *http.Request, pg host.Page) {
	name := r.PathValue("name")
	p := *pg.Principal
	_, err := s.runTools.Publish(r.Context(), p, name)
	if p.Kind == store.KindHuman {
		rec := store.AuditRecord{Time: s.Now(), PrincipalID: p.ID, Source: "user", Subject: "tool:" + name, Action: "tool.publish", OK: err == nil}
		if err != nil {
			rec.Reason = err.Error()
		}
		if _, aerr := s.Store.AppendAudit(r.Context(), rec); aerr != nil {
			s.Log.Error("audit tool publish", "tool", name, "err", aerr)
		}
	}
	if err != nil {
		s.SetNotice(w, r, "publish refused: "+errMessage(err))
	} else {
		s.SetNotice(w, r, "Published: every principal now sees the tool "+name+".")
	}
	http.Redirect(w, r, "/tools", http.StatusSeeOther)
}

// proposalNotes returns the notes people wrote on command proposal id in
// the inbox, as the proposal's view shows them.
func (s *Part) proposalNotes(ctx context.Context, id string) ([]run.ProposalNote, error) {
	notes, err := host.ReadNotes(ctx, s.Store.Backend.Settings(), "command_proposal:"+id+"@pending")
	if err != nil {
		return nil, err
	}
	out := make([]run.ProposalNote, 0, len(notes))
	for _, n := range notes {
		out = append(out, run.ProposalNote{By: n.By, Decision: n.Decision, Text: n.Text, At: store.FormatTime(n.At)})
	}
	return out, nil
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/rules"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// The inbox as JSON: the decisions the inbox page offers, for a signed-in
// person's session (cookie and CSRF header), so that phone apps, chat bots
// and tests take the same path as the page's buttons. Each part's inbox
// card carries its host.Decision; nothing here decides by itself.

func (s *Server) routesInbox(mux *host.Mux) {
	mux.Handle("GET /v1/inbox", s.host.Authed(s.personOnly(s.handleInboxList)))
	mux.Handle("POST /v1/inbox/{id}/decision", s.host.Authed(s.personOnly(s.handleInboxDecide)))
	mux.Handle("POST /v1/inbox/decisions", s.host.Authed(s.personOnly(s.handleInboxBatch)))
}

// personOnly admits a person signed in to the web UI, as the inbox page
// does; agents and services, and tokens of any kind, are refused.
func (s *Server) personOnly(h func(http.ResponseWriter, *http.Request, store.Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := host.PrincipalOf(r)
		if p.Kind != store.KindHuman || !host.FromWeb(r) {
			host.WriteError(w, wire.HumanConfirmationRequired, "only a person signed in to the web UI decides; use the inbox page, or its session cookie with the X-CSRF-Token header")
			return
		}
		h(w, r, p)
	})
}

// maxBatch bounds the decisions of one batch.
const maxBatch = 100

// decisionCards lists the inbox cards that wait for p's decision, in the
// order the inbox page shows them.
func (s *Server) decisionCards(ctx context.Context, p store.Principal) ([]host.InboxItem, error) {
	var out []host.InboxItem
	for _, part := range s.parts {
		in, ok := part.(host.Inboxer)
		if !ok {
			continue
		}
		secs, err := in.Inbox(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, sec := range secs {
			for _, it := range sec.Items {
				if it.Decision != nil {
					out = append(out, it)
				}
			}
		}
	}
	// Cards routed to other people stay in the list, marked, so that a
	// decision on one is refused as not_routed rather than not_found.
	s.host.RouteItems(ctx, p, out)
	return out, nil
}

func (s *Server) handleInboxList(w http.ResponseWriter, r *http.Request, p store.Principal) {
	cards, err := s.decisionCards(r.Context(), p)
	if err != nil {
		s.host.Log.Error("inbox could not be listed", "err", err)
		host.WriteToolError(w, err)
		return
	}
	out := api.Inbox{Items: make([]api.InboxItem, 0, len(cards))}
	for _, c := range cards {
		if c.Decision.NotRouted != nil {
			continue
		}
		out.Items = append(out.Items, inboxItemOf(c))
	}
	host.WriteJSON(w, http.StatusOK, out)
}

// inboxItemOf is a card as the API shows it.
func inboxItemOf(c host.InboxItem) api.InboxItem {
	d := c.Decision
	it := api.InboxItem{ID: d.ID(), Kind: d.Kind, Title: c.Title, Summary: c.Summary, Bound: d.Bound, Needs: 1,
		ProposedBy: d.ProposedBy, Why: c.Why, AskedOf: d.AskedOf, Note: c.Note, Warn: c.Warn, Link: c.Link,
		Decisions: []string{api.DecisionApprove, api.DecisionDecline}, Editable: d.Editable()}
	if d.Needs > 0 {
		it.Needs = d.Needs
	}
	if d.AlreadyApproved {
		it.Decisions = []string{api.DecisionDecline}
	}
	if it.Bound == nil {
		it.Bound = map[string]string{}
	}
	for _, f := range c.Fields {
		it.Fields = append(it.Fields, api.InboxField{Label: f.Label, Value: f.Value})
	}
	return it
}

func (s *Server) handleInboxDecide(w http.ResponseWriter, r *http.Request, p store.Principal) {
	var req api.InboxDecision
	if !host.DecodeJSON(w, r, 16<<10, &req) {
		return
	}
	cards, err := s.decisionCards(r.Context(), p)
	if err != nil {
		host.WriteToolError(w, err)
		return
	}
	out := s.decideCard(r.Context(), p, cards, r.PathValue("id"), req)
	if out.Error != nil {
		host.WriteAPIError(w, out.Error)
		return
	}
	host.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleInboxBatch(w http.ResponseWriter, r *http.Request, p store.Principal) {
	var req api.InboxBatch
	if !host.DecodeJSON(w, r, 256<<10, &req) {
		return
	}
	if len(req.Items) == 0 || len(req.Items) > maxBatch {
		host.WriteError(w, wire.InvalidRequest, "send between 1 and 100 items, each with the id its card showed and a decision")
		return
	}
	cards, err := s.decisionCards(r.Context(), p)
	if err != nil {
		host.WriteToolError(w, err)
		return
	}
	ids := make([]string, len(req.Items))
	for i, it := range req.Items {
		ids[i] = it.ID
	}
	if kinds := batchKinds(cards, ids); len(kinds) > 1 {
		host.WriteError(w, wire.InvalidRequest, "a batch decides items of one kind; this one mixes "+strings.Join(kinds, ", ")+": send one batch per kind (nothing was decided)")
		return
	}
	out := api.InboxBatchOutcome{Items: make([]api.InboxOutcome, 0, len(req.Items))}
	seen := map[string]bool{}
	for _, it := range req.Items {
		if seen[it.ID] {
			out.Items = append(out.Items, refused(it.ID, it.Decision, wire.New(wire.InvalidRequest, "this item is in the batch twice; it was decided once")))
			continue
		}
		seen[it.ID] = true
		out.Items = append(out.Items, s.decideCard(r.Context(), p, cards, it.ID, it.InboxDecision))
	}
	host.WriteJSON(w, http.StatusOK, out)
}

// kindOf is the kind of the inbox item id: its card's kind when the card
// is among cards, otherwise the part of its key before the first colon,
// as every part names its keys; "" for an id with neither.
func kindOf(cards []host.InboxItem, id string) string {
	key := id
	if i := strings.LastIndex(id, "@"); i > 0 {
		key = id[:i]
	}
	for _, c := range cards {
		if c.Decision.Key == key {
			return c.Decision.Kind
		}
	}
	if k, _, ok := strings.Cut(key, ":"); ok {
		return k
	}
	return ""
}

// batchKinds lists the distinct kinds of the items ids, sorted. An id of
// no kind is left out: it is refused on its own as not found.
func batchKinds(cards []host.InboxItem, ids []string) []string {
	var kinds []string
	for _, id := range ids {
		if k := kindOf(cards, id); k != "" && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// decideCard carries out p's decision d on the card id among cards: the
// card's own decision function, bound to what the id says the card showed.
func (s *Server) decideCard(ctx context.Context, p store.Principal, cards []host.InboxItem, id string, d api.InboxDecision) api.InboxOutcome {
	var approve bool
	note := strings.TrimSpace(d.Note)
	switch d.Decision {
	case api.DecisionApprove:
		approve = true
	case api.DecisionDecline:
	case api.DecisionRespond:
		if note == "" {
			return refused(id, d.Decision, wire.New(wire.InvalidRequest, "respond sends a note without deciding; write the note"))
		}
	default:
		return refused(id, d.Decision, wire.New(wire.InvalidRequest, `decision must be "approve", "decline" or "respond"`))
	}
	if len(note) > maxNoteBytes {
		return refused(id, d.Decision, wire.New(wire.LimitExceeded, fmt.Sprintf("the note is over %d bytes; shorten it", maxNoteBytes)))
	}
	// A key may hold an @ (a subject's id); the binding is after the last.
	i := strings.LastIndex(id, "@")
	ok := i > 0
	key, binding := id, ""
	if ok {
		key, binding = id[:i], id[i+1:]
	}
	var card *host.Decision
	for _, c := range cards {
		if c.Decision.Key == key {
			card = c.Decision
			break
		}
	}
	switch {
	case !ok || card == nil:
		return refused(id, d.Decision, wire.New(wire.NotFound, "no such decision waits for you; it was decided already or never was yours to decide; read GET /v1/inbox again"))
	case card.NotRouted != nil:
		return refused(id, d.Decision, decisionError(card.NotRouted))
	case card.Binding != binding:
		return refused(id, d.Decision, wire.New(wire.Stale, "this item changed since its card was read (now "+card.ID()+"); read GET /v1/inbox again and decide what it shows now"))
	case len(d.Values) > 0 && !approve:
		return refused(id, d.Decision, wire.New(wire.InvalidRequest, "values go with approve: they are your changes to what approving binds"))
	}
	for name := range d.Values {
		if !slices.Contains(card.Editable(), name) {
			return refused(id, d.Decision, wire.New(wire.InvalidRequest, "this item has no value "+strconv.Quote(name)+" to change; it takes "+host.JoinOr(card.Editable(), "none")+" (see editable in GET /v1/inbox)"))
		}
	}
	var rule store.Rule
	if d.Rule != nil {
		if !approve {
			return refused(id, d.Decision, wire.New(wire.InvalidRequest, "a standing rule goes with approve: it lets the next such changes through as this one"))
		}
		req := *d.Rule
		if raw, ok := d.Values["value"]; ok && len(req.Values) == 0 && req.Min == nil && req.Max == nil {
			req.Values = []json.RawMessage{raw}
		}
		var werr *wire.Error
		if rule, werr = s.rules.PrepareFromCard(ctx, p, card.ProposedBy, card.Rule, req); werr != nil {
			return refused(id, d.Decision, werr)
		}
	}
	n := inboxNote{By: p.ID, Decision: d.Decision, Text: note, At: s.host.Now()}
	// Notes stay with the item when people change its values.
	noteID := flows.NoteID(id)
	if d.Decision == api.DecisionRespond {
		if err := s.addNote(ctx, noteID, card.ProposedBy, n); err != nil {
			return refused(id, d.Decision, decisionError(err))
		}
		return api.InboxOutcome{ID: id, Decision: d.Decision, Status: "responded", Message: "Sent your note; the item still waits for a decision."}
	}
	reason := ""
	if !approve && card.DeclineNote {
		reason = note
	}
	if note != "" {
		// The note is kept before the decision, so that the agent, which
		// learns the outcome as soon as it is made, reads it with it.
		if err := s.addNote(ctx, noteID, card.ProposedBy, n); err != nil {
			return refused(id, d.Decision, decisionError(err))
		}
	}
	msg, err := card.Decide(ctx, p, host.DecideArgs{Approve: approve, Note: reason, Values: d.Values})
	if err != nil {
		if note != "" {
			s.dropNote(ctx, noteID, n)
		}
		return refused(id, d.Decision, decisionError(err))
	}
	status := "declined"
	if approve {
		status = "approved"
	}
	out := api.InboxOutcome{ID: id, Decision: d.Decision, Status: status, Message: msg}
	if rule.ID != "" {
		if werr := s.rules.Save(ctx, p, rule); werr != nil {
			out.Message += " The standing rule was not made: " + werr.Message
		} else {
			out.Rule = rule.ID
			out.Message += " From now on this agent's changes of this value to " + rules.Describe(rule) + " are applied without asking you, until " +
				rule.Until.Format("2006-01-02 15:04 UTC") + " (rule " + rule.ID + "; revoke it on the rules page)."
		}
	}
	return out
}

func refused(id, decision string, e *wire.Error) api.InboxOutcome {
	return api.InboxOutcome{ID: id, Decision: decision, Status: "refused", Error: e}
}

// decisionError is the wire form of a part's refusal of a decision.
func decisionError(err error) *wire.Error {
	var we *wire.Error
	var te *tool.Error
	switch {
	case errors.As(err, &we):
		return we
	case errors.As(err, &te):
		return host.FromToolError(te)
	case store.Unavailable(err):
		return host.FromToolError(host.StoreUnavailableError())
	}
	return wire.New(wire.Internal, host.InternalMessage)
}

// The inbox page's own forms: a card's Edit (approve with changed values),
// and "Approve selected". Both go through decideCard, as the JSON routes
// do, and come back to the inbox, where the person was.

func (s *Server) routesInboxWeb(mux *host.Mux) {
	mux.Handle("POST /inbox/decide", s.host.WebPage(s.handleWebInboxDecide))
	mux.Handle("POST /inbox/decide-selected", s.host.WebPage(s.handleWebInboxSelected))
}

// handleWebInboxDecide is a card's Edit form: the id, the decision and the
// edited values as text, converted to JSON by the card's edit fields.
func (s *Server) handleWebInboxDecide(w http.ResponseWriter, r *http.Request, pg host.Page) {
	p := *pg.Principal
	id, decision := r.PostFormValue("id"), r.PostFormValue("decision")
	cards, err := s.decisionCards(r.Context(), p)
	if err != nil {
		s.host.SetNotice(w, r, "The inbox could not be read; try again.")
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	d := api.InboxDecision{Decision: decision, Note: r.PostFormValue("note")}
	if v := r.PostFormValue("rule_days"); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days < 1 || days > 90 {
			s.host.SetNotice(w, r, "Not approved: a standing rule lasts 1 to 90 days.")
			http.Redirect(w, r, "/inbox", http.StatusSeeOther)
			return
		}
		d.Rule = &api.RuleRequest{Until: s.host.Now().Add(time.Duration(days) * 24 * time.Hour)}
	}
	if i := strings.LastIndex(id, "@"); i > 0 && decision == api.DecisionApprove {
		for _, c := range cards {
			if c.Decision.Key != id[:i] {
				continue
			}
			for _, e := range c.Decision.Edits {
				text, ok := r.PostForm["value:"+e.Name]
				if !ok {
					continue
				}
				raw, err := c.Decision.EditJSON(e.Name, text[0])
				if err != nil {
					s.host.SetNotice(w, r, "Not approved: "+err.Error()+".")
					http.Redirect(w, r, "/inbox#"+c.Decision.Anchor(), http.StatusSeeOther)
					return
				}
				if d.Values == nil {
					d.Values = map[string]json.RawMessage{}
				}
				d.Values[e.Name] = raw
			}
		}
	}
	out := s.decideCard(r.Context(), p, cards, id, d)
	if out.Error != nil {
		s.host.SetNotice(w, r, "Not done: "+out.Error.Message)
	} else {
		s.host.SetNotice(w, r, out.Message)
	}
	http.Redirect(w, r, host.SafeBack(r.PostFormValue("back"), "/inbox"), http.StatusSeeOther)
}

// handleWebInboxSelected approves every card the person ticked, each on
// its own, and says how many went through.
func (s *Server) handleWebInboxSelected(w http.ResponseWriter, r *http.Request, pg host.Page) {
	p := *pg.Principal
	if err := r.ParseForm(); err != nil {
		host.WriteError(w, wire.InvalidRequest, "the form could not be read; reload the page and try again")
		return
	}
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		s.host.SetNotice(w, r, "Nothing was selected: tick the items to approve first.")
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	if len(ids) > maxBatch {
		ids = ids[:maxBatch]
	}
	cards, err := s.decisionCards(r.Context(), p)
	if err != nil {
		s.host.SetNotice(w, r, "The inbox could not be read; try again.")
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	if kinds := batchKinds(cards, ids); len(kinds) > 1 {
		s.host.SetNotice(w, r, "Nothing was approved: the selection mixes "+strings.Join(kindLabels(kinds), " and ")+"; approve one kind at a time with its own button.")
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	done := 0
	var refusals []string
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		out := s.decideCard(r.Context(), p, cards, id, api.InboxDecision{Decision: api.DecisionApprove})
		if out.Error != nil {
			refusals = append(refusals, out.Error.Message)
			continue
		}
		done++
	}
	msg := fmt.Sprintf("Approved %d of %d selected.", done, len(seen))
	if len(refusals) > 0 {
		msg += " Not approved: " + strings.Join(refusals, " ")
	}
	s.host.SetNotice(w, r, msg)
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

// kindLabel names a kind of inbox item in the person's words, plural.
func kindLabel(kind string) string {
	switch kind {
	case "control_proposal":
		return "proposed changes"
	case "flow_approval":
		return "approvals"
	case "flow_program":
		return "proposed programs"
	case "command_proposal":
		return "proposed commands"
	case "screen_press":
		return "screen presses"
	case "question":
		return "questions"
	}
	return strings.ReplaceAll(kind, "_", " ") + " items"
}

func kindLabels(kinds []string) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = kindLabel(k)
	}
	return out
}

// batchBar is one kind of the inbox page's batch approval: the kind, its
// name for the person and how many of its items may be ticked.
type batchBar struct {
	Kind, Label string
	N           int
}

// inboxBatches returns the page's batch bars, one a kind in the order the
// kinds first appear, and each section's share of them by section id, for
// its "Select all" boxes. An item the person already approved is not
// ticked again, so it is not counted.
func inboxBatches(sections []host.InboxSection) (bars []batchBar, bySection map[string][]batchBar) {
	bySection = map[string][]batchBar{}
	add := func(list []batchBar, kind string) []batchBar {
		for i := range list {
			if list[i].Kind == kind {
				list[i].N++
				return list
			}
		}
		return append(list, batchBar{Kind: kind, Label: kindLabel(kind), N: 1})
	}
	for _, sec := range sections {
		for _, it := range sec.Items {
			if d := it.Decision; d != nil && !d.AlreadyApproved {
				bars = add(bars, d.Kind)
				bySection[sec.ID] = add(bySection[sec.ID], d.Kind)
			}
		}
	}
	return bars, bySection
}

package flows

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

func (s *Part) routesFlowsWeb(mux *host.Mux) {
	mux.Handle("GET /flows", s.WebPage(s.handleFlowsPage))
	mux.Handle("GET /flows/instances/{id}", s.WebPage(s.handleFlowInstancePage))
	mux.Handle("POST /web/flows/approvals/{id}/{decision}", s.WebPage(s.handleWebFlowDecide))
	mux.Handle("POST /web/flows/programs/{fingerprint}/{decision}", s.WebPage(s.handleWebProgramDecide))
}

// transitionRow is one transition as the programs page shows it.
type transitionRow struct {
	ID, Class, Effect, Verifier, Operation, Expected string
	// When says in words when the step may be taken (its class).
	When                                          string
	Priority                                      int64
	From, To, Authority, Capabilities, Parameters string
}

// classWords says in a person's words when a step of a selection class
// runs; the class itself stays beside it for those who know the runtime.
func classWords(class string) string {
	switch class {
	case flow.Recovery:
		return "to recover after a failed step"
	case flow.ObjectiveRequired:
		return "when it serves the goal"
	case flow.Progress:
		return "as the next step"
	case flow.ExplicitOnly:
		return "only when asked for by name"
	case flow.ObservedExternal:
		return "records something that happened outside; never run"
	}
	return class
}

// programPage is one program on the programs page.
type programPage struct {
	programView
	Rows  []transitionRow
	Graph phaseGraph
	// TooLarge says the program has more than maxDrawnTransitions
	// transitions, so only its summary is shown.
	TooLarge bool
}

// phaseGraph is a drawing of a program's phases (nodes) and transitions
// (edges), laid out in columns by distance from the phases nothing leads
// to. The page shows it as SVG with a text alternative.
type phaseGraph struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
}

type graphNode struct {
	Name string
	X, Y int // top-left corner
	W, H int
}

type graphEdge struct {
	Label          string
	From, To       string
	X1, Y1, X2, Y2 int
	LX, LY         int
	Loop, Back     bool
	Path           string
}

const (
	nodeW, nodeH = 130, 34
	colGap       = 300
	rowGap       = 70
	graphPad     = 20
	graphTop     = 48 // room for self-loops above the first row
)

// layoutPhases lays out the phase graph of p's transitions.
func layoutPhases(ts []flow.Transition) phaseGraph {
	var order []string
	seen := map[string]bool{}
	add := func(ph string) {
		if !seen[ph] {
			seen[ph] = true
			order = append(order, ph)
		}
	}
	targets := map[string]bool{}
	for _, t := range ts {
		for _, ph := range t.TargetPhases {
			targets[ph] = true
		}
	}
	// Columns by breadth-first distance from the phases no transition
	// enters (or, if every phase is entered, from the first source).
	col := map[string]int{}
	var queue []string
	for _, t := range ts {
		for _, ph := range t.SourcePhases {
			if !targets[ph] {
				if _, ok := col[ph]; !ok {
					col[ph] = 0
					queue = append(queue, ph)
				}
			}
		}
	}
	if len(queue) == 0 && len(ts) > 0 && len(ts[0].SourcePhases) > 0 {
		col[ts[0].SourcePhases[0]] = 0
		queue = append(queue, ts[0].SourcePhases[0])
	}
	for len(queue) > 0 {
		ph := queue[0]
		queue = queue[1:]
		add(ph)
		for _, t := range ts {
			if !slices.Contains(t.SourcePhases, ph) {
				continue
			}
			for _, to := range t.TargetPhases {
				if _, ok := col[to]; !ok {
					col[to] = col[ph] + 1
					queue = append(queue, to)
				}
			}
		}
	}
	for _, t := range ts { // phases not reached from a start
		for _, ph := range append(slices.Clone(t.SourcePhases), t.TargetPhases...) {
			if _, ok := col[ph]; !ok {
				col[ph] = 0
			}
			add(ph)
		}
	}
	rows := map[int]int{}
	pos := map[string]graphNode{}
	g := phaseGraph{}
	for _, ph := range order {
		c := col[ph]
		n := graphNode{Name: ph, X: graphPad + c*colGap, Y: graphTop + rows[c]*rowGap, W: nodeW, H: nodeH}
		rows[c]++
		pos[ph] = n
		g.Nodes = append(g.Nodes, n)
		g.Width = max(g.Width, n.X+nodeW+graphPad)
		g.Height = max(g.Height, n.Y+nodeH+graphPad+14)
	}
	// Parallel edges (several transitions between the same phases) share
	// a line; their labels stack.
	stacked := map[[2]string]int{}
	for _, t := range ts {
		for _, from := range t.SourcePhases {
			for _, to := range t.TargetPhases {
				a, b := pos[from], pos[to]
				k := stacked[[2]string{from, to}]
				stacked[[2]string{from, to}]++
				e := graphEdge{Label: flow.LocalID(t.ID), From: from, To: to}
				switch {
				case from == to:
					e.Loop = true
					x, y := a.X+a.W/2, a.Y
					e.Path = fmt.Sprintf("M %d %d C %d %d, %d %d, %d %d", x-12, y, x-30, y-34, x+30, y-34, x+12, y)
					e.LX, e.LY = x, y-30
				case b.X > a.X:
					e.X1, e.Y1, e.X2, e.Y2 = a.X+a.W, a.Y+a.H/2, b.X, b.Y+b.H/2
					e.Path = fmt.Sprintf("M %d %d L %d %d", e.X1, e.Y1, e.X2, e.Y2)
					e.LX, e.LY = (e.X1+e.X2)/2, (e.Y1+e.Y2)/2-6
				default:
					// Back or sideways: bend below the nodes.
					e.Back = true
					x1, x2 := a.X+a.W/2, b.X+b.W/2
					y1, y2 := a.Y+a.H, b.Y+b.H
					low := max(y1, y2) + 28
					e.Path = fmt.Sprintf("M %d %d C %d %d, %d %d, %d %d", x1, y1, x1, low, x2, low, x2, y2)
					e.LX, e.LY = (x1+x2)/2, low-4
					g.Height = max(g.Height, low+graphPad)
				}
				if e.Back {
					e.LY += 14 * k
				} else {
					e.LY -= 14 * k
				}
				g.Edges = append(g.Edges, e)
			}
		}
	}
	return g
}

func (s *Part) handleFlowsPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	ctx := r.Context()
	progs, err := s.flowPrograms(ctx)
	if err != nil {
		s.Log.Error("flows page", "err", err)
	}
	var out []programPage
	for _, p := range progs {
		pp := programPage{programView: s.viewLoadedProgram(ctx, p)}
		if p.Len() > maxDrawnTransitions {
			// Drawing and listing every transition of a large program
			// would make the page as large as the program: it shows the
			// summary, and the API serves the program whole.
			pp.TooLarge = true
			out = append(out, pp)
			continue
		}
		ts := p.Transitions()
		pp.Graph = layoutPhases(ts)
		for _, t := range ts {
			row := transitionRow{
				ID: t.ID, Class: t.SelectionClass, When: classWords(t.SelectionClass), Priority: t.Priority, Effect: t.Effect, Verifier: t.Verifier,
				From: host.JoinOr(t.SourcePhases, ""), To: host.JoinOr(t.TargetPhases, ""),
				Authority: host.JoinOr(t.Authority, ""), Capabilities: host.JoinOr(t.RequiredCapabilities, "none"),
			}
			if ps := t.Prescription; ps != nil {
				row.Operation, row.Expected = ps.Operation, ps.ExpectedPostcondition
			}
			var params []string
			for _, prm := range t.Parameters {
				n := prm.Name
				if prm.Secret {
					n += " (secret)"
				}
				if prm.Required {
					n += " *"
				}
				params = append(params, n)
			}
			row.Parameters = host.JoinOr(params, "")
			pp.Rows = append(pp.Rows, row)
		}
		out = append(out, pp)
	}
	insts, err := s.instanceRows(ctx, *pg.Principal)
	if err != nil {
		s.Log.Error("flows page", "err", err)
	}
	pg.Title = "Flows"
	pg.Data = map[string]any{"Programs": out, "Instances": insts, "Notice": s.TakeNotice(w, r)}
	s.Web.Render(w, http.StatusOK, "flows", pg)
}

// receiptRow is a receipt with the name of who applied it.
type receiptRow struct {
	flow.Receipt
	By string
}

// closedRow is a decided or stale approval on the instance page.
type closedRow struct {
	flow.Approval
	By, Asked string
	// Edited says what people changed before approving, old → new.
	Edited string
}

// factRow is one fact on the instance page.
type factRow struct{ Facet, Status, Value string }

func (s *Part) handleFlowInstancePage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	ctx := r.Context()
	v, err := s.flowInspect(ctx, *pg.Principal, r.PathValue("id"), "")
	if err != nil {
		pg.Title = "Not found"
		pg.Data = map[string]any{"Missing": r.PathValue("id")}
		s.Web.Render(w, http.StatusNotFound, "flow", pg)
		return
	}
	var facts []factRow
	for _, facet := range slices.Sorted(func(yield func(string) bool) {
		for k := range v.Instance.Facts {
			if !yield(k) {
				return
			}
		}
	}) {
		f := v.Instance.Facts[facet]
		if strings.HasSuffix(facet, "iban") && f.Value != "" {
			f.Value = ShowIBAN(f.Value) // as on the approval card
		}
		facts = append(facts, factRow{Facet: facet, Status: f.Status, Value: f.Value})
	}
	names := s.PrincipalNames(ctx)
	var items []host.InboxItem
	for _, a := range v.Approvals {
		items = append(items, s.approvalItem(ctx, a, names, *pg.Principal))
	}
	receipts := make([]receiptRow, 0, len(v.Receipts))
	for _, rc := range v.Receipts {
		receipts = append(receipts, receiptRow{Receipt: rc, By: host.NameOr(names, rc.Principal)})
	}
	pg.Title = "Flow " + v.Instance.ID
	var closed []closedRow
	for i := len(v.Closed) - 1; i >= 0; i-- { // newest first
		a := v.Closed[i]
		by := host.NameOr(names, a.Decider)
		if a.Status == flow.ApprovalApproved && len(a.Approvers) > 1 {
			// Every person who approved, in order: the last one applied it.
			var all []string
			for _, v := range a.Approvers {
				all = append(all, host.NameOr(names, v.Person))
			}
			by = strings.Join(all, ", ")
		}
		closed = append(closed, closedRow{Approval: a, By: by, Asked: host.NameOr(names, a.Requester),
			Edited: changedWords(a, names, s.paramInputs.get(programOf(ctx, s, a)))})
	}
	pg.Data = map[string]any{"View": v, "Facts": facts, "Approvals": items, "Receipts": receipts, "Closed": closed,
		"Owner": host.NameOr(names, v.Instance.Owner)}
	if r.URL.Query().Get("partial") == "1" {
		s.Web.RenderPartial(w, "flow", "instance-body", pg)
		return
	}
	pg.Data.(map[string]any)["Notice"] = s.TakeNotice(w, r)
	s.Web.Render(w, http.StatusOK, "flow", pg)
}

// handleWebFlowDecide is a person's Approve or Decline on an approval card,
// in the inbox or on the instance page; a decline carries the reason typed
// on the card. A refusal returns to the page the card was on ("back", a
// path on this site) with the reason as a notice.
func (s *Part) handleWebFlowDecide(w http.ResponseWriter, r *http.Request, pg host.Page) {
	decision := r.PathValue("decision")
	if decision != "approve" && decision != "decline" {
		host.WriteError(w, wire.NotFound, "an approval can be approved or declined")
		return
	}
	reason := ""
	if decision == "decline" {
		reason = strings.TrimSpace(r.PostFormValue("reason"))
	}
	out, a, err := s.Decide(r.Context(), *pg.Principal, r.PathValue("id"), decision, reason)
	if r.Header.Get("Accept") == "application/json" {
		if err != nil {
			writeFlowError(w, err)
			return
		}
		host.WriteJSON(w, http.StatusOK, out)
		return
	}
	if err != nil {
		// Back where the person decided: the inbox, or the instance page.
		s.SetNotice(w, r, fmt.Sprintf("%s refused: %s", decision, flowError(err).Error()))
		http.Redirect(w, r, host.SafeBack(r.PostFormValue("back"), "/inbox"), http.StatusSeeOther)
		return
	}
	step := fmt.Sprintf("step “%s” of %s", host.PlainValue(flow.LocalID(a.Transition)), a.Instance)
	notice := "Declined: " + step + " will not run."
	if rc, ok := out.(flow.Receipt); ok {
		notice = fmt.Sprintf("Approved: %s is done (receipt %s).", step, rc.ID)
	}
	if now, ok := out.(flow.Approval); ok && now.Status == flow.ApprovalPending {
		notice = fmt.Sprintf("Your approval is recorded: %s needs %s before it runs.", step, morePeople(now.Needs()))
	}
	s.SetNotice(w, r, notice)
	// Back where the person decided: the inbox stays where it was.
	http.Redirect(w, r, host.SafeBack(r.PostFormValue("back"), "/flows/instances/"+url.PathEscape(a.Instance)), http.StatusSeeOther)
}

// handleWebProgramDecide is a person's Approve or Decline of a proposed
// program in the inbox.
func (s *Part) handleWebProgramDecide(w http.ResponseWriter, r *http.Request, pg host.Page) {
	decision := r.PathValue("decision")
	reason := ""
	if decision == "decline" {
		reason = strings.TrimSpace(r.PostFormValue("reason"))
	}
	l, err := s.flowDecideProgram(r.Context(), *pg.Principal, r.PathValue("fingerprint"), decision, reason)
	var te *tool.Error
	if r.Header.Get("Accept") == "application/json" || errors.As(err, &te) && te.Code == string(wire.NotRouted) {
		// A person the program was not routed to is refused, 403
		// not_routed, as the inbox refuses them.
		if err != nil {
			writeFlowError(w, err)
			return
		}
		host.WriteJSON(w, http.StatusOK, l)
		return
	}
	if err != nil {
		s.SetNotice(w, r, fmt.Sprintf("%s refused: %s", decision, flowError(err).Error()))
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	s.SetNotice(w, r, fmt.Sprintf("Program %s (%s) is now %s.", l.ProgramID, l.Fingerprint, l.Status))
	http.Redirect(w, r, "/flows", http.StatusSeeOther)
}

// decorateApprovalCard gives an approval card its first line (the
// summary recorded when the approval was filed), the lines under it, a
// link to the instance, and, for a person whose grants lack what the
// transition needs, an explanation in place of the Approve button.
func decorateApprovalCard(item *host.InboxItem, a flow.Approval, person store.Principal) {
	item.Summary, item.Lines = a.Summary, nil
	for _, l := range a.SummaryLines {
		if w, ok := strings.CutPrefix(l, WarningPrefix); ok {
			item.Warn = w // stands out from the card's other lines
			continue
		}
		item.Lines = append(item.Lines, l)
	}
	item.Link, item.LinkLabel = "/flows/instances/"+url.PathEscape(a.Instance), "Open "+a.Instance
	missing := missingGrants(a.RequiredCapabilities, person)
	if len(missing) == 0 {
		return
	}
	item.Actions = slices.DeleteFunc(item.Actions, func(ac host.InboxAction) bool { return strings.HasSuffix(ac.URL, "/approve") })
	item.Warn = strings.TrimSpace(item.Warn + " " + fmt.Sprintf("You cannot approve this: it needs %s, which your grants lack (approving adds only human.approve). Ask an operator to grant %s to you, or ask a person who has it to decide. You can still decline it.",
		strings.Join(missing, ", "), strings.Join(missing, ", ")))
}

// missingGrants lists the capabilities in required that person's grants,
// with the human.approve an approval adds, do not cover.
func missingGrants(required []string, person store.Principal) []string {
	var out []string
	for _, c := range required {
		if c != flow.CapabilityHumanApprove && !slices.Contains(person.Grants, c) {
			out = append(out, c)
		}
	}
	return out
}

// decorateQuorum shows, on the card of an approval that needs several
// people or people of a group, who has approved and how many more it
// needs ("Approved by Ada · needs 1 more person"). A person who already
// approved sees that they did, in place of the Approve button: one person
// counts once.
func decorateQuorum(item *host.InboxItem, a flow.Approval, names map[string]string, person store.Principal) {
	if a.People() < 2 && a.Group == "" {
		return
	}
	var by []string
	for _, v := range a.Approvers {
		by = append(by, host.NameOr(names, v.Person))
	}
	of := ""
	if a.Group != "" {
		of = " of group " + a.Group
	}
	line := fmt.Sprintf("Needs %d different people%s to approve", a.People(), of)
	if a.People() == 1 {
		line = "Needs 1 person" + of + " to approve"
	}
	if len(by) > 0 {
		line = "Approved by " + strings.Join(by, ", ") + " · needs " + morePeople(a.Needs())
		if a.Group != "" {
			line += of
		}
	}
	item.Fields = append(item.Fields, host.InboxField{Label: "Approvals", Value: line})
	item.Note = fmt.Sprintf("This step runs only when %d different people%s have approved it; each person counts once, and the last approval applies exactly what is shown here. If any of it changes first, the approvals so far no longer count.", a.People(), of)
	if a.ApprovedBy(person.ID) {
		item.Actions = slices.DeleteFunc(item.Actions, func(ac host.InboxAction) bool { return strings.HasSuffix(ac.URL, "/approve") })
		item.Note = fmt.Sprintf("You approved this. It needs %s; someone else must approve it. You can still decline it.", morePeople(a.Needs()))
	}
}

// morePeople is "1 more person" or "n more people".
func morePeople(n int) string {
	if n == 1 {
		return "1 more person"
	}
	return fmt.Sprintf("%d more people", n)
}

// programOf is the id of a's program, or "" when it is no longer stored.
func programOf(ctx context.Context, s *Part, a flow.Approval) string {
	if p, err := s.flows.Program(ctx, a.Program); err == nil {
		return p.ID()
	}
	return ""
}

package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/assent-run/assent/server/route"
	"net/mail"
	"sort"
	"strings"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// emailSetting is the setting that holds a person's mail address.
const emailSetting = "notify.email."

// SetEmail records addr as the mail address of the person id; an empty
// addr removes it (stored empty). An address that does not parse is
// refused.
func SetEmail(ctx context.Context, st store.Settings, id, addr string) error {
	addr = strings.TrimSpace(addr)
	if addr != "" {
		a, err := mail.ParseAddress(addr)
		if err != nil || a.Name != "" {
			return fmt.Errorf("%q is not a plain mail address like ada@example.com", addr)
		}
		addr = a.Address
	}
	return st.SetSetting(ctx, emailSetting+id, addr)
}

// Email returns the mail address of the person id, or "" when none is set.
func Email(ctx context.Context, st store.Settings, id string) (string, error) {
	v, err := st.Setting(ctx, emailSetting+id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return v, err
}

// mailDue says whether the person id is mailed, and when: now, or when
// their quiet hours end. The message is stored held until then, so the
// hold survives restarts like any other pending message.
func (p *Part) mailDue(ctx context.Context, id string, now time.Time) (time.Time, bool) {
	addr, err := Email(ctx, p.Store.Settings, id)
	if err != nil || addr == "" {
		return time.Time{}, false
	}
	if on, err := MailOn(ctx, p.Store.Settings, id); err == nil && !on {
		return time.Time{}, false
	}
	q, ok, err := QuietOf(ctx, p.Store.Settings, id)
	if err != nil {
		// Damaged quiet hours hold nothing: a message now is better
		// than none.
		p.Log.Warn("notify: quiet hours", "err", err)
	}
	if !ok {
		return now, true
	}
	return q.Until(now).UTC(), true
}

// pending is an item waiting for a decision and who it is routed to.
type pending struct {
	item notify.Item
	to   []string // principal ids
}

// announceBatch bounds the questions one read of the store's announce
// records takes.
const announceBatch = 100

// derive writes a message for every pending item not yet written by this
// node, to every destination: first for the questions the store recorded
// as waiting to be announced, then for every pending item it reads (the
// safety net for what no record names).
func (p *Part) derive(ctx context.Context) error {
	if err := p.announce(ctx); err != nil && ctx.Err() == nil {
		p.Log.Warn("notify: announcing questions", "err", err)
	}
	items, err := p.pendingItems(ctx)
	if err != nil {
		return err
	}
	return p.enqueue(ctx, items)
}

// announce writes the messages of the questions that the store recorded,
// in the transaction that stored each question, as waiting to be
// announced, and clears those records once the messages are stored. A
// question decided before it was announced is cleared without a message.
// Records cleared by another node, or written twice, change nothing: a
// message's id is derived from its item and destination.
func (p *Part) announce(ctx context.Context) error {
	if p.Store.Asks == nil {
		return nil
	}
	for {
		asks, err := p.Store.Asks.AsksToAnnounce(ctx, announceBatch)
		if err != nil {
			return fmt.Errorf("questions to announce: %w", err)
		}
		var items []pending
		ids := make([]string, 0, len(asks))
		for _, a := range asks {
			ids = append(ids, a.ID)
			if a.State != store.AskOpen {
				continue
			}
			it, err := p.questionItem(ctx, a)
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		if err := p.enqueue(ctx, items); err != nil {
			return err
		}
		if err := p.Store.Asks.AnnouncedAsks(ctx, ids); err != nil {
			return fmt.Errorf("clear announced questions: %w", err)
		}
		if len(asks) < announceBatch {
			return nil
		}
	}
}

// enqueue writes the messages of the items this node has not written
// yet, to every destination, and remembers them as written.
func (p *Part) enqueue(ctx context.Context, items []pending) error {
	var fresh []pending
	p.mu.Lock()
	for _, it := range items {
		if !p.seen[it.item.Key()] {
			fresh = append(fresh, it)
		}
	}
	p.mu.Unlock()
	if len(fresh) == 0 {
		return nil
	}
	hooks, err := p.Store.Notify.Webhooks(ctx)
	if err != nil {
		return err
	}
	now := p.Now().UTC()
	var msgs []store.OutboxMessage
	for _, it := range fresh {
		payload, err := json.Marshal(it.item)
		if err != nil {
			return err
		}
		add := func(channel string, due time.Time) {
			msgs = append(msgs, store.OutboxMessage{ID: messageID(it.item.Key(), channel), Channel: channel,
				Item: it.item.Key(), Payload: payload, CreatedAt: now, NextAt: due})
		}
		for _, h := range hooks {
			add("webhook:"+h.ID, now)
		}
		if p.Options.SMTP != nil {
			for _, id := range it.to {
				if due, ok := p.mailDue(ctx, id, now); ok {
					add("mail:"+id, due)
				}
			}
		}
	}
	if len(msgs) > 0 {
		if _, err := p.Store.Notify.EnqueueMessages(ctx, msgs); err != nil {
			return err
		}
		poke(p.send)
	}
	p.mu.Lock()
	for _, it := range fresh {
		p.seen[it.item.Key()] = true
	}
	p.mu.Unlock()
	return nil
}

// pendingItems reads the items that wait for a decision.
func (p *Part) pendingItems(ctx context.Context) ([]pending, error) {
	var out []pending
	props, err := p.Store.Proposals.ListProposals(ctx, store.ProposalPending, "", 0)
	if err != nil {
		return nil, fmt.Errorf("pending proposals: %w", err)
	}
	live := map[string]bool{}
	for _, pr := range props {
		key := notify.KindRunProposal + ":" + pr.ID
		live[key] = true
		if p.known(key) {
			continue
		}
		it, err := p.proposalItem(ctx, pr)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	for _, pr := range props {
		if err := p.escalatedItem(ctx, &out, live, store.DeadlineCommandProposal, pr.ID, notify.KindRunProposal+":"+pr.ID, func() (pending, error) {
			return p.proposalItem(ctx, pr)
		}); err != nil {
			return nil, err
		}
	}
	var approvals []flow.ApprovalRecord
	if err := p.Store.Flows.View(ctx, func(tx flow.Tx) error {
		var err error
		approvals, err = tx.PendingApprovals()
		return err
	}); err != nil {
		return nil, fmt.Errorf("pending approvals: %w", err)
	}
	for _, rec := range approvals {
		key := notify.KindFlowApproval + ":" + rec.Approval.ID
		live[key] = true
		if p.known(key) {
			continue
		}
		it, err := p.approvalItem(ctx, rec.Approval)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	var loads []flow.ProgramLoad
	if err := p.Store.Flows.View(ctx, func(tx flow.Tx) error {
		var err error
		loads, err = tx.ProgramLoads()
		return err
	}); err != nil {
		return nil, fmt.Errorf("proposed programs: %w", err)
	}
	for _, l := range loads {
		if l.Status != flow.ProgramProposed {
			continue
		}
		key := KindProgramProposal + ":" + l.Fingerprint
		live[key] = true
		if p.known(key) {
			continue
		}
		it, err := p.programItem(ctx, l)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	for _, snap := range p.Controls.Proposals(ctx, "") {
		st := snap.State.Staged
		if st == nil || st.Provenance.Source != control.SourceAgent {
			continue
		}
		id := controlItemID(snap)
		key := notify.KindControlProposal + ":" + id
		live[key] = true
		if p.known(key) {
			continue
		}
		it, err := p.controlItem(ctx, id, snap)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	for _, snap := range p.Controls.Proposals(ctx, "") {
		st := snap.State.Staged
		if st == nil || st.Provenance.Source != control.SourceAgent {
			continue
		}
		id := controlItemID(snap)
		if err := p.escalatedItem(ctx, &out, live, store.DeadlineControlProposal, id, notify.KindControlProposal+":"+id, func() (pending, error) {
			return p.controlItem(ctx, id, snap)
		}); err != nil {
			return nil, err
		}
	}
	if p.Store.Asks != nil {
		asks, err := p.Store.Asks.OpenAsks(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("open questions: %w", err)
		}
		for _, a := range asks {
			key := notify.KindQuestion + ":" + a.ID
			live[key] = true
			if p.known(key) {
				continue
			}
			it, err := p.questionItem(ctx, a)
			if err != nil {
				return nil, err
			}
			out = append(out, it)
		}
	}
	// Forget the items decided since, so the set stays as small as what
	// is pending.
	p.mu.Lock()
	for k := range p.seen {
		if !live[k] {
			delete(p.seen, k)
		}
	}
	p.mu.Unlock()
	return out, nil
}

func (p *Part) known(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[key]
}

func (p *Part) proposalItem(ctx context.Context, pr store.Proposal) (pending, error) {
	it := notify.Item{Kind: notify.KindRunProposal, ID: pr.ID, CreatedAt: pr.CreatedAt,
		URL: p.BaseURL + "/runs/proposals/" + pr.ID}
	if pr.Kind == store.ProposalTool {
		it.Title = "Approve tool " + pr.Target
	} else {
		it.Title = "Approve command for Run " + pr.Target
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The agent asks to run this script in %s:\n\n%s\n", pr.WorkDir, strings.TrimRight(pr.Script, "\n"))
	if len(pr.Values) > 0 {
		b.WriteString("\nValues:\n")
		names := make([]string, 0, len(pr.Values))
		for k := range pr.Values {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(&b, "  %s = %s\n", k, pr.Values[k])
		}
	}
	dl := p.decisionDeadline(ctx, store.DeadlineCommandProposal, pr.ID)
	b.WriteString(deadlineText(dl, "declined"))
	it.Summary = strings.TrimRight(b.String(), "\n")
	it.Deadline = dl.Due
	group := ""
	if dl.Escalated() {
		group = dl.EscalateTo
	}
	return p.route(ctx, it, pr.ProposerID, pr.SupervisorID, group)
}

// decisionDeadline returns the stored deadline of the decision of kind
// and item, or the zero deadline when it has none (or none is kept).
func (p *Part) decisionDeadline(ctx context.Context, kind, item string) store.DecisionDeadline {
	if p.Store.Deadlines == nil {
		return store.DecisionDeadline{}
	}
	d, err := p.Store.Deadlines.Deadline(ctx, kind, item)
	if err != nil {
		return store.DecisionDeadline{}
	}
	return d
}

// deadlineText is the line an announcement gives a decision's deadline
// ("" without one): by when to decide, and what happens then (the
// fallback, e.g. "declined", or the escalation).
func deadlineText(d store.DecisionDeadline, fallback string) string {
	if d.Due.IsZero() {
		return ""
	}
	then := fmt.Sprintf("it is %s with the reason %q", fallback, "no decision before the deadline")
	switch {
	case d.Escalated():
		then = fmt.Sprintf("it was escalated to group %s; unless someone decides by then, %s", d.EscalateTo, then)
	case d.EscalateTo != "":
		then = fmt.Sprintf("it is escalated to group %s, which has as long again to decide", d.EscalateTo)
	}
	return fmt.Sprintf("\nDecide by %s; without a decision %s.\n", d.Due.UTC().Format("2006-01-02 15:04 UTC"), then)
}

// escalatedItem adds to out, once per node, the announcement that the
// decision keyed key (whose deadline is kind and item) was escalated: a
// message of kind decision.escalated routed to the group it escalated
// to, built from the decision's own announcement.
func (p *Part) escalatedItem(ctx context.Context, out *[]pending, live map[string]bool, kind, item, key string, build func() (pending, error)) error {
	d := p.decisionDeadline(ctx, kind, item)
	if !d.Escalated() {
		return nil
	}
	ekey := notify.KindDecisionEscalated + ":" + key
	live[ekey] = true
	if p.known(ekey) {
		return nil
	}
	it, err := build()
	if err != nil {
		return err
	}
	it.item.Kind, it.item.ID = notify.KindDecisionEscalated, key
	it.item.Title = shorten("Escalated to "+d.EscalateTo+": "+it.item.Title, 120)
	it.item.Summary = fmt.Sprintf("Nobody decided this before its first deadline, so it is now asked of group %s.\n\n%s", d.EscalateTo, it.item.Summary)
	*out = append(*out, it)
	return nil
}

func (p *Part) approvalItem(ctx context.Context, a flow.Approval) (pending, error) {
	it := notify.Item{Kind: notify.KindFlowApproval, ID: a.ID, CreatedAt: a.CreatedAt,
		URL: p.BaseURL + "/flows/instances/" + a.Instance}
	// The title is the summary's first sentence (the decision in a
	// person's words), else the operation.
	it.Title = "Approve " + a.Operation
	if first, _, _ := strings.Cut(strings.TrimSpace(a.Summary), "\n"); first != "" {
		it.Title = shorten(first, 120)
	}
	lines := append([]string{a.Summary}, a.SummaryLines...)
	it.Summary = strings.TrimSpace(strings.Join(lines, "\n"))
	return p.route(ctx, it, a.Requester, "", route.FlowApprovalGroup(a))
}

// KindProgramProposal is the kind of an agent's proposal to load a Flow
// program; its item id is the program's fingerprint.
const KindProgramProposal = "flow.program"

// programItem announces an agent's proposal to load a Flow program, whose
// card is in the inbox's section of programs to load.
func (p *Part) programItem(ctx context.Context, l flow.ProgramLoad) (pending, error) {
	it := notify.Item{Kind: KindProgramProposal, ID: l.Fingerprint, CreatedAt: l.LoadedAt,
		URL:   p.BaseURL + "/inbox#section-flow-programs",
		Title: shorten(fmt.Sprintf("Load program %s (version %s)", l.ProgramID, l.Version), 120)}
	var b strings.Builder
	fmt.Fprintf(&b, "The agent proposes to load Flow program %s, version %s (fingerprint %s). Approving puts it in use: it can be started, and its steps can call the tools it names.\n", l.ProgramID, l.Version, l.Fingerprint)
	if l.Why != "" {
		fmt.Fprintf(&b, "Why: %s\n", l.Why)
	}
	dl := p.decisionDeadline(ctx, store.DeadlineProgramProposal, l.Fingerprint)
	b.WriteString(deadlineText(dl, "declined"))
	it.Summary, it.Deadline = strings.TrimRight(b.String(), "\n"), dl.Due
	return p.route(ctx, it, l.LoadedBy, "", "")
}

func (p *Part) controlItem(ctx context.Context, id string, snap control.Snapshot) (pending, error) {
	st := snap.State
	name := snap.Metadata.Label
	if name == "" {
		name = snap.Identity.ControlID
	}
	it := notify.Item{Kind: notify.KindControlProposal, ID: id, CreatedAt: st.Staged.StagedAt, URL: p.BaseURL + "/inbox"}
	it.Title = shorten("Change "+name, 120)
	if st.ValueRedacted || st.StagedValueRedacted {
		it.Summary = fmt.Sprintf("The agent proposes a new value for %s (%s); the value is secret and shown only on the card.", name, snap.Identity)
	} else {
		from, _ := json.Marshal(st.Value)
		to, _ := json.Marshal(st.StagedValue)
		it.Title = shorten(fmt.Sprintf("Change %s to %s", name, to), 120)
		it.Summary = fmt.Sprintf("The agent proposes to change %s (%s)\nfrom: %s\nto:   %s", name, snap.Identity, from, to)
	}
	dl := p.decisionDeadline(ctx, store.DeadlineControlProposal, id)
	it.Summary, it.Deadline = strings.TrimRight(it.Summary+"\n"+deadlineText(dl, "discarded"), "\n"), dl.Due
	group := ""
	if dl.Escalated() {
		group = dl.EscalateTo
	}
	return p.route(ctx, it, st.Staged.Provenance.PrincipalID, "", group)
}

// questionItem announces an agent's question. Its card is the question's
// on the inbox page, whose anchor the inbox derives from the item's key
// ("question:<id>").
func (p *Part) questionItem(ctx context.Context, a store.Ask) (pending, error) {
	card := (&host.Decision{Key: "question:" + a.ID}).Anchor()
	it := notify.Item{Kind: notify.KindQuestion, ID: a.ID, CreatedAt: a.CreatedAt, URL: p.BaseURL + "/inbox#" + card,
		Title: shorten("Answer: "+a.Question, 120)}
	var b strings.Builder
	fmt.Fprintf(&b, "The agent asks: %s\n", a.Question)
	if a.Reason != "" {
		fmt.Fprintf(&b, "Why: %s\n", a.Reason)
	}
	for _, o := range a.Options {
		fmt.Fprintf(&b, "  - %s\n", o)
	}
	if !a.Deadline.IsZero() {
		then := "the question is declined"
		if a.Fallback != "decline" {
			then = fmt.Sprintf("the fallback %q is taken", a.Fallback)
		}
		fmt.Fprintf(&b, "If nobody answers by %s, %s.\n", a.Deadline.UTC().Format("2006-01-02 15:04 UTC"), then)
	}
	it.Summary, it.Deadline = strings.TrimRight(b.String(), "\n"), a.Deadline
	return p.route(ctx, it, a.Asker, "", a.Group)
}

// route names the item's agent and the people it goes to: the supervisor
// the item names, else those package route gives (the named group's
// members, else the supervisors of the agent that filed it, else the
// workspace's owner). An item any person may decide is mailed to the
// owner.
func (p *Part) route(ctx context.Context, it notify.Item, agentID, supervisor, group string) (pending, error) {
	if agent, err := p.Store.Principals.Principal(ctx, agentID); err == nil {
		it.Agent = agent.Name
	} else if !errors.Is(err, store.ErrNotFound) {
		return pending{}, err
	}
	r, err := p.Router.For(ctx, agentID, group)
	if err != nil {
		return pending{}, err
	}
	to := r.People
	if supervisor != "" && group == "" {
		to = []string{supervisor}
	}
	if len(to) == 0 && r.Owner != "" {
		to = []string{r.Owner}
	}
	it.Group = group
	for _, id := range to {
		if person, err := p.Store.Principals.Principal(ctx, id); err == nil {
			it.For = append(it.For, person.Name)
		}
	}
	return pending{item: it, to: to}, nil
}

// shorten returns s cut to at most n runes, with an ellipsis when cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// controlItemID is the item id of the proposal staged on snap's control:
// the control and the proposal's revision.
func controlItemID(snap control.Snapshot) string {
	return fmt.Sprintf("%s@%d", snap.Identity.String(), snap.State.Staged.Revision)
}

package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/store"
)

// ReminderType is the type of a webhook that reminds of a decision whose
// deadline is near (a pending decision's is "decision.pending").
const ReminderType = "decision.reminder"

// remindBatch bounds the deadlines one look for reminders reads.
const remindBatch = 500

// reminder is the payload of a reminder's outbox message: the item, with
// the point before its deadline it reminds at.
type reminder struct {
	notify.Item
	// RemindBefore is the point, such as "10m0s"; empty in an announcement.
	RemindBefore string    `json:"remind_before,omitempty"`
	Deadline     time.Time `json:"deadline,omitzero"`
}

// reminderKey is the key of the reminder about the item key at the point
// before its deadline; a message's id derives from it, so each point is
// reminded of once per destination across nodes and restarts.
func reminderKey(itemKey string, before time.Duration) string {
	return itemKey + "@remind-" + before.String()
}

// due is a decision with a deadline ahead: its item's key, its deadline,
// and how to read it as a pending item (ok false when decided).
type due struct {
	key      string
	deadline time.Time
	item     func(ctx context.Context) (pending, bool, error)
}

// remind writes the reminders due now: for every decision whose deadline
// is ahead and within one of Deps.RemindBefore (command proposals, staged
// values and proposed programs, whose deadlines the store keeps; questions
// and Flow approvals, which carry theirs), a message to each destination about the
// nearest point passed. A decision whose deadline passed is left to its
// part, which ends it.
func (p *Part) remind(ctx context.Context) error {
	if len(p.RemindBefore) == 0 {
		return nil
	}
	now := p.Now().UTC()
	horizon := now.Add(slices.Max(p.RemindBefore))
	cands, err := p.dueSoon(ctx, now, horizon)
	if err != nil {
		return err
	}
	points := slices.Clone(p.RemindBefore)
	slices.Sort(points) // nearest first
	for _, d := range cands {
		var at time.Duration
		for _, pt := range points {
			if !now.Before(d.deadline.Add(-pt)) {
				at = pt
				break
			}
		}
		if at == 0 {
			continue
		}
		key := reminderKey(d.key, at)
		p.mu.Lock()
		done := p.reminded[key]
		p.mu.Unlock()
		if done {
			continue
		}
		it, ok, err := d.item(ctx)
		if err != nil {
			return err
		}
		if !ok {
			// Decided, or not stored yet (a program proposal's deadline is
			// written before the proposal): looked at again next pass.
			continue
		}
		if err := p.enqueueReminder(ctx, it, key, at, d.deadline, now); err != nil {
			return err
		}
		p.mu.Lock()
		p.reminded[key] = true
		p.mu.Unlock()
	}
	return nil
}

// dueSoon lists the decisions whose deadline is after now and at or
// before horizon.
func (p *Part) dueSoon(ctx context.Context, now, horizon time.Time) ([]due, error) {
	var out []due
	ahead := func(t time.Time) bool { return t.After(now) && !t.After(horizon) }
	if p.Store.Deadlines != nil {
		ds, err := p.Store.Deadlines.DueDeadlines(ctx, "", horizon, remindBatch)
		if err != nil {
			return nil, fmt.Errorf("deadlines: %w", err)
		}
		for _, d := range ds {
			if !ahead(d.Due) {
				continue
			}
			kind := notify.KindRunProposal
			switch d.Kind {
			case store.DeadlineControlProposal:
				kind = notify.KindControlProposal
			case store.DeadlineProgramProposal:
				kind = KindProgramProposal
			}
			out = append(out, due{key: kind + ":" + d.Item, deadline: d.Due,
				item: func(ctx context.Context) (pending, bool, error) { return p.deadlineItem(ctx, d) }})
		}
	}
	if p.Store.Asks != nil {
		asks, err := p.Store.Asks.OpenAsks(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("open questions: %w", err)
		}
		for _, a := range asks {
			if !ahead(a.Deadline) {
				continue
			}
			out = append(out, due{key: notify.KindQuestion + ":" + a.ID, deadline: a.Deadline,
				item: func(ctx context.Context) (pending, bool, error) {
					it, err := p.questionItem(ctx, a)
					return it, err == nil, err
				}})
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
		a := rec.Approval
		if !ahead(a.Deadline) {
			continue
		}
		out = append(out, due{key: notify.KindFlowApproval + ":" + a.ID, deadline: a.Deadline,
			item: func(ctx context.Context) (pending, bool, error) {
				it, err := p.approvalItem(ctx, a)
				return it, err == nil, err
			}})
	}
	return out, nil
}

// deadlineItem is the pending item a deadline belongs to; ok is false
// when it is no longer pending.
func (p *Part) deadlineItem(ctx context.Context, d store.DecisionDeadline) (pending, bool, error) {
	switch d.Kind {
	case store.DeadlineCommandProposal:
		pr, err := p.Store.Proposals.Proposal(ctx, d.Item)
		if errors.Is(err, store.ErrNotFound) || err == nil && pr.Status != store.ProposalPending {
			return pending{}, false, nil
		}
		if err != nil {
			return pending{}, false, err
		}
		it, err := p.proposalItem(ctx, pr)
		return it, err == nil, err
	case store.DeadlineProgramProposal:
		var l flow.ProgramLoad
		err := p.Store.Flows.View(ctx, func(tx flow.Tx) error {
			var err error
			l, err = tx.ProgramLoad(d.Item)
			return err
		})
		if errors.Is(err, flow.ErrNotFound) || err == nil && l.Status != flow.ProgramProposed {
			return pending{}, false, nil
		}
		if err != nil {
			return pending{}, false, err
		}
		it, err := p.programItem(ctx, l)
		return it, err == nil, err
	case store.DeadlineControlProposal:
		for _, snap := range p.Controls.Proposals(ctx, "") {
			if snap.State.Staged != nil && controlItemID(snap) == d.Item {
				it, err := p.controlItem(ctx, d.Item, snap)
				return it, err == nil, err
			}
		}
	}
	return pending{}, false, nil
}

// enqueueReminder writes the reminder about it, at the point before its
// deadline, to every webhook and by mail to the people it is routed to.
func (p *Part) enqueueReminder(ctx context.Context, it pending, key string, before time.Duration, deadline, now time.Time) error {
	hooks, err := p.Store.Notify.Webhooks(ctx)
	if err != nil {
		return err
	}
	then := "it is declined"
	switch it.item.Kind {
	case notify.KindControlProposal:
		then = "the value is discarded"
	case notify.KindQuestion, notify.KindFlowApproval:
		then = "it takes its fallback (see the card)"
	}
	r := reminder{Item: it.item, RemindBefore: before.String(), Deadline: deadline.UTC()}
	r.Title = shorten("Reminder: "+it.item.Title, 120)
	r.Summary = fmt.Sprintf("Decide by %s (within %s): if nobody decides, %s (\"no decision before the deadline\").\n\n%s",
		deadline.UTC().Format("2006-01-02 15:04 UTC"), before, then, it.item.Summary)
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var msgs []store.OutboxMessage
	add := func(channel string, due time.Time) {
		msgs = append(msgs, store.OutboxMessage{ID: messageID(key, channel), Channel: channel,
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
	if len(msgs) == 0 {
		return nil
	}
	if _, err := p.Store.Notify.EnqueueMessages(ctx, msgs); err != nil {
		return err
	}
	poke(p.send)
	return nil
}

// asReminder reports whether the payload of a message is a reminder.
func asReminder(payload []byte) bool { return reminderPoint(payload) != "" }

// reminderPoint is the point a reminder's payload reminds at, "" for an
// announcement.
func reminderPoint(payload []byte) string {
	var r struct {
		RemindBefore string `json:"remind_before"`
	}
	if json.Unmarshal(payload, &r) != nil {
		return ""
	}
	return r.RemindBefore
}

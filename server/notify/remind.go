package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

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

// remind writes the reminders due now: for every decision whose deadline
// is ahead and within one of Deps.RemindBefore, a message to each
// destination about the nearest point passed. A decision whose deadline
// passed is left to its part, which ends it.
func (p *Part) remind(ctx context.Context) error {
	if len(p.RemindBefore) == 0 || p.Store.Deadlines == nil {
		return nil
	}
	now := p.Now().UTC()
	due, err := p.Store.Deadlines.DueDeadlines(ctx, "", now.Add(slices.Max(p.RemindBefore)), remindBatch)
	if err != nil {
		return fmt.Errorf("deadlines: %w", err)
	}
	points := slices.Clone(p.RemindBefore)
	slices.Sort(points) // nearest first
	for _, d := range due {
		if !d.Due.After(now) {
			continue
		}
		var at time.Duration
		for _, pt := range points {
			if !now.Before(d.Due.Add(-pt)) {
				at = pt
				break
			}
		}
		if at == 0 {
			continue
		}
		key := reminderKey(d.Kind+":"+d.Item, at)
		p.mu.Lock()
		done := p.reminded[key]
		p.mu.Unlock()
		if done {
			continue
		}
		it, ok, err := p.deadlineItem(ctx, d)
		if err != nil {
			return err
		}
		if ok {
			if err := p.enqueueReminder(ctx, it, key, at, d.Due, now); err != nil {
				return err
			}
		}
		p.mu.Lock()
		p.reminded[key] = true
		p.mu.Unlock()
	}
	return nil
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
	if it.item.Kind == notify.KindControlProposal {
		then = "the value is discarded"
	}
	r := reminder{Item: it.item, RemindBefore: before.String(), Deadline: deadline.UTC()}
	r.Title = shorten("Reminder: "+it.item.Title, 120)
	r.Summary = fmt.Sprintf("Decide by %s (within %s): if nobody decides, %s with the reason \"no decision before the deadline\".\n\n%s",
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
func asReminder(payload []byte) bool {
	var r struct {
		RemindBefore string `json:"remind_before"`
	}
	return json.Unmarshal(payload, &r) == nil && r.RemindBefore != ""
}

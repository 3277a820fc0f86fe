package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/store"
)

// claimBatch is the most messages one claim takes; they are sent at once.
const claimBatch = 16

// deliverDue claims the messages due now and attempts each. It returns
// how many it claimed.
func (p *Part) deliverDue(ctx context.Context) (int, error) {
	msgs, err := p.Store.Notify.ClaimMessages(ctx, p.Node, p.Now(), lease, claimBatch)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Go(func() { p.attempt(ctx, m) })
	}
	wg.Wait()
	return len(msgs), nil
}

// permanent marks an error no retry can fix (a removed webhook, a person
// without an address): the message goes to the dead letters at once.
type permanent struct{ error }

func (p *Part) attempt(ctx context.Context, m store.OutboxMessage) {
	var it notify.Item
	err := json.Unmarshal(m.Payload, &it)
	if err != nil {
		err = permanent{fmt.Errorf("damaged message: %w", err)}
	} else if p.decided(ctx, it) {
		// Nobody needs to hear of a decision already made.
		p.finish(ctx, m, store.Attempt{ID: m.ID, Node: p.Node, At: p.Now().UTC(), Delivered: true, Error: "not sent: decided before delivery"})
		return
	} else {
		kind, dest, _ := strings.Cut(m.Channel, ":")
		switch kind {
		case "webhook":
			err = p.sendWebhook(ctx, m, dest, it)
		case "mail":
			if pt := reminderPoint(m.Payload); pt != "" {
				// A reminder's Message-ID is its own, so no mail client
				// takes it for the first message again.
				it.ID += ".remind-" + pt
			}
			err = p.sendMail(ctx, dest, it)
		default:
			err = permanent{fmt.Errorf("unknown channel %q", m.Channel)}
		}
	}
	if ctx.Err() != nil {
		// Closing: the lease ends and the message is tried again.
		return
	}
	a := store.Attempt{ID: m.ID, Node: p.Node, At: p.Now().UTC(), Delivered: err == nil}
	if err != nil {
		a.Error = err.Error()
		var perm permanent
		if wait, ok := notify.NextAttempt(m.Attempts); ok && !errors.As(err, &perm) {
			a.Retry = a.At.Add(wait)
		}
		p.Log.Warn("notify: delivery failed", "message", describe(m), "attempt", m.Attempts, "err", err, "dead", a.Retry.IsZero())
	}
	p.finish(ctx, m, a)
}

func (p *Part) finish(ctx context.Context, m store.OutboxMessage, a store.Attempt) {
	if err := p.Store.Notify.FinishAttempt(ctx, a); err != nil {
		p.Log.Warn("notify: recording an attempt", "message", describe(m), "err", err)
	}
}

// decided reports whether it is no longer pending. When that cannot be
// read, it is taken as pending: a message too many is better than none.
func (p *Part) decided(ctx context.Context, it notify.Item) bool {
	switch it.Kind {
	case notify.KindRunProposal:
		pr, err := p.Store.Proposals.Proposal(ctx, it.ID)
		return errors.Is(err, store.ErrNotFound) || err == nil && pr.Status != store.ProposalPending
	case notify.KindFlowApproval:
		var status flow.ApprovalStatus
		err := p.Store.Flows.View(ctx, func(tx flow.Tx) error {
			rec, err := tx.Approval(it.ID)
			status = rec.Approval.Status
			return err
		})
		return flow.ErrorCode(err) == flow.CodeNotFound || err == nil && status != flow.ApprovalPending
	case KindProgramProposal:
		var status flow.ProgramStatus
		err := p.Store.Flows.View(ctx, func(tx flow.Tx) error {
			l, err := tx.ProgramLoad(it.ID)
			status = l.Status
			return err
		})
		return flow.ErrorCode(err) == flow.CodeNotFound || err == nil && status != flow.ProgramProposed
	case notify.KindControlProposal:
		for _, snap := range p.Controls.Proposals(ctx, "") {
			if snap.State.Staged != nil && controlItemID(snap) == it.ID {
				return false
			}
		}
		return true
	case notify.KindQuestion:
		if p.Store.Asks == nil {
			return false
		}
		a, err := p.Store.Asks.Ask(ctx, it.ID)
		return errors.Is(err, store.ErrNotFound) || err == nil && a.State != store.AskOpen
	}
	return false
}

// sendWebhook posts the message, signed, to the webhook id. Any 2xx
// answer delivers it.
func (p *Part) sendWebhook(ctx context.Context, m store.OutboxMessage, id string, it notify.Item) error {
	hooks, err := p.Store.Notify.Webhooks(ctx)
	if err != nil {
		return err
	}
	var hook *store.Webhook
	for i := range hooks {
		if hooks[i].ID == id {
			hook = &hooks[i]
		}
	}
	if hook == nil {
		return permanent{fmt.Errorf("webhook %s was removed", id)}
	}
	key, err := notify.ParseSecret(hook.Secret)
	if err != nil {
		return permanent{fmt.Errorf("webhook %s: %w", id, err)}
	}
	now := p.Now()
	body, err := notify.WebhookBody(m.ID, it, now)
	if err != nil {
		return permanent{err}
	}
	if asReminder(m.Payload) {
		var pl notify.Payload
		if err := json.Unmarshal(body, &pl); err != nil {
			return permanent{err}
		}
		pl.Type = ReminderType
		if body, err = json.Marshal(pl); err != nil {
			return permanent{err}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return permanent{fmt.Errorf("webhook %s: %w", id, err)}
	}
	notify.SetHeaders(req.Header, key, m.ID, now, body)
	req.Header.Set("User-Agent", "assent-webhook")
	resp, err := p.client.Do(req)
	if err != nil {
		// A webhook URL may itself be a secret (a chat's incoming
		// webhook): the error names the webhook by id, not by URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook %s: %w", id, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook %s answered %s", id, resp.Status)
	}
	return nil
}

// Package asks is the part of the server where an agent asks a person a
// question: yes or no, one of a few options, or a short text. The agent
// files it with the MCP tool approvals_request; the people who oversee the
// agent answer it on a card in the inbox (or through /v1/inbox), and the
// agent learns the answer through inbox_wait. A question may carry a
// deadline, after which it takes the fallback it declared; a sweeper in
// the part ends it then, once across every node sharing the store.
package asks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Kind is the inbox kind of a question's card, and the key of its count.
const Kind = "question"

// IDPrefix starts the id of every question.
const IDPrefix = "ask_"

// Event types the part publishes, owned by the asking agent.
const (
	EventAsked   = "question.asked"
	EventDecided = "question.decided"
)

// sweepBatch bounds the questions one sweep ends.
const sweepBatch = 100

// Part serves agents' questions to people.
type Part struct {
	Deps
	limits Limits

	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// New builds the part, registers approvals_request, and starts the
// sweeper that ends questions past their deadline (at once, for those
// that passed it while no node ran).
func New(ctx context.Context, d Deps) (*Part, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if d.Config.Sweep <= 0 {
		d.Config.Sweep = DefaultSweep
	}
	s := &Part{Deps: d, limits: d.Config.Limits.withDefaults(), done: make(chan struct{})}
	if err := s.Tools.Register(s.requestTool()); err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	go s.sweeper(sctx)
	return s, nil
}

// Name names the part.
func (s *Part) Name() string { return "asks" }

// Routes adds nothing: questions are answered through the inbox.
func (s *Part) Routes(*host.Mux) {}

// Close stops the sweeper and waits for it to end.
func (s *Part) Close() {
	s.once.Do(func() {
		s.stop()
		<-s.done
	})
}

// Limits returns the bounds on what an agent asks.
func (s *Part) Limits() Limits { return s.limits }

// sweeper ends the questions whose deadline passed, every Config.Sweep.
func (s *Part) sweeper(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.Config.Sweep)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("questions past their deadline could not be ended; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep ends every open question whose deadline has passed with its
// fallback, and returns how many it ended. A question a person decided
// meanwhile, or another node ended first, is left as it is: the store's
// compare-and-set decides.
func (s *Part) Sweep(ctx context.Context) (int, error) {
	n := 0
	for {
		now := s.Now()
		due, err := s.Asks.DueAsks(ctx, now, sweepBatch)
		if err != nil {
			return n, err
		}
		for _, a := range due {
			d := store.AskDecision{State: store.AskExpired, Answer: fallbackAnswer(a), Note: NoDecision, At: now}
			got, err := s.Asks.DecideAsk(ctx, a.ID, d)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return n, err
			}
			n++
			s.audit(ctx, got.Asker, "deadline", "question.expire", got)
			s.publish(EventDecided, got)
		}
		if len(due) < sweepBatch {
			return n, nil
		}
	}
}

// publish tells the asker and its supervisors that a changed.
func (s *Part) publish(typ string, a store.Ask) {
	b, _ := json.Marshal(map[string]string{"id": a.ID, "state": a.State})
	s.Bus.Publish(s.Gate.OwnedEvent(typ, a.Asker, b))
}

// Ask files r as p's question and returns it.
func (s *Part) Ask(ctx context.Context, p store.Principal, r Request) (store.Ask, error) {
	if d := s.Config.DefaultDeadline; r.DeadlineSeconds == nil && r.Fallback == "" && d >= s.limits.MinDeadline && d <= s.limits.MaxDeadline {
		// The operator's default deadline, which declines.
		secs := int64(d / time.Second)
		r.DeadlineSeconds = &secs
	}
	a, err := newAsk(r, s.limits)
	if err != nil {
		return a, err
	}
	if a.Group != "" {
		members, err := s.Groups.GroupMembers(ctx, a.Group)
		if err != nil {
			return a, fmt.Errorf("asks: read group %s: %w", a.Group, err)
		}
		if len(members) == 0 {
			return a, invalid("the workspace has no group %q; name a group with members, or leave group out to ask your supervisors", a.Group)
		}
		if len(members) < People(a) {
			return a, invalid("group %s has %d members, fewer than the %d people the quorum needs; ask for fewer people or another group", a.Group, len(members), People(a))
		}
	}
	now := s.Now().UTC()
	a.ID, a.Asker, a.CreatedAt = auth.NewID(IDPrefix), p.ID, now
	if r.DeadlineSeconds != nil {
		a.Deadline = now.Add(time.Duration(*r.DeadlineSeconds) * time.Second)
	}
	switch err := s.Asks.CreateAsk(ctx, a, s.limits.OpenPerAsker); {
	case errors.Is(err, store.ErrTooManyAsks):
		return a, tooLong("you have %d questions waiting for a person, the most at once; wait for their answers with inbox_wait before asking more", s.limits.OpenPerAsker)
	case err != nil:
		return a, fmt.Errorf("asks: file question: %w", err)
	}
	s.audit(ctx, p.ID, "agent", "question.ask", a)
	s.publish(EventAsked, a)
	return a, nil
}

// audit records action on a by the principal id; a failure to record is
// logged, since the question itself is kept.
func (s *Part) audit(ctx context.Context, id, source, action string, a store.Ask) {
	d := map[string]any{"question": a.ID, "state": a.State, "answer": a.Answer}
	if a.Quorum > 1 {
		d["quorum"], d["answers"] = a.Quorum, a.Answers
	}
	detail, _ := json.Marshal(d)
	rec := store.AuditRecord{Time: s.Now().UTC(), PrincipalID: id, Source: source, Subject: itemKey(a.ID), Action: action, OK: true, Detail: string(detail)}
	if _, err := s.Audit.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		s.Log.Error("audit question", "question", a.ID, "action", action, "err", err)
	}
}

// URL returns the address of a's card in the inbox.
func (s *Part) URL(a store.Ask) string {
	d := host.Decision{Key: itemKey(a.ID)}
	return strings.TrimRight(s.Config.BaseURL, "/") + "/inbox#" + d.Anchor()
}

func itemKey(id string) string { return Kind + ":" + id }

// binding names what a's card shows: a change to any of it makes an
// answer sent for the older card stale.
func binding(a store.Ask) string {
	h := sha256.New()
	for _, s := range append([]string{a.Kind, a.Question, a.Reason, a.Fallback, a.Deadline.UTC().Format(time.RFC3339)}, a.Options...) {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	if a.Group != "" {
		fmt.Fprintf(h, "group:%d:%s;", len(a.Group), a.Group)
	}
	if a.Quorum > 1 {
		fmt.Fprintf(h, "quorum:%d;", a.Quorum)
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// ItemID returns the inbox id of a's card, under which people's notes on
// it are kept.
func ItemID(a store.Ask) string { return itemKey(a.ID) + "@" + binding(a) }

// errNotFound answers a question that does not exist or is not the
// caller's to see; the two are the same.
func errNotFound(id string) *tool.Error {
	return tool.Errorf("not_found", "no question %q is visible to you; pass the approval id approvals_request gave you", id)
}

// Visible returns the question id when p may see it: the agent that
// asked, or a person who oversees that agent.
func (s *Part) Visible(ctx context.Context, p store.Principal, id string) (store.Ask, error) {
	if !strings.HasPrefix(id, IDPrefix) || len(id) > 80 {
		return store.Ask{}, errNotFound(id)
	}
	a, err := s.Asks.Ask(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.mayRead(ctx, p, a)) {
		return store.Ask{}, errNotFound(id)
	}
	if err != nil {
		return store.Ask{}, fmt.Errorf("asks: read question: %w", err)
	}
	return a, nil
}

// mayRead reports whether p may see a: the agent that asked, a person
// who oversees it, or, for a question asked of a group, a person it is
// routed to.
func (s *Part) mayRead(ctx context.Context, p store.Principal, a store.Ask) bool {
	if s.Gate.Oversees(ctx, p, a.Asker) {
		return true
	}
	return a.Group != "" && p.Kind == store.KindHuman && s.Gate.Routed(ctx, p, a.Asker, a.Group) == nil
}

// Decision is a person's decision on a question.
type Decision struct {
	// Approve answers the question with Answer (the JSON value of
	// values.answer; nil for a yes_no question's yes); otherwise the
	// person declines to answer.
	Approve bool
	Answer  json.RawMessage
	// Note is the person's note with a decline, its reason.
	Note string
}

// Decide carries out p's decision on the open question a, as p's card
// showed it. Of concurrent decisions one wins; the others are refused
// conflict, naming who decided.
func (s *Part) Decide(ctx context.Context, p store.Principal, a store.Ask, d Decision) (store.Ask, error) {
	if p.Kind != store.KindHuman || !s.mayRead(ctx, p, a) {
		return a, errNotFound(a.ID)
	}
	if a.Group != "" {
		// A supervisor outside the group sees the question but may not
		// decide it.
		if err := s.Gate.Routed(ctx, p, a.Asker, a.Group); err != nil {
			return a, err
		}
	}
	dec := store.AskDecision{State: store.AskDeclined, DecidedBy: p.ID, At: s.Now().UTC()}
	if d.Approve {
		ans, err := answerOf(a, d.Answer, s.limits.AnswerBytes)
		if err != nil {
			return a, err
		}
		if People(a) > 1 {
			got, err := s.answerQuorum(ctx, p, a.ID, ans)
			if err != nil {
				return got, err
			}
			s.audit(ctx, p.ID, "user", "question.answer", got)
			if got.State != store.AskOpen {
				s.audit(ctx, p.ID, "user", "question.decide", got)
			}
			s.publish(EventDecided, got)
			return got, nil
		}
		dec.State, dec.Answer = store.AskAnswered, ans
	} else {
		dec.Note = strings.TrimSpace(d.Note)
	}
	got, err := s.Asks.DecideAsk(ctx, a.ID, dec)
	switch {
	case errors.Is(err, store.ErrConflict):
		return got, tool.Errorf("conflict", "this question was decided already: %s; read the inbox again", s.describe(ctx, got))
	case errors.Is(err, store.ErrNotFound):
		return got, errNotFound(a.ID)
	case err != nil:
		return got, fmt.Errorf("asks: decide question: %w", err)
	}
	s.audit(ctx, p.ID, "user", "question.decide", got)
	s.publish(EventDecided, got)
	return got, nil
}

// describe says in a sentence how a ended.
func (s *Part) describe(ctx context.Context, a store.Ask) string {
	who := host.NameOr(s.Gate.PrincipalNames(ctx), a.DecidedBy)
	switch a.State {
	case store.AskAnswered:
		return fmt.Sprintf("%s answered %q", who, a.Answer)
	case store.AskDeclined:
		return who + " declined to answer"
	case store.AskExpired:
		if a.Answer != "" {
			return fmt.Sprintf("%s, so the fallback answer %q was taken", NoDecision, a.Answer)
		}
		return NoDecision + ", so it was declined"
	}
	return "it is still open"
}

// Outcome is what became of a question, as inbox_wait reports it.
type Outcome struct {
	// Status is pending, answered or declined.
	Status    string
	Answer    string
	DecidedBy string
	Reason    string
	Next      string
	// ItemID is the question's inbox id, under which notes are kept.
	ItemID string
}

// Outcome reports the question id to p, the agent that asked or a person
// overseeing it; a question p may not see is not_found.
func (s *Part) Outcome(ctx context.Context, p store.Principal, id string) (Outcome, error) {
	a, err := s.Visible(ctx, p, id)
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{DecidedBy: a.DecidedBy, Answer: a.Answer, ItemID: ItemID(a)}
	switch a.State {
	case store.AskOpen:
		o.Status, o.Next = "pending", "a person answers in the web inbox at "+s.URL(a)
		if People(a) > 1 {
			o.Next = fmt.Sprintf("%d different people must answer the same in the web inbox at %s; %d answered so far, %s needed", People(a), s.URL(a), len(a.Answers), morePeople(Needs(a)))
		}
		if !a.Deadline.IsZero() {
			o.Next += "; if nobody does by " + a.Deadline.UTC().Format(time.RFC3339) + ", the fallback " + a.Fallback + " is taken"
		}
	case store.AskAnswered:
		o.Status, o.Reason = "answered", a.Note
		if People(a) > 1 && a.Note == "" {
			o.Reason = fmt.Sprintf("%d people answered", len(a.Answers))
		}
	case store.AskDeclined:
		o.Status, o.Reason = "declined", a.Note
		o.Next = "a person declined to answer; go on without it, or ask again only if something changed"
	case store.AskExpired:
		o.Status, o.Reason = "declined", NoDecision
		if a.Answer != "" {
			o.Status, o.Reason = "answered", NoDecision+"; the fallback answer was taken"
		}
	}
	return o, nil
}

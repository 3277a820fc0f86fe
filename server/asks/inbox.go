package asks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// decideURL is the inbox page's own decision form, which takes the card's
// id, the decision, the answer as value:answer and a note.
const decideURL = "/inbox/decide"

// Inbox returns, for a person, the open questions of the agents they
// oversee and those asked of a group they are in, oldest first. The host
// then keeps only the cards routed to the person.
func (s *Part) Inbox(ctx context.Context, p store.Principal) ([]host.InboxSection, error) {
	if p.Kind != store.KindHuman {
		return nil, nil
	}
	open, err := s.Asks.OpenAsks(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("asks: open questions: %w", err)
	}
	sec := host.InboxSection{ID: "questions", Title: "Questions from agents", Empty: "No agent waits for your answer."}
	var names map[string]string
	for _, a := range open {
		if !s.mayRead(ctx, p, a) {
			continue
		}
		if names == nil {
			names = s.Gate.PrincipalNames(ctx)
		}
		sec.Items = append(sec.Items, s.card(a, names, p))
	}
	if len(sec.Items) == 0 {
		return nil, nil
	}
	return []host.InboxSection{sec}, nil
}

// CountOpen counts the open questions routed to p (the inbox cards), or,
// for an agent, the ones it asked.
func (s *Part) CountOpen(ctx context.Context, p store.Principal) map[string]int {
	const kind = "questions"
	asker := ""
	if p.Kind != store.KindHuman {
		asker = p.ID
	}
	open, err := s.Asks.OpenAsks(ctx, asker)
	if err != nil {
		return map[string]int{kind: 0}
	}
	if asker != "" {
		return map[string]int{kind: len(open)}
	}
	var filed []host.Filed
	for _, a := range open {
		if s.mayRead(ctx, p, a) {
			filed = append(filed, host.Filed{By: a.Asker, Group: a.Group})
		}
	}
	return map[string]int{kind: s.Gate.CountRouted(ctx, p, filed)}
}

// kindWords says how a question is answered.
var kindWords = map[string]string{
	store.AskYesNo:  "Yes or no",
	store.AskChoice: "One of the options",
	store.AskText:   "A short text",
}

// card is a's inbox card: the question as the agent wrote it (the page
// shows hidden characters as escapes), its reason and deadline, and one
// button per answer.
func (s *Part) card(a store.Ask, names map[string]string, p store.Principal) host.InboxItem {
	asker := host.NameOr(names, a.Asker)
	it := host.InboxItem{
		Title:   "Question from " + asker,
		Summary: a.Question,
		Fields: []host.InboxField{
			{Label: "Asked by", Value: asker},
			{Label: "Answer", Value: kindWords[a.Kind]},
		},
		Details: []host.InboxField{{Label: "Question id", Value: a.ID}},
	}
	if a.Reason != "" {
		it.Fields = append(it.Fields, host.InboxField{Label: "Why the agent asks", Value: a.Reason})
	}
	it.Fields = append(it.Fields, host.InboxTime("Asked", a.CreatedAt))
	if !a.Deadline.IsZero() {
		it.Fields = append(it.Fields, host.InboxTime("Answer by", a.Deadline),
			host.InboxField{Label: "If nobody answers by then", Value: fallbackWords(a)})
	}
	it.Note = "Your answer goes to the agent as you give it; the agent decides what to do with it."
	d := s.decision(a)
	it.Decision = d
	answered := a.AnsweredBy(p.ID)
	if People(a) > 1 {
		it.Fields = append(it.Fields, host.InboxField{Label: "Answers", Value: answersWords(a, names)})
		it.Note = fmt.Sprintf("This question needs %d different people; each person answers once.", People(a))
		if a.Kind == store.AskYesNo {
			it.Note += fmt.Sprintf(" %d yes answers make yes; one no makes no at once.", People(a))
		} else {
			it.Note += fmt.Sprintf(" The first answer %d people give is the answer the agent gets.", People(a))
		}
		d.Needs, d.AlreadyApproved = Needs(a), answered
		if answered {
			it.Note = fmt.Sprintf("You answered this. It needs %s; someone else must answer. You can still decline it.", morePeople(Needs(a)))
		}
	}
	id := d.ID()
	answer := func(label, value string, primary bool) host.InboxAction {
		return host.InboxAction{Label: label, URL: decideURL, Primary: primary,
			Values: map[string]string{"id": id, "decision": "approve", "value:answer": value}}
	}
	switch a.Kind {
	case store.AskYesNo:
		it.Actions = append(it.Actions, answer("Yes", Yes, true), answer("No", No, false))
	case store.AskChoice:
		for i, o := range a.Options {
			it.Actions = append(it.Actions, answer(host.RevealText(o), o, i == 0))
		}
	case store.AskText:
		it.Actions = append(it.Actions, host.InboxAction{Label: "Send answer", URL: decideURL, Primary: true,
			Values: map[string]string{"id": id, "decision": "approve"}, Input: "value:answer", InputLabel: "Your answer"})
	}
	if answered {
		it.Actions = nil
	}
	it.Actions = append(it.Actions, host.InboxAction{Label: "Decline to answer", URL: decideURL, Danger: true,
		Values: map[string]string{"id": id, "decision": "decline"}, Input: "note", InputLabel: "Reason (optional)"})
	return it
}

// fallbackWords says what a's deadline does.
func fallbackWords(a store.Ask) string {
	if ans := fallbackAnswer(a); ans != "" {
		return fmt.Sprintf("The answer %q is given for you", ans)
	}
	return "The question is declined"
}

// decision makes a's card decidable through /v1/inbox and the card's
// buttons: approve with values.answer answers, decline declines with the
// note as the reason. The binding covers everything the card shows of
// the question.
func (s *Part) decision(a store.Ask) *host.Decision {
	bound := map[string]string{"approval": a.ID, "question": a.Question, "answer": a.Kind}
	if len(a.Options) > 0 {
		b, _ := json.Marshal(a.Options)
		bound["options"] = string(b)
	}
	if a.Reason != "" {
		bound["reason"] = a.Reason
	}
	if a.Group != "" {
		bound["group"] = a.Group
	}
	if a.Quorum > 1 {
		bound["quorum"] = fmt.Sprint(a.Quorum)
	}
	if !a.Deadline.IsZero() {
		bound["deadline"] = a.Deadline.UTC().Format("2006-01-02T15:04:05Z")
		bound["fallback"] = a.Fallback
	}
	edit := host.EditField{Name: "answer", Label: "Answer", Kind: "text"}
	switch a.Kind {
	case store.AskYesNo:
		edit.Kind, edit.Value = "select", Yes
		edit.Options = []host.EditOption{{Value: Yes, Label: "Yes"}, {Value: No, Label: "No"}}
	case store.AskChoice:
		edit.Kind, edit.Value = "select", a.Options[0]
		for _, o := range a.Options {
			edit.Options = append(edit.Options, host.EditOption{Value: o, Label: o})
		}
	}
	return &host.Decision{
		Key: itemKey(a.ID), Binding: binding(a), Kind: Kind, Bound: bound, ProposedBy: a.Asker, Group: a.Group, DeclineNote: true,
		Edits: []host.EditField{edit},
		Decide: func(ctx context.Context, p store.Principal, d host.DecideArgs) (string, error) {
			got, err := s.Decide(ctx, p, a, Decision{Approve: d.Approve, Answer: d.Values["answer"], Note: d.Note})
			if err != nil {
				return "", err
			}
			if got.State == store.AskOpen {
				return fmt.Sprintf("Your answer is recorded; the question needs %s before the agent is told.", morePeople(Needs(got))), nil
			}
			if got.State == store.AskAnswered {
				return fmt.Sprintf("Answered %q; the agent is told.", strings.TrimSpace(got.Answer)), nil
			}
			return "Declined to answer; the agent is told.", nil
		},
	}
}

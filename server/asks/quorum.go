package asks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// The rule of a question that needs several people (its Quorum, M):
//
//   - yes_no: M different people answering yes make the answer yes; any
//     person answering no makes it no at once (four eyes: one objection
//     is enough to refuse).
//   - choice and text: the first answer that M different people gave,
//     exactly (a text trimmed of spaces at its ends), is the answer. Until
//     then the question stays open, however many people answered.
//
// Each person answers once (a second answer is refused already_answered),
// any one person may decline it, and its deadline and fallback act as for
// a question of one person.

// People returns how many different people must answer a: its quorum, at
// least 1.
func People(a store.Ask) int { return max(a.Quorum, 1) }

// Needs returns how many more people must give the leading answer of the
// open question a: for yes_no, yes answers; for choice and text, the
// answer most people gave so far. 0 once a is not open.
func Needs(a store.Ask) int {
	if a.State != store.AskOpen {
		return 0
	}
	best := 0
	count := map[string]int{}
	for _, v := range a.Answers {
		if a.Kind == store.AskYesNo && v.Answer != Yes {
			continue
		}
		count[v.Answer]++
		best = max(best, count[v.Answer])
	}
	return max(People(a)-best, 0)
}

// Resolve says how the answers settle a question needing People(a): the
// decision that ends it, or nil while it waits for more people. The last
// answer is the one just given, which decides when it does.
func Resolve(a store.Ask, answers []store.AskAnswer) *store.AskDecision {
	if len(answers) == 0 {
		return nil
	}
	last := answers[len(answers)-1]
	end := &store.AskDecision{State: store.AskAnswered, Answer: last.Answer, DecidedBy: last.Person, At: last.At}
	if a.Kind == store.AskYesNo && last.Answer == No {
		end.Note = "one person answered no, which is enough"
		return end
	}
	n := 0
	for _, v := range answers {
		if v.Answer == last.Answer {
			n++
		}
	}
	if n < People(a) {
		return nil
	}
	end.Note = fmt.Sprintf("%d people answered %q", n, last.Answer)
	return end
}

// errAlreadyAnswered refuses a second answer of the same person.
func errAlreadyAnswered(a store.Ask, person string) error {
	mine := ""
	for _, v := range a.Answers {
		if v.Person == person {
			mine = v.Answer
		}
	}
	return tool.Errorf("already_answered", "you already answered %q; one person counts once, so this question needs %s other than you (or decline it)", mine, morePeople(Needs(a)))
}

// morePeople is "1 more person" or "n more people".
func morePeople(n int) string {
	if n == 1 {
		return "1 more person"
	}
	return fmt.Sprintf("%d more people", n)
}

// maxAnswerRetries bounds how often one answer is tried again after
// another person's answer was stored first.
const maxAnswerRetries = 64

// answerQuorum records p's answer ans to the open question id that needs
// several people, and ends it when the rule says so. Concurrent answers
// are serialized by the store's compare-and-set on the number of answers:
// an answer that lost is read again and retried, so each person's answer
// is counted once.
func (s *Part) answerQuorum(ctx context.Context, p store.Principal, id, ans string) (store.Ask, error) {
	for range maxAnswerRetries {
		cur, err := s.Asks.Ask(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return cur, errNotFound(id)
		case err != nil:
			return cur, fmt.Errorf("asks: read question: %w", err)
		case cur.State != store.AskOpen:
			return cur, tool.Errorf("conflict", "this question was decided already: %s; read the inbox again", s.describe(ctx, cur))
		case cur.AnsweredBy(p.ID):
			return cur, errAlreadyAnswered(cur, p.ID)
		}
		answers := append(slices.Clone(cur.Answers), store.AskAnswer{Person: p.ID, Answer: ans, At: s.Now().UTC()})
		got, err := s.Asks.AddAskAnswer(ctx, id, answers, Resolve(cur, answers))
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return got, fmt.Errorf("asks: answer question: %w", err)
		}
		return got, nil
	}
	return store.Ask{}, tool.Errorf("conflict", "many people answered this question at once and yours could not be recorded; send it again")
}

// answersWords says who answered a and how many more are needed, as the
// card shows it: "Ada: yes, Ben: yes · needs 1 more person".
func answersWords(a store.Ask, names map[string]string) string {
	var by []string
	for _, v := range a.Answers {
		by = append(by, host.NameOr(names, v.Person)+": "+host.RevealText(v.Answer))
	}
	line := fmt.Sprintf("Needs %d different people to answer the same", People(a))
	if a.Kind == store.AskYesNo {
		line = fmt.Sprintf("Needs %d different people to answer yes; one no is enough to refuse", People(a))
	}
	if len(by) > 0 {
		line = "Answered by " + strings.Join(by, ", ") + " · needs " + morePeople(Needs(a))
	}
	return line
}

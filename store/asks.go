package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// States of an agent's question to a person.
const (
	AskOpen     = "open"     // waiting for a person
	AskAnswered = "answered" // a person answered
	AskDeclined = "declined" // a person declined to answer
	AskExpired  = "expired"  // the deadline passed first; the fallback was taken
)

// Kinds of answer a question takes.
const (
	AskYesNo  = "yes_no" // yes or no
	AskChoice = "choice" // one of the question's options
	AskText   = "text"   // a short text
)

// ErrTooManyAsks is returned by CreateAsk when the asker already has as
// many open questions as it may.
var ErrTooManyAsks = errors.New("store: too many open questions")

// Ask is an agent's question to a person: asked once, decided once.
type Ask struct {
	ID string
	// Asker is the principal id of the agent that asked.
	Asker    string
	Question string
	// Options are the choices of a choice question, in the order shown.
	Options []string
	// Kind is AskYesNo, AskChoice or AskText.
	Kind string
	// Reason is why the agent asks, shown on the card.
	Reason string
	// Group, when set, names the group of people the question is asked
	// of instead of the asker's supervisors.
	Group     string
	CreatedAt time.Time
	// Deadline, when not zero, is when the question takes its Fallback
	// if no person decided it.
	Deadline time.Time
	// Fallback is the outcome at the deadline: "decline", "approve" (a
	// yes_no question's yes) or one of Options.
	Fallback string
	// State is AskOpen, AskAnswered, AskDeclined or AskExpired.
	State string
	// Answer is the answer given: "yes" or "no", an option, or the text;
	// empty while open, when declined, and when expired to a decline.
	Answer string
	// DecidedBy is the person who decided; empty while open and when the
	// deadline decided.
	DecidedBy string
	// Note is the person's note with the decision, or why the deadline
	// decided.
	Note      string
	DecidedAt time.Time
	// Quorum is how many distinct people must give the same answer
	// before it is the question's (0 or 1: the first person's answer is).
	Quorum int
	// Answers are the answers people gave to a question with a quorum,
	// oldest first, one a person.
	Answers []AskAnswer
}

// AskAnswer is one person's answer to a question with a quorum.
type AskAnswer struct {
	Person string    `json:"person"`
	Answer string    `json:"answer"`
	At     time.Time `json:"at"`
}

// MaxAskQuorum is the most people a question may need.
const MaxAskQuorum = 16

// AnsweredBy reports whether person is among a's answers.
func (a Ask) AnsweredBy(person string) bool {
	for _, v := range a.Answers {
		if v.Person == person {
			return true
		}
	}
	return false
}

// AskDecision is how an open question ends.
type AskDecision struct {
	// State is AskAnswered, AskDeclined or AskExpired.
	State     string
	Answer    string
	DecidedBy string
	Note      string
	At        time.Time
}

// Asks keeps agents' questions to people.
type Asks interface {
	// CreateAsk stores a, which must be open, unless its asker already
	// has maxOpen open questions (ErrTooManyAsks; maxOpen 0 bounds
	// nothing). The count and the insert are one transaction, so
	// concurrent askers never pass the bound. An existing id gives
	// ErrConflict. The same transaction records that the question waits
	// to be announced (see AsksToAnnounce): a stored question is always
	// announced, and a refused one never.
	CreateAsk(ctx context.Context, a Ask, maxOpen int) error
	// Ask returns the question id, or ErrNotFound.
	Ask(ctx context.Context, id string) (Ask, error)
	// OpenAsks returns the open questions, oldest first: those of asker,
	// or everyone's when asker is "".
	OpenAsks(ctx context.Context, asker string) ([]Ask, error)
	// DecideAsk ends the open question id as d says, in one conditional
	// write: of concurrent decisions exactly one succeeds. A question
	// decided before is returned as it stands, with ErrConflict, so that
	// the caller can say who decided it; an unknown id gives ErrNotFound.
	DecideAsk(ctx context.Context, id string, d AskDecision) (Ask, error)
	// AddAskAnswer records one more person's answer to the open question
	// id: answers is the question's answers with the new one last. It
	// writes only when the stored question is open and has exactly
	// len(answers)-1 answers, so of concurrent answers read from the same
	// state exactly one is kept; otherwise it returns the question as it
	// stands with ErrConflict (read again and retry). end, when not nil,
	// ends the question in the same write (its quorum is met). An unknown
	// id gives ErrNotFound; answers that are empty, or hold one person
	// twice, give ErrInvalid.
	AddAskAnswer(ctx context.Context, id string, answers []AskAnswer, end *AskDecision) (Ask, error)
	// DueAsks returns at most limit open questions whose deadline is at
	// or before now, earliest first.
	DueAsks(ctx context.Context, now time.Time, limit int) ([]Ask, error)
	// AsksToAnnounce returns at most limit questions that CreateAsk
	// recorded as waiting to be announced and that no AnnouncedAsks has
	// cleared since, oldest first, whatever their state now.
	AsksToAnnounce(ctx context.Context, limit int) ([]Ask, error)
	// AnnouncedAsks clears the questions ids from those waiting to be
	// announced; an id not waiting is ignored.
	AnnouncedAsks(ctx context.Context, ids []string) error
}

// ValidAskDecision reports whether d may end an open question: a final
// state and, for an answer, a non-empty Answer.
func ValidAskDecision(d AskDecision) bool {
	switch d.State {
	case AskAnswered:
		return d.Answer != ""
	case AskDeclined:
		return d.Answer == ""
	case AskExpired:
		return true
	}
	return false
}

// Check reports whether a may be stored as a new question: an id, an
// asker, a question, a known kind, options only for a choice, and the
// open state. The error wraps ErrInvalid.
func (a Ask) Check() error {
	switch {
	case a.ID == "" || a.Asker == "" || a.Question == "":
		return fmt.Errorf("%w: a question needs an id, an asker and its text", ErrInvalid)
	case a.Kind != AskYesNo && a.Kind != AskChoice && a.Kind != AskText:
		return fmt.Errorf("%w: question kind %q is not one of yes_no, choice, text", ErrInvalid, a.Kind)
	case (a.Kind == AskChoice) != (len(a.Options) > 0):
		return fmt.Errorf("%w: a choice question, and only one, has options", ErrInvalid)
	case a.State != AskOpen:
		return fmt.Errorf("%w: a new question is open, not %q", ErrInvalid, a.State)
	case a.Quorum < 0 || a.Quorum > MaxAskQuorum:
		return fmt.Errorf("%w: a question needs 1 to %d people, not %d", ErrInvalid, MaxAskQuorum, a.Quorum)
	case len(a.Answers) > 0:
		return fmt.Errorf("%w: a new question has no answers", ErrInvalid)
	}
	if a.Group != "" {
		return CheckGroupName(a.Group)
	}
	return nil
}

// CheckAskAnswers reports whether answers may be stored by AddAskAnswer:
// at least one, each with a person and an answer, no person twice, at
// most MaxAskQuorum. The error wraps ErrInvalid.
func CheckAskAnswers(answers []AskAnswer) error {
	if len(answers) == 0 || len(answers) > MaxAskQuorum {
		return fmt.Errorf("%w: a question keeps 1 to %d answers", ErrInvalid, MaxAskQuorum)
	}
	seen := map[string]bool{}
	for _, v := range answers {
		if v.Person == "" || v.Answer == "" || seen[v.Person] {
			return fmt.Errorf("%w: each answer has a person, once, and an answer", ErrInvalid)
		}
		seen[v.Person] = true
	}
	return nil
}

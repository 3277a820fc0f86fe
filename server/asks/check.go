package asks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Limits bound what one agent asks. Past a bound the request is refused
// limit_exceeded (a size or a count) or invalid_value (a deadline out of
// range), and nothing is stored.
type Limits struct {
	// QuestionBytes is the longest question, in bytes of UTF-8.
	QuestionBytes int
	// Options is the most options a choice question has.
	Options int
	// OptionBytes is the longest option.
	OptionBytes int
	// ReasonBytes is the longest reason.
	ReasonBytes int
	// AnswerBytes is the longest text answer a person gives.
	AnswerBytes int
	// OpenPerAsker is how many of one agent's questions may wait for a
	// person at once.
	OpenPerAsker int
	// MinDeadline and MaxDeadline bound deadline_seconds.
	MinDeadline, MaxDeadline time.Duration
}

// DefaultLimits are the bounds a server starts with (see docs/http.md).
var DefaultLimits = Limits{
	QuestionBytes: 2000,
	Options:       20,
	OptionBytes:   200,
	ReasonBytes:   2000,
	AnswerBytes:   1000,
	OpenPerAsker:  32,
	MinDeadline:   time.Second,
	MaxDeadline:   30 * 24 * time.Hour,
}

// withDefaults returns l with each zero bound set to its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ dst, src *int }{
		{&d.QuestionBytes, &l.QuestionBytes}, {&d.Options, &l.Options}, {&d.OptionBytes, &l.OptionBytes},
		{&d.ReasonBytes, &l.ReasonBytes}, {&d.AnswerBytes, &l.AnswerBytes}, {&d.OpenPerAsker, &l.OpenPerAsker},
	} {
		if *f.src > 0 {
			*f.dst = *f.src
		}
	}
	if l.MinDeadline > 0 {
		d.MinDeadline = l.MinDeadline
	}
	if l.MaxDeadline > 0 {
		d.MaxDeadline = l.MaxDeadline
	}
	return d
}

// Fallbacks besides an option of a choice question.
const (
	FallbackDecline = "decline"
	FallbackApprove = "approve"
)

// NoDecision is the note of a question that reached its deadline.
const NoDecision = "no decision before the deadline"

// Request is approvals_request's arguments.
type Request struct {
	Question string   `json:"question" jsonschema:"The question, as the person reads it (at most 2000 bytes)."`
	Options  []string `json:"options,omitempty" jsonschema:"The choices of a choice question, 2 to 20, each at most 200 bytes, distinct."`
	// Answer is the kind of answer: choice, text or yes_no.
	Answer string `json:"answer,omitempty" enum:"choice,text,yes_no" jsonschema:"The kind of answer: yes_no, choice (one of options) or text (a short text). Default: choice with options, else yes_no."`
	Reason string `json:"reason,omitempty" jsonschema:"Why you ask, shown on the card (at most 2000 bytes)."`
	// DeadlineSeconds, when set, ends the question with Fallback when
	// no person decided it in time.
	DeadlineSeconds *int64 `json:"deadline_seconds,omitempty" type:"integer" jsonschema:"Seconds until the fallback is taken if no person decides (1 to 2592000). Default: no deadline."`
	Fallback        string `json:"fallback,omitempty" jsonschema:"The outcome at the deadline: decline (the default), approve (a yes_no question's yes) or one of options."`
	// Group, when set, asks the members of that group instead of the
	// asker's supervisors.
	Group string `json:"group,omitempty" jsonschema:"The group of people to ask instead of your supervisors: the name of a group the workspace has (such as finance). Default: your supervisors."`
	// Quorum, when set, is how many different people must give the same
	// answer (see Resolve).
	Quorum *int `json:"quorum,omitempty" type:"integer" jsonschema:"How many different people must answer (2 to 16): for yes_no, that many yes answers make yes and any no makes no; for choice and text, the first answer that many people give is the answer. Default: the first person's answer."`
}

func invalid(format string, args ...any) *tool.Error {
	return tool.Errorf("invalid_value", format, args...)
}

func tooLong(format string, args ...any) *tool.Error {
	return tool.Errorf("limit_exceeded", format, args...)
}

// checkText refuses text that is not UTF-8 or longer than max bytes.
func checkText(name, s string, max int) error {
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8; send it as text", name)
	}
	if len(s) > max {
		return tooLong("%s is %d bytes, over the limit of %d; shorten it", name, len(s), max)
	}
	return nil
}

// newAsk checks r against l and returns the question it asks, without
// its id, asker and times. Text is kept as written (trimmed of spaces at
// its ends): the card shows hidden and direction-changing characters as
// visible escapes, so a person reads what the agent sent. Options, which
// a person's answer must equal, may not hold such characters at all.
func newAsk(r Request, l Limits) (store.Ask, error) {
	a := store.Ask{Question: strings.TrimSpace(r.Question), Reason: strings.TrimSpace(r.Reason), Group: strings.TrimSpace(r.Group), State: store.AskOpen}
	if a.Group != "" && store.CheckGroupName(a.Group) != nil {
		return a, invalid("group %q is not a group name (lower-case letters, digits, '-', '_' and '.', at most %d); name a group the workspace has, or leave group out", shortText(a.Group, 80), store.GroupNameMax)
	}
	if a.Question == "" {
		return a, invalid("question is empty; write what the person should answer")
	}
	if err := checkText("question", a.Question, l.QuestionBytes); err != nil {
		return a, err
	}
	if err := checkText("reason", a.Reason, l.ReasonBytes); err != nil {
		return a, err
	}
	if len(r.Options) > l.Options {
		return a, tooLong("%d options, over the limit of %d; ask a text question or fewer options", len(r.Options), l.Options)
	}
	for i, o := range r.Options {
		o = strings.TrimSpace(o)
		if o == "" {
			return a, invalid("option %d is empty; every option is a choice the person can pick", i+1)
		}
		if err := checkText(fmt.Sprintf("option %d", i+1), o, l.OptionBytes); err != nil {
			return a, err
		}
		if host.HiddenChars(o) > 0 {
			return a, invalid("option %d holds an invisible or direction-changing character; write options in plain visible text", i+1)
		}
		if slices.Contains(a.Options, o) {
			return a, invalid("option %q is given twice; options must differ", o)
		}
		a.Options = append(a.Options, o)
	}
	if r.Quorum != nil {
		if *r.Quorum < 1 || *r.Quorum > store.MaxAskQuorum {
			return a, invalid("quorum must be between 2 and %d people (or left out for one person), not %d", store.MaxAskQuorum, *r.Quorum)
		}
		if *r.Quorum > 1 {
			a.Quorum = *r.Quorum
		}
	}
	a.Kind = r.Answer
	if a.Kind == "" {
		a.Kind = store.AskYesNo
		if len(a.Options) > 0 {
			a.Kind = store.AskChoice
		}
	}
	switch a.Kind {
	case store.AskChoice:
		if len(a.Options) < 2 {
			return a, invalid("a choice question needs at least 2 options")
		}
	case store.AskYesNo, store.AskText:
		if len(a.Options) > 0 {
			return a, invalid("a %s question takes no options; leave options out, or ask with answer \"choice\"", a.Kind)
		}
	default:
		return a, invalid("answer must be choice, text or yes_no, not %q", r.Answer)
	}
	if r.DeadlineSeconds == nil {
		if r.Fallback != "" {
			return a, invalid("fallback is the outcome at a deadline; give deadline_seconds too, or leave fallback out")
		}
		return a, nil
	}
	d := time.Duration(*r.DeadlineSeconds) * time.Second
	if *r.DeadlineSeconds < 0 || *r.DeadlineSeconds > int64(l.MaxDeadline/time.Second) || d < l.MinDeadline || d > l.MaxDeadline {
		return a, invalid("deadline_seconds must be between %d and %d", int64(l.MinDeadline/time.Second), int64(l.MaxDeadline/time.Second))
	}
	a.Fallback = r.Fallback
	if a.Fallback == "" {
		a.Fallback = FallbackDecline
	}
	switch {
	case a.Fallback == FallbackDecline:
	case a.Fallback == FallbackApprove && a.Kind == store.AskYesNo:
	case a.Kind == store.AskChoice && slices.Contains(a.Options, a.Fallback):
	case a.Kind == store.AskChoice:
		return a, invalid("fallback must be decline or one of the options, not %q", a.Fallback)
	case a.Kind == store.AskYesNo:
		return a, invalid("fallback of a yes_no question must be approve (yes) or decline, not %q", a.Fallback)
	default:
		return a, invalid("a text question falls back only to decline, not %q", a.Fallback)
	}
	return a, nil
}

// fallbackAnswer is the answer the fallback gives a, or "" when it
// declines.
func fallbackAnswer(a store.Ask) string {
	switch {
	case a.Fallback == FallbackApprove && a.Kind == store.AskYesNo:
		return "yes"
	case a.Kind == store.AskChoice && slices.Contains(a.Options, a.Fallback):
		return a.Fallback
	}
	return ""
}

// Answers of a yes_no question.
const (
	Yes = "yes"
	No  = "no"
)

// answerOf reads a person's approving answer to a from raw, the JSON
// value of values.answer (nil when none was sent): for yes_no, "yes"
// (the default) or "no" (or true or false); for choice, one of the
// options exactly; for text, a non-empty text of at most max bytes.
func answerOf(a store.Ask, raw json.RawMessage, max int) (string, error) {
	var s string
	if raw != nil {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", invalid("the answer is not a JSON value")
		}
		switch v := v.(type) {
		case string:
			s = v
		case bool:
			if a.Kind != store.AskYesNo {
				return "", invalid("the answer to this question is text, not true or false")
			}
			s = No
			if v {
				s = Yes
			}
		default:
			return "", invalid("the answer is a JSON string")
		}
	}
	switch a.Kind {
	case store.AskYesNo:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "", Yes:
			return Yes, nil
		case No:
			return No, nil
		}
		return "", invalid(`the answer to a yes/no question is "yes" or "no"`)
	case store.AskChoice:
		if slices.Contains(a.Options, s) {
			return s, nil
		}
		if raw == nil {
			return "", invalid("choose one of the options: send values.answer as one of %s", quoteAll(a.Options))
		}
		return "", invalid("the answer must be one of the options: %s", quoteAll(a.Options))
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", invalid("write the answer: send values.answer as a short text")
	}
	if err := checkText("the answer", s, max); err != nil {
		return "", err
	}
	return s, nil
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// shortText returns s cut to at most n bytes on a rune boundary, for
// quoting input back in an error.
func shortText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

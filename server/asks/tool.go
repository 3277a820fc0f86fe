package asks

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/tool"
)

// Answer is approvals_request's answer.
type Answer struct {
	// Approval is the question's id, for inbox_wait.
	Approval string `json:"approval"`
	// URL is the question's card in the inbox.
	URL string `json:"url"`
	// Next says how to learn the answer.
	Next string `json:"next"`
}

// requestTool is approvals_request. It files a question for a person and
// nothing outside assent; calling it twice asks twice, so it is not
// idempotent.
func (s *Part) requestTool() tool.Tool {
	deadline := int64(600)
	return tool.New(tool.Spec[Request]{
		Name:  "approvals_request",
		Title: "Ask a person a question",
		Description: "Ask the people who oversee you a question they answer in their inbox: yes or no (answer \"yes_no\", the default without options), one of a few options (\"choice\", the default with options) or a short text (\"text\"). " +
			"Use it when you need a person's say that no control, Flow or proposal asks for: a choice between ways forward, a confirmation before something you cannot undo, a fact only a person knows. Do not use it for what a Flow approval or a staged value already puts before a person. " +
			"Give a reason: the card shows it. The answer is {\"approval\": \"ask_…\", \"url\"}: wait for the person with inbox_wait {\"items\":[{\"approval\":\"ask_…\"}]}, which reports answered (with answer), declined (with the person's reason), or pending. " +
			"With group (a group the workspace has, such as \"finance\"), the question is asked of that group's members instead of your supervisors; a group without members is refused. " +
			"With quorum (2 to 16), that many different people must answer, each once: for yes_no that many yes answers make yes and one no makes no; for choice or text the first answer that many people give is the answer (inbox_wait says how many answered meanwhile). " +
			"With deadline_seconds, when nobody decides in time the question takes its fallback: decline (the default, reported as declined with the reason \"no decision before the deadline\"), approve (yes, for yes_no) or one of the options. " +
			"Bounds: question 2000 bytes, reason 2000, 2 to 20 options of 200 bytes each, deadline 1 s to 30 days, 32 open questions per agent (limit_exceeded or invalid_value past them). " +
			`Example: {"question": "Which account should pay invoice INV-2291 (1,240.00 EUR)?", "options": ["Operating account", "Reserve account"], "reason": "The invoice names no account and both have funds.", "deadline_seconds": 600, "fallback": "decline"}`,
		Annotations: tool.Annotations{ReadOnly: false, Destructive: false, Idempotent: false, OpenWorld: false},
		Example: Request{Question: "Which account should pay invoice INV-2291 (1,240.00 EUR)?", Options: []string{"Operating account", "Reserve account"},
			Reason: "The invoice names no account and both have funds.", DeadlineSeconds: &deadline, Fallback: FallbackDecline},
	}, func(ctx context.Context, c tool.Call, r Request) (*tool.Reply[Answer], error) {
		a, err := s.Ask(ctx, c.Principal, r)
		if err != nil {
			return nil, err
		}
		url := s.URL(a)
		return &tool.Reply[Answer]{Out: Answer{Approval: a.ID, URL: url,
			Next: fmt.Sprintf(`a person answers in the web inbox; wait for it with inbox_wait {"items":[{"approval":%q}]}`, a.ID)},
			Decision: url}, nil
	})
}

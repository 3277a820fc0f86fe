package server

import (
	"context"
	"errors"
	"strings"

	"github.com/assent-run/assent/server/asks"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// isQuestion reports whether the approval id names a question from
// approvals_request rather than a Flow approval.
func isQuestion(id string) bool { return strings.HasPrefix(id, asks.IDPrefix) }

// questionOutcome reports a question to the agent that asked it (and to
// the people who oversee that agent).
func (s *Server) questionOutcome(ctx context.Context, p store.Principal, id string) (waitOutcome, error) {
	o := waitOutcome{Kind: "question", ID: id, Status: outcomeNotFound, Next: "pass an approval id that approvals_request gave you"}
	q, err := s.asks.Outcome(ctx, p, id)
	if err != nil {
		var te *tool.Error
		if errors.As(err, &te) && te.Code == "not_found" {
			return o, nil
		}
		return o, err
	}
	o.Status, o.Answer, o.DecidedBy, o.Reason, o.Next = q.Status, q.Answer, q.DecidedBy, q.Reason, q.Next
	return o, nil
}

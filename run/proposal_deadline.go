package run

import (
	"context"
	"errors"
	"time"

	"github.com/assent-run/assent/store"
)

// NoDecision is the reason recorded on a proposal declined because no
// person decided it before its deadline.
const NoDecision = "no decision before the deadline"

// MaxDeadlineSeconds bounds a proposal's deadline_seconds (30 days).
const MaxDeadlineSeconds = 30 * 24 * 3600

// deadlineBatch bounds the proposals one ExpireDue reads at a time.
const deadlineBatch = 100

// checkDeadlineSeconds refuses a deadline_seconds outside 0 (none given)
// to MaxDeadlineSeconds.
func checkDeadlineSeconds(n int64) error {
	if n < 0 || n > MaxDeadlineSeconds {
		return errorf(CodeInvalidRequest, "deadline_seconds must be between 1 and %d (30 days); leave it out for the server's default.", MaxDeadlineSeconds)
	}
	return nil
}

// deadlineOf is the deadline of a proposal filed at filed: the request's
// own seconds, else the ToolSet's default; zero when neither is set or the
// ToolSet keeps no deadlines.
func (ts *ToolSet) deadlineOf(seconds int64, filed time.Time) time.Time {
	if ts.deadlines == nil {
		return time.Time{}
	}
	d := ts.defaultDeadline
	if seconds > 0 {
		d = time.Duration(seconds) * time.Second
	}
	if d <= 0 {
		return time.Time{}
	}
	return filed.Add(d)
}

// ProposalDeadline returns when proposal id is declined if no person
// decides it, or the zero time when it has no deadline.
func (ts *ToolSet) ProposalDeadline(ctx context.Context, id string) time.Time {
	if ts.deadlines == nil {
		return time.Time{}
	}
	d, err := ts.deadlines.Deadline(ctx, store.DeadlineCommandProposal, id)
	if err != nil {
		return time.Time{}
	}
	return d.Due
}

// ExpireDue declines, with the reason NoDecision, every pending proposal
// whose deadline has passed, and returns the proposals it declined. A
// proposal a person decided meanwhile, or that another node declined
// first, is left as it is: the store's compare-and-set on the pending
// status decides, so each proposal is declined once across every node.
// The deadline of a proposal no longer pending is removed.
func (ts *ToolSet) ExpireDue(ctx context.Context) ([]store.Proposal, error) {
	if ts.deadlines == nil {
		return nil, nil
	}
	var out []store.Proposal
	for {
		now := ts.m.now().UTC()
		due, err := ts.deadlines.DueDeadlines(ctx, store.DeadlineCommandProposal, now, deadlineBatch)
		if err != nil {
			return out, err
		}
		for _, d := range due {
			err := ts.props.DecideProposal(ctx, store.ProposalDecision{ID: d.Item, From: store.ProposalPending, To: store.ProposalDeclined, DecidedAt: now, Reason: NoDecision})
			switch {
			case err == nil:
				p, err := ts.props.Proposal(ctx, d.Item)
				if err != nil {
					return out, err
				}
				out = append(out, p)
			case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
				// Decided by a person or another node, or never filed.
			default:
				return out, err
			}
			if err := ts.deadlines.DeleteDeadline(ctx, d.Kind, d.Item); err != nil {
				return out, err
			}
		}
		if len(due) < deadlineBatch {
			return out, nil
		}
	}
}

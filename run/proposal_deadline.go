package run

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
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

// deadlineReq is what a request asks of its proposal's deadline: its own
// seconds (0 for the server's default) and the group it escalates to.
type deadlineReq struct {
	Seconds    int64
	EscalateTo string
}

// CodeInvalidValue is the code of an escalate_to naming a group that does
// not exist or has no members.
const CodeInvalidValue = string(wire.InvalidValue)

// checkEscalation refuses an escalate_to without a deadline (neither the
// request's nor the server's default), naming no valid group, or naming
// a group without members; nothing is filed then.
func (ts *ToolSet) checkEscalation(ctx context.Context, dl deadlineReq, now time.Time) error {
	if dl.EscalateTo == "" {
		return nil
	}
	if ts.deadlineOf(dl.Seconds, now).IsZero() {
		return errorf(CodeInvalidRequest, "escalate_to needs a deadline: give deadline_seconds too (this server sets no default deadline for commands).")
	}
	if err := store.CheckGroupName(dl.EscalateTo); err != nil || ts.groups == nil {
		return errorf(CodeInvalidValue, "escalate_to %q is not a group of this workspace; name a group with members.", dl.EscalateTo)
	}
	members, err := ts.groups.GroupMembers(ctx, dl.EscalateTo)
	if err != nil {
		return err
	}
	if len(members) == 0 {
		return errorf(CodeInvalidValue, "group %q has no members, so nobody could decide the proposal once escalated; name a group with members.", dl.EscalateTo)
	}
	return nil
}

// ProposalEscalatedTo returns the group proposal id was escalated to at
// its first deadline, or "" when it was not (or has no deadline).
func (ts *ToolSet) ProposalEscalatedTo(ctx context.Context, id string) string {
	if ts.deadlines == nil {
		return ""
	}
	d, err := ts.deadlines.Deadline(ctx, store.DeadlineCommandProposal, id)
	if err != nil || !d.Escalated() {
		return ""
	}
	return d.EscalateTo
}

// inEscalationGroup reports whether who is a person in the group proposal
// p was escalated to: they may decide it like its supervisor could.
func (ts *ToolSet) inEscalationGroup(ctx context.Context, p store.Proposal, who store.Principal) bool {
	if who.Kind != store.KindHuman || ts.groups == nil {
		return false
	}
	g := ts.ProposalEscalatedTo(ctx, p.ID)
	if g == "" {
		return false
	}
	members, err := ts.groups.GroupMembers(ctx, g)
	return err == nil && slices.Contains(members, who.ID)
}

// ProposalDeadlineOf returns the stored deadline of proposal id, or
// ErrNotFound when it has none.
func (ts *ToolSet) ProposalDeadlineOf(ctx context.Context, id string) (store.DecisionDeadline, error) {
	if ts.deadlines == nil {
		return store.DecisionDeadline{}, store.ErrNotFound
	}
	return ts.deadlines.Deadline(ctx, store.DeadlineCommandProposal, id)
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
	declined, _, err := ts.SettleDue(ctx)
	return declined, err
}

// SettleDue settles every pending proposal whose deadline has passed: one
// that names a group to escalate to and was not escalated yet is routed to
// that group with a new deadline as long as its first (the store's
// compare-and-set on the deadline's stage makes that happen once across
// nodes); any other is declined as ExpireDue says. It returns the
// proposals it declined and those it escalated.
func (ts *ToolSet) SettleDue(ctx context.Context) (declined, escalated []store.Proposal, err error) {
	if ts.deadlines == nil {
		return nil, nil, nil
	}
	var out []store.Proposal
	for {
		now := ts.m.now().UTC()
		due, err := ts.deadlines.DueDeadlines(ctx, store.DeadlineCommandProposal, now, deadlineBatch)
		if err != nil {
			return out, escalated, err
		}
		for _, d := range due {
			if d.EscalateTo != "" && d.Stage == 0 {
				p, err := ts.props.Proposal(ctx, d.Item)
				if err == nil && p.Status == store.ProposalPending {
					err = ts.deadlines.AdvanceDeadline(ctx, d.Kind, d.Item, 0, now.Add(d.Due.Sub(d.CreatedAt)))
					switch {
					case err == nil:
						escalated = append(escalated, p)
						continue
					case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
						// Another node escalated it first, or it was decided.
						continue
					default:
						return out, escalated, err
					}
				} else if err != nil && !errors.Is(err, store.ErrNotFound) {
					return out, escalated, err
				}
			}
			err := ts.props.DecideProposal(ctx, store.ProposalDecision{ID: d.Item, From: store.ProposalPending, To: store.ProposalDeclined, DecidedAt: now, Reason: NoDecision})
			switch {
			case err == nil:
				p, err := ts.props.Proposal(ctx, d.Item)
				if err != nil {
					return out, escalated, err
				}
				out = append(out, p)
			case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
				// Decided by a person or another node, or never filed.
			default:
				return out, escalated, err
			}
			if err := ts.deadlines.DeleteDeadline(ctx, d.Kind, d.Item); err != nil {
				return out, escalated, err
			}
		}
		if len(due) < deadlineBatch {
			return out, escalated, nil
		}
	}
}

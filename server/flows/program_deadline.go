package flows

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// programDeadlineBatch bounds the deadlines one pass reads at a time.
const programDeadlineBatch = 100

// programDeadlineSeconds reads the deadline_seconds of a program proposal
// from the query: 0 when it is absent, else a whole number from 1 to
// flow.MaxApprovalDeadline. Anything else is invalid_request.
func programDeadlineSeconds(q url.Values) (int64, error) {
	raw := q.Get("deadline_seconds")
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 || n > flow.MaxApprovalDeadline {
		return 0, tool.Errorf("invalid_request", "deadline_seconds must be a whole number of seconds from 1 to %d (30 days); leave it out for the server's default", flow.MaxApprovalDeadline)
	}
	return n, nil
}

// programDeadline is the deadline of a program proposed at filed with the
// request's seconds, else the server's default; zero when neither is set
// or the part keeps no deadlines.
func (s *Part) programDeadline(seconds int64, filed time.Time) time.Time {
	if s.Store.Deadlines == nil {
		return time.Time{}
	}
	d := s.Config.ProgramDeadline
	if seconds > 0 {
		d = time.Duration(seconds) * time.Second
	}
	if d <= 0 {
		return time.Time{}
	}
	return filed.Add(d).UTC()
}

// fileProgramDeadline stores the deadline of the program src is about to
// be proposed as, replacing the one of an earlier proposal of the same
// program; a proposal without one removes that earlier deadline, so it
// does not end the new proposal. A src that does not load is left to the
// load to refuse.
func (s *Part) fileProgramDeadline(ctx context.Context, src []byte, due, filed time.Time) error {
	if s.Store.Deadlines == nil {
		return nil
	}
	p, err := flow.Load(src, s.flowInv)
	if err != nil {
		return nil
	}
	if due.IsZero() {
		return s.Store.Deadlines.DeleteDeadline(ctx, store.DeadlineProgramProposal, p.Fingerprint())
	}
	return s.Store.Deadlines.SetDeadline(ctx, store.DecisionDeadline{Kind: store.DeadlineProgramProposal, Item: p.Fingerprint(), Due: due, CreatedAt: filed})
}

// dropProgramDeadline removes the deadline of a program that no longer
// waits for a decision; a failure is only logged, since the sweep removes
// it at its time without touching the program.
func (s *Part) dropProgramDeadline(ctx context.Context, fingerprint string) {
	if s.Store.Deadlines == nil {
		return
	}
	if err := s.Store.Deadlines.DeleteDeadline(context.WithoutCancel(ctx), store.DeadlineProgramProposal, fingerprint); err != nil {
		s.Log.Warn("the deadline of a decided program could not be removed; the sweep removes it when due", "program", fingerprint, "err", err)
	}
}

// ProgramProposalDeadline returns when the proposed program is declined if
// no person decides it, or the zero time when it has none.
func (s *Part) ProgramProposalDeadline(ctx context.Context, fingerprint string) time.Time {
	if s.Store.Deadlines == nil {
		return time.Time{}
	}
	d, err := s.Store.Deadlines.Deadline(ctx, store.DeadlineProgramProposal, fingerprint)
	if err != nil {
		return time.Time{}
	}
	return d.Due
}

// sweepProgramDeadlines runs, until the returned function is called, the
// loop that declines proposed programs past their deadline: at once (those
// that passed it while no node ran), then every Config.DeadlineSweep. The
// returned function stops the loop and waits for it to end.
func (s *Part) sweepProgramDeadlines() func() {
	if s.Store.Deadlines == nil {
		return func() {}
	}
	every := s.Config.DeadlineSweep
	if every <= 0 {
		every = DefaultDeadlineSweep
	}
	return host.Repeat(every, func(ctx context.Context) {
		if _, err := s.ExpireProgramProposals(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("proposed programs past their deadline could not be declined; trying again", "err", err)
		}
	})
}

// ExpireProgramProposals declines every proposed program past its deadline
// with the reason flow.NoDecision, records each in the audit log (source
// deadline) and tells its proposer, and returns the loads it declined. The
// kernel's compare-and-set on the proposed status decides, so each is
// declined once across the nodes sharing the store; a program a person
// decided meanwhile is left as it is. The deadline is then removed.
func (s *Part) ExpireProgramProposals(ctx context.Context) ([]flow.ProgramLoad, error) {
	if s.Store.Deadlines == nil {
		return nil, nil
	}
	var out []flow.ProgramLoad
	for {
		now := s.Now().UTC()
		due, err := s.Store.Deadlines.DueDeadlines(ctx, store.DeadlineProgramProposal, now, programDeadlineBatch)
		if err != nil {
			return out, err
		}
		for _, d := range due {
			l, err := s.flows.DeclineProgramAtDeadline(ctx, d.Item, flow.NoDecision)
			var fe *flow.Error
			switch {
			case err == nil:
				out = append(out, l)
				s.programExpired(ctx, l, now)
			case errors.As(err, &fe) && (fe.Code == flow.CodeApprovalClosed || fe.Code == flow.CodeNotFound):
				// Decided by a person or another node, or never stored.
			default:
				return out, err
			}
			if err := s.Store.Deadlines.DeleteDeadline(ctx, d.Kind, d.Item); err != nil {
				return out, err
			}
		}
		if len(due) < programDeadlineBatch {
			return out, nil
		}
	}
}

// programExpired audits a program declined at its deadline and tells its
// proposer, whose inbox_wait then reads it declined.
func (s *Part) programExpired(ctx context.Context, l flow.ProgramLoad, now time.Time) {
	if s.Store.Audit != nil {
		rec := store.AuditRecord{Time: now, PrincipalID: l.LoadedBy, Source: "deadline", Subject: "program:" + l.Fingerprint,
			Action: "flow.program.expire", OK: true, Reason: flow.NoDecision}
		if _, err := s.Store.Audit.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
			s.Log.Error("audit proposed program past its deadline", "program", l.Fingerprint, "err", err)
		}
	}
	s.publishFlow("flow.approval", l.LoadedBy, map[string]any{"program": l.Fingerprint, "status": l.Status, "reason": l.Reason})
}

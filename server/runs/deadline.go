package runs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// sweepDeadlines runs, until Close, the sweeper that declines the command
// and tool proposals past their deadline: at once (those that passed it
// while no node ran), then every Config.Sweep.
func (s *Part) sweepDeadlines() {
	every := s.Config.Sweep
	if every <= 0 {
		every = DefaultSweep
	}
	s.stopSweep = host.Repeat(every, func(ctx context.Context) {
		if _, err := s.ExpireDue(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("proposals past their deadline could not be declined; trying again", "err", err)
		}
	})
}

// ExpireDue routes every pending command or tool proposal past its first
// deadline that names a group to escalate to, to that group (audited and
// told to its proposer), and declines every other one past its
// deadline with the reason "no decision before the deadline", records
// each in the audit log and tells its proposer, and returns how many it
// declined. Each is declined once across the nodes sharing the store.
func (s *Part) ExpireDue(ctx context.Context) (int, error) {
	done, escalated, err := s.runTools.SettleDue(ctx)
	for _, pr := range escalated {
		group := s.runTools.ProposalEscalatedTo(context.WithoutCancel(ctx), pr.ID)
		rec := store.AuditRecord{Time: s.Now(), PrincipalID: pr.ProposerID, Source: "deadline", Subject: "proposal:" + pr.ID,
			Action: "proposal.escalate", OK: true, Reason: "escalated to group " + group + ": no decision before the first deadline"}
		if _, aerr := s.Store.AppendAudit(context.WithoutCancel(ctx), rec); aerr != nil {
			s.Log.Error("audit proposal escalated at its deadline", "proposal", pr.ID, "err", aerr)
		}
		s.Log.Info("command proposal escalated at its deadline", "proposal", pr.ID, "group", group)
		s.publishProposalEscalated(pr, group)
	}
	for _, pr := range done {
		rec := store.AuditRecord{Time: s.Now(), PrincipalID: pr.ProposerID, Source: "deadline", Subject: "proposal:" + pr.ID,
			Action: "proposal.expire", OK: true, Reason: run.NoDecision}
		if _, aerr := s.Store.AppendAudit(context.WithoutCancel(ctx), rec); aerr != nil {
			s.Log.Error("audit proposal past its deadline", "proposal", pr.ID, "err", aerr)
		}
		s.publishProposalDecision(pr, false)
	}
	return len(done), err
}

// publishProposalEscalated tells the proposer of pr, through the event
// bus that inbox_wait reads, that it was routed to group at its deadline.
func (s *Part) publishProposalEscalated(pr store.Proposal, group string) {
	b, err := json.Marshal(map[string]any{"proposal": pr.ID, "status": pr.Status, "escalated": true, "group": group})
	if err != nil {
		return
	}
	s.Bus.Publish(s.OwnedEvent("run.proposal", pr.ProposerID, b))
}

// ProposalDeadline returns when proposal id is declined if no person
// decides it, or the zero time when it has no deadline.
func (s *Part) ProposalDeadline(ctx context.Context, id string) time.Time {
	return s.runTools.ProposalDeadline(ctx, id)
}

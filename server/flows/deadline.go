package flows

import (
	"context"
	"time"

	"github.com/assent-run/assent/flow"
)

// DefaultDeadlineSweep is how often, by default, the part looks for Flow
// approvals past their deadline.
const DefaultDeadlineSweep = time.Second

// sweepDeadlines settles, every Config.DeadlineSweep, the pending
// approvals whose deadline passed, and tells their requesters. It returns
// the function that stops it and waits for it to end.
func (s *Part) sweepDeadlines() func() {
	every := s.Config.DeadlineSweep
	if every <= 0 {
		every = DefaultDeadlineSweep
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if _, err := s.SweepDeadlines(ctx); err != nil && ctx.Err() == nil {
				s.Log.Warn("Flow approvals past their deadline could not be settled; trying again", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// SweepDeadlines settles every pending approval past its deadline (see
// flow.Kernel.SettleOverdue): it declines it with the reason
// flow.NoDecision, or routes it to the group its rule escalates to. It
// tells the owner of each one's instance (so the agent waiting in
// inbox_wait hears it) and the people, and returns how many it settled.
// An approval a person decided first, or another node settled first, is
// left as it is: the kernel's compare-and-set decides.
func (s *Part) SweepDeadlines(ctx context.Context) (int, error) {
	got, err := s.flows.SettleOverdue(ctx)
	for _, a := range got {
		owner := a.Requester
		if inst, err := s.flows.Instance(ctx, a.Instance); err == nil {
			owner = inst.Owner
		}
		if a.Status == flow.ApprovalPending {
			s.Log.Info("Flow approval escalated at its deadline", "approval", a.ID, "instance", a.Instance, "group", a.Group, "deadline", a.Deadline)
		} else {
			s.Log.Info("Flow approval declined at its deadline", "approval", a.ID, "instance", a.Instance, "deadline", a.Deadline)
		}
		s.publishFlow("flow.approval", owner, map[string]any{"approval": a.ID, "instance": a.Instance, "status": a.Status})
	}
	return len(got), err
}

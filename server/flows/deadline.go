package flows

import (
	"context"
	"time"

	"github.com/assent-run/assent/flow"
)

// DefaultDeadlineSweep is how often, by default, the part looks for Flow
// approvals past their deadline.
const DefaultDeadlineSweep = time.Second

// sweep runs the part's two sweeps in one loop: every
// Config.DeadlineSweep it settles the pending approvals whose deadline
// passed and tells their requesters (the first time at once), and every
// quarter of the interrupted-apply bound it settles the applies that a
// node which died mid-apply left marked, so that their instances and
// approvals do not wait for that node to come back. Each reads only the
// rows that are due. It returns the function that stops the loop and
// waits for it to end.
func (s *Part) sweep() func() {
	every := s.Config.DeadlineSweep
	if every <= 0 {
		every = DefaultDeadlineSweep
	}
	interrupted := s.Config.InterruptedAfter
	if interrupted <= 0 {
		interrupted = flow.DefaultInterruptedAfter
	}
	interrupted = max(interrupted/4, 250*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadlines := time.NewTicker(every)
		defer deadlines.Stop()
		applies := time.NewTicker(interrupted)
		defer applies.Stop()
		s.sweepDeadlinesOnce(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-deadlines.C:
				s.sweepDeadlinesOnce(ctx)
			case <-applies.C:
				s.sweepInterruptedOnce(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// sweepDeadlinesOnce is one pass of the deadline sweep; a failure is
// logged, and the next pass tries again.
func (s *Part) sweepDeadlinesOnce(ctx context.Context) {
	if _, err := s.SweepDeadlines(ctx); err != nil && ctx.Err() == nil {
		s.Log.Warn("Flow approvals past their deadline could not be settled; trying again", "err", err)
	}
}

// sweepInterruptedOnce is one pass of the interrupted-apply sweep.
func (s *Part) sweepInterruptedOnce(ctx context.Context) {
	n, err := s.flows.SweepInterrupted(ctx)
	if err != nil && ctx.Err() == nil {
		s.Log.Warn("settling interrupted applies of other nodes", "err", err)
	}
	if n > 0 {
		s.Log.Warn("flow instances put in recovery mode after another node stopped mid-apply", "count", n)
	}
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

package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
)

// FlowDeadline has two Flow kernels on one store (two nodes) settle the
// same approvals past their deadline at once: each approval is declined
// exactly once, with the reason flow.NoDecision, and a kernel started
// afterwards on the store (a restart) finds nothing left to do.
func FlowDeadline(t *testing.T, open func(t *testing.T) store.Store) {
	st := open(t).Flows()
	ctx := context.Background()
	filed := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := filed
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	node := func() *flow.Kernel { return flow.NewKernel(st, flow.NewInventory("0.1.0"), flow.WithClock(clock)) }
	kernels := [2]*flow.Kernel{node(), node()}
	src := strings.Replace(decisionProgram, `"authority": ["human"],`, `"authority": ["human"], "approval": {"deadline_seconds": 30},`, 1)
	p, err := kernels[0].AddProgram(ctx, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	bot := flow.Principal{ID: "agent-1", Kind: flow.AuthorityAgent, Grants: []string{flow.CapabilityStateWrite}}
	const n = 10
	ids := make([]string, n)
	for i := range n {
		id := fmt.Sprintf("deadline-%02d", i)
		if _, err := kernels[0].Start(ctx, flow.Instance{ID: id, Program: p.Fingerprint(), Phase: "new"}); err != nil {
			t.Fatal(err)
		}
		a, err := kernels[0].RequestApproval(ctx, id, bot, flow.Request{Transition: "cancel"})
		if err != nil {
			t.Fatal(err)
		}
		if !a.Deadline.Equal(filed.Add(30 * time.Second)) {
			t.Fatalf("deadline %v, want 30 s after %v", a.Deadline, filed)
		}
		ids[i] = a.ID
	}
	if got, err := kernels[1].SettleOverdue(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before the deadline: %v %v", got, err)
	}
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	var counts [2]int
	errs := race(2, func(i int) error {
		got, err := kernels[i].SettleOverdue(ctx)
		counts[i] = len(got)
		return err
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("sweeps: %v, %v", errs[0], errs[1])
	}
	if counts[0]+counts[1] != n {
		t.Fatalf("declined %d + %d times, want %d in all", counts[0], counts[1], n)
	}
	restarted := node()
	if got, err := restarted.SettleOverdue(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after a restart: %v %v", got, err)
	}
	for _, id := range ids {
		a, err := restarted.Approval(ctx, id)
		if err != nil || a.Status != flow.ApprovalDeclined || a.Reason != flow.NoDecision || a.Decider != "" {
			t.Fatalf("%s: %+v %v", id, a, err)
		}
	}
}

// FlowDue checks the two reads the sweeps make: DueApprovals returns the
// pending approvals whose deadline has come, oldest first, and none that
// is not yet due, has no deadline or was decided; MarkedInstances returns
// the instances whose apply mark is at least as old as the bound, and
// none marked later or not marked. A deadline moved by an escalation, or
// a mark cleared, is what the next read sees.
func FlowDue(t *testing.T, open func(t *testing.T) store.Store) {
	st := open(t).Flows()
	c := context.Background()
	now := at(time.Hour)
	approval := func(id string, status flow.ApprovalStatus, deadline time.Time, filed time.Duration) flow.ApprovalRecord {
		return flow.ApprovalRecord{Approval: flow.Approval{ID: "apr-" + id, Instance: "inst-" + id, Transition: "cancel", Status: status, Deadline: deadline, CreatedAt: at(filed)}}
	}
	// Filed in this order, which is the order DueApprovals keeps.
	recs := []flow.ApprovalRecord{
		approval("due-late", flow.ApprovalPending, now.Add(-time.Minute), 1),
		approval("not-yet", flow.ApprovalPending, now.Add(time.Second), 2),
		approval("no-deadline", flow.ApprovalPending, time.Time{}, 3),
		approval("decided", flow.ApprovalDeclined, now.Add(-time.Hour), 4),
		approval("due-now", flow.ApprovalPending, now, 5),
		approval("far-off", flow.ApprovalPending, now.Add(24*time.Hour), 6),
	}
	marked := func(id, pending string, markedAt time.Time) flow.Instance {
		return flow.Instance{ID: id, Program: "sha256:00", Phase: "new", Pending: pending, PendingNode: "node-a", PendingAt: markedAt}
	}
	insts := []flow.Instance{
		marked("i-old", "rx-1", now.Add(-time.Hour)),
		marked("i-young", "rx-2", now.Add(time.Second)),
		marked("i-idle", "", time.Time{}),
		marked("i-untimed", "rx-3", time.Time{}),
		marked("i-at-bound", "rx-4", now),
	}
	if err := st.Update(c, func(tx flow.Tx) error {
		for _, r := range recs {
			if err := tx.PutApproval(r); err != nil {
				return err
			}
		}
		for _, in := range insts {
			if err := tx.CreateInstance(in); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check := func(step string, wantApprovals, wantInstances []string) {
		t.Helper()
		var gotA, gotI []string
		err := st.View(c, func(tx flow.Tx) error {
			due, err := tx.DueApprovals(now)
			if err != nil {
				return err
			}
			for _, r := range due {
				gotA = append(gotA, strings.TrimPrefix(r.Approval.ID, "apr-"))
			}
			list, err := tx.MarkedInstances(now)
			if err != nil {
				return err
			}
			for _, in := range list {
				gotI = append(gotI, in.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if fmt.Sprint(gotA) != fmt.Sprint(wantApprovals) {
			t.Errorf("%s: DueApprovals = %v, want %v", step, gotA, wantApprovals)
		}
		if fmt.Sprint(gotI) != fmt.Sprint(wantInstances) {
			t.Errorf("%s: MarkedInstances = %v, want %v", step, gotI, wantInstances)
		}
	}
	check("as filed", []string{"due-late", "due-now"}, []string{"i-at-bound", "i-old", "i-untimed"})

	// An escalation moves a due deadline on, a decision closes another,
	// a far-off deadline is brought in; an apply finishes and clears its
	// mark, another is marked long ago.
	if err := st.Update(c, func(tx flow.Tx) error {
		moved := recs[0]
		moved.Approval.Deadline = now.Add(time.Minute)
		closed := recs[4]
		closed.Approval.Status = flow.ApprovalApproved
		brought := recs[5]
		brought.Approval.Deadline = now.Add(-time.Second)
		for _, r := range []flow.ApprovalRecord{moved, closed, brought} {
			if err := tx.PutApproval(r); err != nil {
				return err
			}
		}
		done := insts[0]
		done.Pending, done.PendingNode, done.PendingAt, done.Revision = "", "", time.Time{}, 1
		if err := tx.UpdateInstance(done, 0, "rx-1"); err != nil {
			return err
		}
		old := insts[2]
		old.Pending, old.PendingAt, old.Revision = "rx-5", now.Add(-time.Minute), 1
		return tx.UpdateInstance(old, 0, "")
	}); err != nil {
		t.Fatal(err)
	}
	check("after the changes", []string{"far-off"}, []string{"i-at-bound", "i-idle", "i-untimed"})
}

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

package flow

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestApprovalDeadlineCanonical(t *testing.T) {
	p := mustLoad(t, withRule(t, doc{"deadline_seconds": 120}))
	want := `{"approval":{"deadline_seconds":120},"authority":`
	if !bytes.Contains(p.Canonical(), []byte(want)) {
		t.Fatalf("canonical bytes lack %s:\n%s", want, p.Canonical())
	}
	// The default fallback, named or not, is the same program.
	q := mustLoad(t, withRule(t, doc{"fallback": "decline", "deadline_seconds": 120}))
	if q.Fingerprint() != p.Fingerprint() {
		t.Error("naming the default fallback changed the fingerprint")
	}
	r := mustLoad(t, withRule(t, doc{"deadline_seconds": 121}))
	if r.Fingerprint() == p.Fingerprint() {
		t.Error("a different deadline kept the fingerprint")
	}
	// A rule without a deadline keeps the fingerprint it had.
	g := mustLoad(t, withRule(t, doc{"group": "finance", "quorum": 2}))
	want = `{"approval":{"group":"finance","quorum":2},"authority":`
	if !bytes.Contains(g.Canonical(), []byte(want)) {
		t.Fatalf("canonical bytes lack %s:\n%s", want, g.Canonical())
	}
	all := mustLoad(t, withRule(t, doc{"group": "finance", "quorum": 2, "deadline_seconds": 5}))
	want = `{"approval":{"deadline_seconds":5,"group":"finance","quorum":2},"authority":`
	if !bytes.Contains(all.Canonical(), []byte(want)) {
		t.Fatalf("canonical bytes lack %s:\n%s", want, all.Canonical())
	}
}

func TestApprovalDeadlineDeclines(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"quorum": 2, "deadline_seconds": 60})
	f.start(t, "d", "new", nil)
	a, err := f.k.RequestApproval(ctx, "d", agent(CapabilityStateWrite), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Minute).UTC(); !a.Deadline.Equal(want) || a.Fallback != FallbackDecline {
		t.Fatalf("deadline %v fallback %q, want %v decline", a.Deadline, a.Fallback, want)
	}
	// One of two people approves; the deadline still applies.
	if _, err := f.k.Approve(ctx, a.ID, named("alice", CapabilityStateWrite)); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatalf("approve = %v", err)
	}
	f.clk.advance(59 * time.Second)
	if got, err := f.k.SettleOverdue(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before the deadline: %v %v", got, err)
	}
	f.clk.advance(time.Second)
	got, err := f.k.SettleOverdue(ctx)
	if err != nil || len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("at the deadline: %v %v", got, err)
	}
	now, _ := f.k.Approval(ctx, a.ID)
	if now.Status != ApprovalDeclined || now.Reason != NoDecision || now.Decider != "" || !now.DecidedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the deadline: %+v", now)
	}
	// Nobody decides it afterwards, and a second sweep does nothing.
	if _, err := f.k.Approve(ctx, a.ID, named("bob", CapabilityStateWrite)); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("approve after the deadline = %v, want %s", err, CodeApprovalClosed)
	}
	if got, err := f.k.SettleOverdue(ctx); err != nil || len(got) != 0 {
		t.Fatalf("second sweep: %v %v", got, err)
	}
	if inst, _ := f.k.Instance(ctx, "d"); inst.Phase != "new" {
		t.Fatalf("phase %s after the decline", inst.Phase)
	}
}

// Once the deadline has passed, nobody decides the approval, even before
// the sweep settles it.
func TestApprovalDeadlineRefusesLateDecisions(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"deadline_seconds": 10})
	f.start(t, "d", "new", nil)
	a, err := f.k.RequestApproval(ctx, "d", agent(CapabilityStateWrite), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	f.clk.advance(10 * time.Second)
	if _, err := f.k.Approve(ctx, a.ID, named("alice", CapabilityStateWrite)); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("approve after the deadline = %v, want %s", err, CodeApprovalClosed)
	}
	if _, err := f.k.Decline(ctx, a.ID, named("alice"), "late"); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("decline after the deadline = %v, want %s", err, CodeApprovalClosed)
	}
	if got, err := f.k.SettleOverdue(ctx); err != nil || len(got) != 1 || got[0].Reason != NoDecision {
		t.Fatalf("sweep: %v %v", got, err)
	}
	if inst, _ := f.k.Instance(ctx, "d"); inst.Phase != "new" {
		t.Fatalf("phase %s", inst.Phase)
	}
}

// A person's decision before the deadline stands: the sweep leaves it.
func TestApprovalDeadlineAfterDecision(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"deadline_seconds": 1})
	f.start(t, "d", "new", nil)
	a, err := f.k.RequestApproval(ctx, "d", agent(CapabilityStateWrite), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Decline(ctx, a.ID, named("alice"), "no"); err != nil {
		t.Fatal(err)
	}
	f.clk.advance(time.Hour)
	if got, err := f.k.SettleOverdue(ctx); err != nil || len(got) != 0 {
		t.Fatalf("sweep: %v %v", got, err)
	}
	if now, _ := f.k.Approval(ctx, a.ID); now.Reason != "no" || now.Decider != "alice" {
		t.Fatalf("decision overwritten: %+v", now)
	}
}

// Two kernels on one store (two nodes) sweep at once: each overdue
// approval is declined by exactly one of them.
func TestApprovalDeadlineOnceAcrossKernels(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"deadline_seconds": 5})
	const n = 8
	ids := make([]string, n)
	for i := range n {
		id := string(rune('a' + i))
		f.start(t, id, "new", nil)
		a, err := f.k.RequestApproval(ctx, id, agent(CapabilityStateWrite), Request{Transition: "cancel"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = a.ID
	}
	f.clk.advance(5 * time.Second)
	other := NewKernel(f.store, f.inv, WithClock(f.clk.now))
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i, k := range []*Kernel{f.k, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := k.SettleOverdue(ctx)
			if err != nil {
				t.Error(err)
			}
			counts[i] = len(got)
		}()
	}
	wg.Wait()
	if counts[0]+counts[1] != n {
		t.Fatalf("declined %d + %d times, want %d in all", counts[0], counts[1], n)
	}
	for _, id := range ids {
		if a, _ := f.k.Approval(ctx, id); a.Status != ApprovalDeclined || a.Reason != NoDecision {
			t.Fatalf("%s: %+v", id, a)
		}
	}
}

func TestApprovalEscalationRule(t *testing.T) {
	p := mustLoad(t, withRule(t, doc{"group": "finance", "deadline_seconds": 60, "escalate_to": "finance.heads"}))
	want := `{"approval":{"deadline_seconds":60,"escalate_to":"finance.heads","group":"finance"},"authority":`
	if !bytes.Contains(p.Canonical(), []byte(want)) {
		t.Fatalf("canonical bytes lack %s:\n%s", want, p.Canonical())
	}
	for _, rule := range []doc{
		{"escalate_to": "heads"},                                  // no deadline
		{"deadline_seconds": 60, "escalate_to": "Heads!"},         // not a name
		{"deadline_seconds": 60, "escalate_to": 3},                // not a string
		{"group": "a", "deadline_seconds": 9, "escalate_to": "a"}, // the same group
	} {
		if _, err := Load(withRule(t, rule), testInventory()); err == nil || !strings.Contains(err.Error(), "approval.escalate_to") {
			t.Errorf("%v: Load = %v, want an error at approval.escalate_to", rule, err)
		}
	}
}

// At the first deadline an approval with a group to escalate to is routed
// to that group, once, with a second deadline as long as the first; at the
// second it is declined.
func TestApprovalDeadlineEscalates(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"group": "finance", "deadline_seconds": 60, "escalate_to": "heads"})
	f.start(t, "d", "new", nil)
	a, err := f.k.RequestApproval(ctx, "d", agent(CapabilityStateWrite), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if a.EscalateTo != "heads" || a.Group != "finance" || a.Escalated() {
		t.Fatalf("filed: %+v", a)
	}
	f.clk.advance(90 * time.Second) // the sweep runs late
	other := NewKernel(f.store, f.inv, WithClock(f.clk.now))
	got, err := f.k.SettleOverdue(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("first deadline: %v %v", got, err)
	}
	if again, err := other.SettleOverdue(ctx); err != nil || len(again) != 0 {
		t.Fatalf("another node at the first deadline: %v %v", again, err)
	}
	now, _ := f.k.Approval(ctx, a.ID)
	if now.Status != ApprovalPending || now.Group != "heads" || now.EscalatedFrom != "finance" || !now.Escalated() ||
		!now.Deadline.Equal(t0.Add(150*time.Second)) {
		t.Fatalf("after the first deadline: %+v", now)
	}
	f.clk.advance(59 * time.Second)
	if got, err := f.k.SettleOverdue(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before the second deadline: %v %v", got, err)
	}
	f.clk.advance(time.Second)
	if got, err := other.SettleOverdue(ctx); err != nil || len(got) != 1 || got[0].Status != ApprovalDeclined {
		t.Fatalf("second deadline: %v %v", got, err)
	}
	now, _ = f.k.Approval(ctx, a.ID)
	if now.Status != ApprovalDeclined || now.Reason != NoDecision || now.Group != "heads" {
		t.Fatalf("after the second deadline: %+v", now)
	}
}

// BenchmarkSettleOverdue measures one sweep while 1000 approvals wait
// with a deadline far off and three others are due: the cost the server
// pays every second while approvals wait. Each iteration files the three
// due ones (untimed) and settles them.
func BenchmarkSettleOverdue(b *testing.B) {
	ctx := context.Background()
	const step = time.Minute
	f := quorumFixture(b, doc{"deadline_seconds": int(step / time.Second)})
	file := func(id string) {
		if _, err := f.k.Start(ctx, Instance{ID: id, Program: f.prog.Fingerprint(), Phase: "new"}); err != nil {
			b.Fatal(err)
		}
		if _, err := f.k.RequestApproval(ctx, id, agent(CapabilityStateWrite), Request{Transition: "cancel"}); err != nil {
			b.Fatal(err)
		}
	}
	// The waiting ones are filed far ahead of the clock the sweeps run
	// at, so none of them comes due during the benchmark.
	const ahead = 100_000 * time.Hour
	f.clk.advance(ahead)
	for i := range 1000 {
		file("wait" + strconv.Itoa(i))
	}
	f.clk.advance(-ahead)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j := range 3 {
			file("due" + strconv.Itoa(i) + "_" + strconv.Itoa(j))
		}
		f.clk.advance(step)
		b.StartTimer()
		if got, err := f.k.SettleOverdue(ctx); err != nil || len(got) != 3 {
			b.Fatal(got, err)
		}
	}
}

package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable clock for the kernel.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	k     *Kernel
	clk   *clock
	inv   *Inventory
	store *MemoryStore
	prog  *Program
}

// newFixture returns a kernel running full.json, with tool.call wired to
// effect (nil leaves it unwired).
func newFixture(t *testing.T, effect EffectFunc) *fixture {
	t.Helper()
	inv := testInventory()
	if effect != nil {
		if err := inv.RegisterEffect(EffectToolCall, CapabilityToolInvoke, effect); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{clk: &clock{t: t0}, inv: inv, store: NewMemoryStore()}
	f.k = NewKernel(f.store, inv, WithClock(f.clk.now))
	p, err := f.k.AddProgram(context.Background(), fullProgram(t))
	if err != nil {
		t.Fatal(err)
	}
	f.prog = p
	return f
}

func (f *fixture) start(t *testing.T, id, phase string, facts map[string]Fact) Instance {
	t.Helper()
	in, err := f.k.Start(context.Background(), Instance{ID: id, Program: f.prog.Fingerprint(), Phase: phase, Facts: facts, Objective: "shipped"})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func reservedFacts() map[string]Fact {
	return map[string]Fact{"stock.reserved": known("yes")}
}

func (f *fixture) prescribe(t *testing.T, id string, pr Principal, req Request) *Prescription {
	t.Helper()
	d, err := f.k.Prescribe(context.Background(), id, pr, req)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != Prescribed {
		t.Fatalf("decision = %s %s: %s", d.Kind, d.Code, d.Message)
	}
	return d.Prescription
}

func journalStatuses(t *testing.T, k *Kernel, id string) []JournalStatus {
	t.Helper()
	j, err := k.Journal(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []JournalStatus
	for _, e := range j {
		out = append(out, e.Status)
	}
	return out
}

func labelEffect(calls *atomic.Int32) EffectFunc {
	return func(ctx context.Context, req *EffectRequest) EffectResult {
		if err := req.Require(CapabilityToolInvoke); err != nil {
			return Fail(err)
		}
		if calls != nil {
			calls.Add(1)
		}
		return EffectResult{Outcome: Succeeded, Facts: map[string]Fact{"carrier.label": known("L-1")}}
	}
}

var shipReq = Request{Parameters: map[string]string{"api_key": "s3cr3t"}}

func TestApplyCommitsOnce(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	var seen EffectRequest
	f := newFixture(t, func(ctx context.Context, req *EffectRequest) EffectResult {
		seen = *req
		return labelEffect(&calls)(ctx, req)
	})
	f.start(t, "o1", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke, CapabilityStateWrite, "extra.grant")
	rx := f.prescribe(t, "o1", pr, shipReq)
	r, err := f.k.Apply(ctx, rx.ID, pr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision != 1 || r.FromRevision != 0 || r.Phase != "shipped" || r.ID != r.computeID() || len(r.ID) != 68 {
		t.Errorf("receipt = %+v", r)
	}
	in, _ := f.k.Instance(ctx, "o1")
	if in.Revision != 1 || in.Phase != "shipped" || in.Facts["carrier.label"] != known("L-1") || in.Pending != "" {
		t.Errorf("instance after apply = %+v", in)
	}
	if !slices.Equal(seen.Capabilities, []string{CapabilityToolInvoke}) {
		t.Errorf("effect received capabilities %v, want only the effective set", seen.Capabilities)
	}
	if seen.Parameters["api_key"] != "s3cr3t" || !slices.Equal(seen.Arguments, []string{"carrier_label_create"}) || seen.Prescription.ID != rx.ID {
		t.Errorf("effect request = %+v", seen)
	}
	// Applying again returns the same receipt and changes nothing.
	again, err := f.k.Apply(ctx, rx.ID, pr)
	if err != nil || again != r {
		t.Errorf("re-apply = %+v, %v; want the same receipt", again, err)
	}
	if calls.Load() != 1 {
		t.Errorf("effect ran %d times", calls.Load())
	}
	if got := journalStatuses(t, f.k, "o1"); !slices.Equal(got, []JournalStatus{JournalBegun, JournalExecuting, JournalCommitted}) {
		t.Errorf("journal = %v", got)
	}
	if got, err := f.k.Prescription(ctx, rx.ID); err != nil || got.ID != rx.ID || got.Parameters["api_key"] == "s3cr3t" {
		t.Errorf("Prescription = %+v, %v", got, err)
	}
	if stored, err := f.k.Receipt(ctx, rx.ID); err != nil || stored != r {
		t.Errorf("Receipt = %+v, %v", stored, err)
	}
}

func TestApplyStateAssign(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.start(t, "o1", "new", map[string]Fact{"payment.status": known("captured"), "stock.level": known("5")})
	pr := agent(CapabilityStateWrite)
	pr.Policy = true
	rx := f.prescribe(t, "o1", pr, Request{Parameters: map[string]string{"warehouse": "north"}})
	if _, err := f.k.Apply(ctx, rx.ID, pr); err != nil {
		t.Fatal(err)
	}
	in, _ := f.k.Instance(ctx, "o1")
	if in.Phase != "reserved" || in.Facts["stock.reserved"] != known("yes") || in.Facts["order.status"] != known("reserved") {
		t.Errorf("state.assign produced %+v", in)
	}
}

func TestApplyRefusals(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, labelEffect(nil))
	pr := agent(CapabilityToolInvoke)

	t.Run("expired", func(t *testing.T) {
		f.start(t, "exp", "reserved", reservedFacts())
		rx := f.prescribe(t, "exp", pr, shipReq)
		f.clk.advance(PrescriptionLifetime)
		defer f.clk.advance(-PrescriptionLifetime)
		if _, err := f.k.Apply(ctx, rx.ID, pr); ErrorCode(err) != CodePrescriptionExpired {
			t.Errorf("err = %v, want PRESCRIPTION_EXPIRED", err)
		}
	})
	t.Run("stale after another commit", func(t *testing.T) {
		f.start(t, "stale", "reserved", reservedFacts())
		first := f.prescribe(t, "stale", pr, shipReq)
		f.clk.advance(time.Second)
		second := f.prescribe(t, "stale", pr, shipReq)
		if first.ID == second.ID {
			t.Fatal("prescriptions issued at different times share an id")
		}
		if _, err := f.k.Apply(ctx, first.ID, pr); err != nil {
			t.Fatal(err)
		}
		if _, err := f.k.Apply(ctx, second.ID, pr); ErrorCode(err) != CodeStalePrescription {
			t.Errorf("err = %v, want STALE_PRESCRIPTION", err)
		}
	})
	t.Run("stale after an observation", func(t *testing.T) {
		f.start(t, "obs", "reserved", reservedFacts())
		rx := f.prescribe(t, "obs", pr, shipReq)
		if _, err := f.k.Observe(ctx, "obs", Observation{Facts: map[string]Fact{"carrier.status": known("waiting")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.k.Apply(ctx, rx.ID, pr); ErrorCode(err) != CodeStalePrescription {
			t.Errorf("err = %v, want STALE_PRESCRIPTION", err)
		}
	})
	t.Run("another principal", func(t *testing.T) {
		f.start(t, "who", "reserved", reservedFacts())
		rx := f.prescribe(t, "who", pr, shipReq)
		other := pr
		other.ID = "agent-2"
		if _, err := f.k.Apply(ctx, rx.ID, other); ErrorCode(err) != CodeStalePrescription {
			t.Errorf("err = %v, want STALE_PRESCRIPTION", err)
		}
	})
	t.Run("unknown prescription", func(t *testing.T) {
		if _, err := f.k.Apply(ctx, "prx-nothing", pr); ErrorCode(err) != CodeNotFound {
			t.Errorf("err = %v, want NOT_FOUND", err)
		}
	})
	t.Run("observe with a stale revision", func(t *testing.T) {
		f.start(t, "cas", "reserved", reservedFacts())
		if _, err := f.k.Observe(ctx, "cas", Observation{CheckRevision: true, Revision: 7}); !errors.Is(err, ErrConflict) {
			t.Errorf("err = %v, want ErrConflict", err)
		}
	})
}

func TestConcurrentApplySamePrescription(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	f := newFixture(t, labelEffect(&calls))
	f.start(t, "o1", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke)
	rx := f.prescribe(t, "o1", pr, shipReq)
	const n = 16
	receipts := make([]Receipt, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { receipts[i], errs[i] = f.k.Apply(ctx, rx.ID, pr) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || receipts[i] != receipts[0] {
			t.Fatalf("apply %d = %+v, %v; want the same receipt", i, receipts[i], errs[i])
		}
	}
	in, _ := f.k.Instance(ctx, "o1")
	if in.Revision != 1 || calls.Load() != 1 {
		t.Errorf("revision %d after %d effect runs; want 1 and 1", in.Revision, calls.Load())
	}
}

func TestConcurrentApplyDifferentPrescriptions(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	f := newFixture(t, labelEffect(&calls))
	f.start(t, "o1", "reserved", reservedFacts())
	const n = 12
	rxs := make([]*Prescription, n)
	prs := make([]Principal, n)
	for i := range n {
		prs[i] = agent(CapabilityToolInvoke)
		prs[i].ID = fmt.Sprintf("agent-%d", i)
		rxs[i] = f.prescribe(t, "o1", prs[i], shipReq)
	}
	var ok, stale atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := f.k.Apply(ctx, rxs[i].ID, prs[i])
			switch ErrorCode(err) {
			case "":
				ok.Add(1)
			case CodeStalePrescription:
				stale.Add(1)
			default:
				t.Errorf("apply: %v", err)
			}
		})
	}
	wg.Wait()
	in, _ := f.k.Instance(ctx, "o1")
	if ok.Load() != 1 || stale.Load() != n-1 || in.Revision != 1 || calls.Load() != 1 {
		t.Errorf("%d committed, %d stale, revision %d, %d effect runs; want 1, %d, 1, 1", ok.Load(), stale.Load(), in.Revision, calls.Load(), n-1)
	}
}

func TestResourceLock(t *testing.T) {
	ctx := context.Background()
	entered := make(chan struct{})
	release := make(chan struct{})
	var first atomic.Bool
	f := newFixture(t, func(ctx context.Context, req *EffectRequest) EffectResult {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return labelEffect(nil)(ctx, req)
	})
	// Two instances whose ship transitions both own the "orders" resource.
	f.start(t, "a", "reserved", reservedFacts())
	f.start(t, "b", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke)
	ra := f.prescribe(t, "a", pr, shipReq)
	rb := f.prescribe(t, "b", pr, shipReq)
	done := make(chan error, 1)
	go func() { _, err := f.k.Apply(ctx, ra.ID, pr); done <- err }()
	<-entered
	// While a's effect holds "orders", b cannot start its effect: its
	// context runs out while waiting for the lock.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := f.k.Apply(short, rb.ID, pr)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("b applied while a held the resource: %v", err)
	}
	if got := journalStatuses(t, f.k, "b"); len(got) != 0 {
		t.Errorf("b's journal = %v, want nothing before the lock", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Apply(ctx, rb.ID, pr); err != nil {
		t.Errorf("b after a released: %v", err)
	}
}

func TestApplyLocalFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, func(ctx context.Context, req *EffectRequest) EffectResult {
		return Fail(errors.New("carrier API returned 400"))
	})
	before := f.start(t, "o1", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke)
	rx := f.prescribe(t, "o1", pr, shipReq)
	if _, err := f.k.Apply(ctx, rx.ID, pr); ErrorCode(err) != CodeEffectFailed {
		t.Fatalf("err = %v, want EFFECT_FAILED", err)
	}
	after, _ := f.k.Instance(ctx, "o1")
	if after.Revision != before.Revision || after.Phase != before.Phase || after.Recovery != nil || after.Pending != "" || len(after.Facts) != len(before.Facts) {
		t.Errorf("instance changed after a local failure: %+v", after)
	}
	if got := journalStatuses(t, f.k, "o1"); !slices.Equal(got, []JournalStatus{JournalBegun, JournalExecuting, JournalAborted}) {
		t.Errorf("journal = %v", got)
	}
	if _, err := f.k.Receipt(ctx, rx.ID); ErrorCode(err) != CodeNotFound {
		t.Errorf("a receipt exists after a failure: %v", err)
	}
}

func TestApplyUnwiredEffect(t *testing.T) {
	f := newFixture(t, nil)
	f.start(t, "o1", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke)
	rx := f.prescribe(t, "o1", pr, shipReq)
	if _, err := f.k.Apply(context.Background(), rx.ID, pr); ErrorCode(err) != CodeEffectUnavailable {
		t.Errorf("err = %v, want EFFECT_UNAVAILABLE", err)
	}
}

func TestRecoveryMode(t *testing.T) {
	tests := []struct {
		name   string
		effect EffectFunc
	}{
		{"uncertain", func(ctx context.Context, req *EffectRequest) EffectResult {
			return EffectResult{Outcome: Uncertain, Err: errors.New("timeout"), Facts: map[string]Fact{"stock.reserved": {Status: StatusUnknown}}}
		}},
		{"panic", func(ctx context.Context, req *EffectRequest) EffectResult { panic("boom") }},
		{"verification fails", func(ctx context.Context, req *EffectRequest) EffectResult {
			return EffectResult{Outcome: Succeeded, Facts: map[string]Fact{"stock.reserved": {Status: StatusAmbiguous}}}
		}},
		{"phase outside the targets", func(ctx context.Context, req *EffectRequest) EffectResult {
			return EffectResult{Outcome: Succeeded, Phase: "lost", Facts: map[string]Fact{"stock.reserved": {Status: StatusConflicting}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, tt.effect)
			f.start(t, "o1", "reserved", reservedFacts())
			pr := agent(CapabilityToolInvoke, CapabilityStateWrite)
			rx := f.prescribe(t, "o1", pr, shipReq)
			if _, err := f.k.Apply(ctx, rx.ID, pr); ErrorCode(err) != CodeRecoveryRequired {
				t.Fatalf("err = %v, want RECOVERY_REQUIRED", err)
			}
			in, _ := f.k.Instance(ctx, "o1")
			if in.Recovery == nil || in.Recovery.Prescription != rx.ID || in.Revision != 0 || in.Pending != "" {
				t.Fatalf("instance = %+v, want recovery mode at revision 0", in)
			}
			if got := journalStatuses(t, f.k, "o1"); !slices.Equal(got, []JournalStatus{JournalBegun, JournalExecuting, JournalRecoveryRequired}) {
				t.Errorf("journal = %v", got)
			}
			// Only RECOVERY transitions are selectable now.
			d, _ := f.k.Resolve(ctx, "o1", pr, shipReq)
			if d.Kind == Prescribed && LocalID(d.Transition) == "ship" {
				t.Fatal("ship is selectable in recovery mode")
			}
			if reasonCode(d, "ship") != ReasonRecoveryMode {
				t.Errorf("ship's reason = %q", reasonCode(d, "ship"))
			}
			if in.Facts["stock.reserved"].Status == StatusKnown {
				// The effect reported nothing usable; record what recovery needs.
				if _, err := f.k.Observe(ctx, "o1", Observation{Facts: map[string]Fact{"stock.reserved": {Status: StatusUnknown}}, CheckRevision: true, Revision: in.Revision}); err != nil {
					t.Fatal(err)
				}
			}
			rec := f.prescribe(t, "o1", pr, Request{})
			if LocalID(rec.Transition) != "release" {
				t.Fatalf("recovery prescription is for %s", rec.Transition)
			}
			r, err := f.k.Apply(ctx, rec.ID, pr)
			if err != nil {
				t.Fatal(err)
			}
			in, _ = f.k.Instance(ctx, "o1")
			if in.Recovery != nil || in.Phase != "new" || in.Revision != r.Revision {
				t.Errorf("after recovery: %+v", in)
			}
		})
	}
}

func TestApprovalFlow(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.start(t, "o1", "new", nil)
	bot := agent(CapabilityStateWrite)
	d, err := f.k.Resolve(ctx, "o1", bot, Request{Transition: "cancel"})
	if err != nil || d.Kind != Frontier || d.Awaiting != AuthorityHuman {
		t.Fatalf("agent's decision = %+v, %v; want FRONTIER awaiting human", d, err)
	}
	a, err := f.k.RequestApproval(ctx, "o1", bot, Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != ApprovalPending || a.Program != f.prog.Fingerprint() || a.Transition != "order-fulfilment/cancel" ||
		a.Operation != "cancel_order" || !slices.Equal(a.RequiredCapabilities, []string{CapabilityHumanApprove, CapabilityStateWrite}) {
		t.Errorf("approval = %+v", a)
	}
	if again, _ := f.k.RequestApproval(ctx, "o1", bot, Request{Transition: "cancel"}); again.ID != a.ID {
		t.Error("asking twice created two approvals")
	}
	pending, _ := f.k.PendingApprovals(ctx)
	if len(pending) != 1 || pending[0].ID != a.ID {
		t.Errorf("pending = %+v", pending)
	}
	if _, err := f.k.Approve(ctx, a.ID, bot); ErrorCode(err) != CodeCapabilityDenied {
		t.Errorf("an agent approved: %v", err)
	}
	alice := person(CapabilityStateWrite)
	r, err := f.k.Approve(ctx, a.ID, alice)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.k.Approval(ctx, a.ID)
	if got.Status != ApprovalApproved || got.Receipt != r.ID || got.Decider != "alice" {
		t.Errorf("approval after Approve = %+v", got)
	}
	in, _ := f.k.Instance(ctx, "o1")
	if in.Phase != "cancelled" || in.Revision != 1 {
		t.Errorf("instance = %+v", in)
	}
	if _, err := f.k.Approve(ctx, a.ID, alice); ErrorCode(err) != CodeApprovalClosed {
		t.Errorf("second approve: %v", err)
	}
	// human.approve was added for that one admission only.
	f.start(t, "o2", "new", nil)
	if d, _ := f.k.Resolve(ctx, "o2", alice, Request{Transition: "cancel"}); d.Kind != Frontier || d.Awaiting != AuthorityHuman {
		t.Errorf("alice's own decision = %s %s; human.approve leaked into her grants", d.Kind, d.Awaiting)
	}
}

func TestApprovalDeclineAndStale(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	bot := agent(CapabilityStateWrite)
	alice := person()
	f.start(t, "d", "new", nil)
	a, err := f.k.RequestApproval(ctx, "d", bot, Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.k.Decline(ctx, a.ID, alice, "customer called")
	if err != nil || got.Status != ApprovalDeclined || got.Reason != "customer called" {
		t.Errorf("Decline = %+v, %v", got, err)
	}
	if seen, _ := f.k.Approval(ctx, a.ID); seen.Status != ApprovalDeclined {
		t.Errorf("requester sees %s", seen.Status)
	}

	f.start(t, "s", "new", nil)
	a, _ = f.k.RequestApproval(ctx, "s", bot, Request{Transition: "cancel"})
	if _, err := f.k.Observe(ctx, "s", Observation{Facts: map[string]Fact{"note": known("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Approve(ctx, a.ID, alice); ErrorCode(err) != CodeApprovalClosed {
		t.Errorf("approve after the instance moved: %v", err)
	}
	if seen, _ := f.k.Approval(ctx, a.ID); seen.Status != ApprovalStale {
		t.Errorf("status = %s, want stale", seen.Status)
	}
	// Nothing awaits a person: no approval.
	f.start(t, "n", "reserved", reservedFacts())
	if _, err := f.k.RequestApproval(ctx, "n", agent(CapabilityToolInvoke), shipReq); ErrorCode(err) != CodeNotPrescribed {
		t.Errorf("approval for a prescribable step: %v", err)
	}
}

func TestApprovalHidesSecrets(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, labelEffect(nil))
	f.start(t, "o1", "reserved", reservedFacts())
	// ship needs agent authority, which a service lacks.
	svc := Principal{ID: "svc", Kind: AuthorityService, Grants: []string{CapabilityToolInvoke}}
	d, _ := f.k.Resolve(ctx, "o1", svc, shipReq)
	if d.Kind != Frontier || d.Awaiting != AuthorityAgent {
		t.Fatalf("decision = %s %s", d.Kind, d.Awaiting)
	}
	// Only human-awaiting decisions become approvals.
	if _, err := f.k.RequestApproval(ctx, "o1", svc, shipReq); ErrorCode(err) != CodeNotPrescribed {
		t.Errorf("err = %v", err)
	}
	// An approval with a secret parameter shows the name, not the value.
	src := variant(t, fullProgram(t), func(m doc) { set(m, "transitions.1.authority", []any{"human"}) })
	p, err := f.k.AddProgram(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Start(ctx, Instance{ID: "h", Program: p.Fingerprint(), Phase: "reserved", Facts: reservedFacts()}); err != nil {
		t.Fatal(err)
	}
	a, err := f.k.RequestApproval(ctx, "h", agent(CapabilityToolInvoke), shipReq)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Parameters) != 1 || a.Parameters[0].Value != "" || !a.Parameters[0].Secret {
		t.Errorf("parameters = %+v", a.Parameters)
	}
	r, err := f.k.Approve(ctx, a.ID, person(CapabilityToolInvoke))
	if err != nil || r.Phase != "shipped" {
		t.Errorf("Approve = %+v, %v", r, err)
	}
}

func TestKernelNotFound(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	if _, err := f.k.Instance(ctx, "missing"); ErrorCode(err) != CodeNotFound {
		t.Errorf("Instance: %v", err)
	}
	if _, err := f.k.Start(ctx, Instance{Program: "sha256:00", Phase: "new"}); ErrorCode(err) != CodeNotFound {
		t.Errorf("Start with an unknown program: %v", err)
	}
	if _, err := f.k.Approval(ctx, "apr-x"); ErrorCode(err) != CodeNotFound {
		t.Errorf("Approval: %v", err)
	}
	in, err := f.k.Start(ctx, Instance{Program: f.prog.Fingerprint(), Phase: "new"})
	if err != nil || len(in.ID) < 5 {
		t.Errorf("Start with a generated id = %+v, %v", in, err)
	}
	if _, err := f.k.Start(ctx, in); err == nil {
		t.Error("a duplicate instance id was accepted")
	}
}

func TestKernelReloadsStoredPrograms(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	k2 := NewKernel(f.store, f.inv)
	p, err := k2.Program(ctx, f.prog.Fingerprint())
	if err != nil || p.Fingerprint() != f.prog.Fingerprint() {
		t.Errorf("Program = %v, %v", p, err)
	}
}

func TestEffectRequire(t *testing.T) {
	req := &EffectRequest{Capabilities: []string{"state.write"}, Transition: Transition{ID: "p/t"}}
	if err := req.Require("state.write"); err != nil {
		t.Error(err)
	}
	if err := req.Require("tool.invoke"); ErrorCode(err) != CodeEffectCapabilityDenied {
		t.Errorf("err = %v", err)
	}
	res := assignState(context.Background(), &EffectRequest{Transition: Transition{ID: "p/t", Assignments: []Assignment{{"a", "1"}}}})
	if res.Outcome != Failed || ErrorCode(res.Err) != CodeEffectCapabilityDenied {
		t.Errorf("state.assign without state.write = %+v", res)
	}
}

func TestVerifiers(t *testing.T) {
	tr := Transition{ID: "p/deploy", Effect: EffectRunSpawn, TargetPhases: []string{"live"},
		TargetConditions: []Condition{{Facet: "run.build", Statuses: []string{StatusKnown}}}}
	after := Instance{Phase: "live", Facts: map[string]Fact{"run.build": known("succeeded"), "run.deploy": known("succeeded")}}
	if err := verifyRunSucceeded(context.Background(), &VerifyRequest{Transition: tr, After: after}); err != nil {
		t.Errorf("run.succeeded: %v", err)
	}
	for _, facet := range []string{"run.build", "run.deploy"} {
		a := after.Clone()
		a.Facts[facet] = known("running")
		if err := verifyRunSucceeded(context.Background(), &VerifyRequest{Transition: tr, After: a}); err == nil {
			t.Errorf("run.succeeded passed with %s running", facet)
		}
	}
	a := after.Clone()
	a.Phase = "old"
	if err := verifyConditions(context.Background(), &VerifyRequest{Transition: tr, After: a}); err == nil {
		t.Error("conditions.match passed outside the target phases")
	}
}

func TestObserve(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.start(t, "o1", "shipped", nil)
	tests := []struct {
		name string
		obs  Observation
		code string
	}{
		{"controllable transition", Observation{Transition: "ship"}, CodeObservationInvalid},
		{"unknown transition", Observation{Transition: "vanish"}, CodeObservationInvalid},
		{"source condition fails", Observation{Transition: "delivered", Facts: map[string]Fact{"carrier.status": known("in_transit")}}, CodeObservationInvalid},
		{"stale revision", Observation{Transition: "delivered", CheckRevision: true, Revision: 3, Facts: map[string]Fact{"carrier.status": known("delivered")}}, CodeRevisionConflict},
		{"delivered", Observation{Transition: "delivered", CheckRevision: true, Revision: 0, Facts: map[string]Fact{"carrier.status": known("delivered")}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := f.k.Observe(ctx, "o1", tt.obs)
			if ErrorCode(err) != tt.code {
				t.Fatalf("err = %v, want %q", err, tt.code)
			}
			if err == nil && (in.Phase != "delivered" || in.Revision != 1) {
				t.Errorf("instance = %+v", in)
			}
			if err != nil {
				if cur, _ := f.k.Instance(ctx, "o1"); cur.Revision != 0 || cur.Phase != "shipped" {
					t.Errorf("a refused observation changed the instance: %+v", cur)
				}
			}
		})
	}
	list, err := f.k.Instances(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "o1" {
		t.Errorf("Instances = %+v, %v", list, err)
	}
	fps, err := f.k.Programs(ctx)
	if err != nil || len(fps) != 1 || fps[0] != f.prog.Fingerprint() {
		t.Errorf("Programs = %v, %v", fps, err)
	}
}

func TestRecoverInterrupted(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, labelEffect(nil))
	f.start(t, "o1", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke)
	rx := f.prescribe(t, "o1", pr, shipReq)
	// Simulate a crash after the apply began: the instance keeps its
	// pending mark.
	err := f.store.Update(ctx, func(tx Tx) error {
		in, err := tx.Instance("o1")
		if err != nil {
			return err
		}
		next := in.Clone()
		next.Pending = rx.ID
		return tx.UpdateInstance(next, in.Revision, "")
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Apply(ctx, rx.ID, pr); ErrorCode(err) != CodeRevisionConflict {
		t.Errorf("apply while pending: %v", err)
	}
	n, err := f.k.RecoverInterrupted(ctx)
	if err != nil || n != 1 {
		t.Fatalf("RecoverInterrupted = %d, %v", n, err)
	}
	in, _ := f.k.Instance(ctx, "o1")
	if in.Pending != "" || in.Recovery == nil || in.Recovery.Prescription != rx.ID {
		t.Errorf("instance = %+v", in)
	}
	if n, _ := f.k.RecoverInterrupted(ctx); n != 0 {
		t.Errorf("second run settled %d", n)
	}
}

func TestStartRejectsUnknownObjective(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.k.Start(context.Background(), Instance{ID: "x", Program: f.prog.Fingerprint(), Phase: "new", Objective: "teleported"})
	if ErrorCode(err) != CodeObjectiveUnknown {
		t.Errorf("err = %v", err)
	}
}

// TestTwoKernelsOneStore runs the same prescription through two kernels
// sharing a store, as two nodes would: the effect runs once and the
// revision moves once, whatever the interleaving.
func TestTwoKernelsOneStore(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	f := newFixture(t, labelEffect(&calls))
	other := NewKernel(f.store, f.inv, WithClock(f.clk.now))
	f.start(t, "o1", "reserved", reservedFacts())
	pr := agent(CapabilityToolInvoke)
	rx := f.prescribe(t, "o1", pr, shipReq)
	const n = 8
	var wg sync.WaitGroup
	var committed, busy atomic.Int32
	for i := range n {
		k := f.k
		if i%2 == 1 {
			k = other
		}
		wg.Go(func() {
			_, err := k.Apply(ctx, rx.ID, pr)
			switch ErrorCode(err) {
			case "":
				committed.Add(1)
			case CodeRevisionConflict:
				busy.Add(1) // the other node was mid-apply; retrying returns the receipt
			default:
				t.Errorf("apply: %v", err)
			}
		})
	}
	wg.Wait()
	r, err := other.Apply(ctx, rx.ID, pr)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	in, _ := f.k.Instance(ctx, "o1")
	if calls.Load() != 1 || in.Revision != 1 || r.Revision != 1 || committed.Load()+busy.Load() != n {
		t.Errorf("%d effect runs, revision %d, %d ok, %d busy", calls.Load(), in.Revision, committed.Load(), busy.Load())
	}
}

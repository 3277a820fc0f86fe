package flow

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// payProgram pays through tool.call; reconcile is the RECOVERY transition
// keyed on an unknown payment status, and confirm needs a person.
const payProgram = `{
  "schema_version": 1, "program_id": "pay", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["tool.call", "state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["tool.invoke", "state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "paid", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["paid"]}]}],
  "transitions": [
    {"id": "send", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["approved"], "target_phases": ["paid"],
     "authority": ["agent"], "parameters": [{"name": "iban", "required": true, "secret": true}, {"name": "memo"}],
     "target_conditions": [{"facet": "payment.status", "statuses": ["known"], "values": ["sent"]}],
     "required_capabilities": ["tool.invoke"], "effect": "tool.call", "verifier": "conditions.match",
     "prescription": {"operation": "send", "arguments": ["bank_send"], "expected_postcondition": "the payment is sent"}},
    {"id": "confirm", "selection_class": "EXPLICIT_ONLY", "priority": 1, "source_phases": ["approved"], "target_phases": ["paid"],
     "authority": ["human"], "parameters": [{"name": "iban", "required": true, "secret": true}],
     "source_conditions": [{"facet": "amount", "statuses": ["known"]}],
     "target_conditions": [{"facet": "payment.status", "statuses": ["known"], "values": ["sent"]}],
     "required_capabilities": ["tool.invoke"], "effect": "tool.call", "verifier": "conditions.match",
     "prescription": {"operation": "send", "arguments": ["bank_send"], "expected_postcondition": "the payment is sent"}},
    {"id": "reconcile", "selection_class": "RECOVERY", "priority": 1, "source_phases": ["approved"], "target_phases": ["approved"],
     "authority": ["agent"], "source_conditions": [{"facet": "payment.status", "statuses": ["unknown"]}],
     "target_conditions": [{"facet": "payment.status", "statuses": ["known"], "values": ["not_sent"]}],
     "assignments": [{"facet": "payment.status", "value": "not_sent"}],
     "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "reconcile", "expected_postcondition": "the payment status is known"}}
  ]
}`

// bank is a tool.call effect whose outcome the test chooses, with a
// Binder that reports a "staged" value the test can change.
type bank struct {
	mu      sync.Mutex
	outcome Outcome
	staged  string
	calls   atomic.Int32
	got     []*EffectRequest
}

func (b *bank) Apply(ctx context.Context, req *EffectRequest) EffectResult {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, req)
	switch b.outcome {
	case Failed:
		return Fail(errors.New("refused"))
	case Uncertain:
		return EffectResult{Outcome: Uncertain, Err: errors.New("the bank answered 500 after the request left")}
	}
	return EffectResult{Outcome: Succeeded, Facts: map[string]Fact{"payment.status": known("sent")}}
}

func (b *bank) Bind(ctx context.Context, req *EffectRequest) ([]Binding, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return []Binding{{Kind: "beneficiary", Name: "payee", Value: b.staged}}, nil
}

func newPayKernel(t *testing.T, store Store, b *bank) (*Kernel, *Program) {
	t.Helper()
	inv := testInventory()
	if err := inv.RegisterEffect(EffectToolCall, CapabilityToolInvoke, b); err != nil {
		t.Fatal(err)
	}
	k := NewKernel(store, inv, WithClock((&clock{t: t0}).now))
	p, err := k.AddProgram(context.Background(), []byte(payProgram))
	if err != nil {
		t.Fatal(err)
	}
	return k, p
}

const iban = "DE89370400440532013000"

// TestApproveAppliesWhatThePersonSaw: an approval records what the effect
// would act on; when it moves before the person approves (an agent
// re-stages another payee), approving is refused STALE_PRESCRIPTION, the
// effect never runs, and the approval says what changed.
func TestApproveAppliesWhatThePersonSaw(t *testing.T) {
	ctx := context.Background()
	b := &bank{staged: "ada.new@example.com"}
	k, p := newPayKernel(t, NewMemoryStore(), b)
	start := func(id string) {
		if _, err := k.Start(ctx, Instance{ID: id, Program: p.Fingerprint(), Phase: "approved", Facts: map[string]Fact{"amount": known("120")}}); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{Transition: "confirm", Parameters: map[string]string{"iban": iban}}
	approver := person(CapabilityToolInvoke)

	start("moved")
	a, err := k.RequestApproval(ctx, "moved", agent(CapabilityToolInvoke), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []Binding{{Kind: BindingFact, Name: "amount", Value: "120"}, {Kind: "beneficiary", Name: "payee", Value: "ada.new@example.com"}}
	if !slices.Equal(a.Bindings, want) {
		t.Fatalf("bindings = %+v, want %+v", a.Bindings, want)
	}
	b.mu.Lock()
	b.staged = "attacker@evil.example"
	b.mu.Unlock()
	_, err = k.Approve(ctx, a.ID, approver)
	if ErrorCode(err) != CodeStalePrescription || !strings.Contains(err.Error(), "attacker@evil.example") {
		t.Fatalf("Approve after the payee moved: %v", err)
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("the effect ran %d times", n)
	}
	got, _ := k.Approval(ctx, a.ID)
	if got.Status != ApprovalStale || len(got.Changed) != 1 || !strings.Contains(got.Changed[0], "ada.new@example.com") {
		t.Fatalf("approval = %+v", got)
	}
	if _, err := k.Approve(ctx, a.ID, approver); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("second Approve: %v", err)
	}
	// Asking again files a new approval that shows the new payee.
	again, err := k.RequestApproval(ctx, "moved", agent(CapabilityToolInvoke), req)
	if err != nil || again.ID == a.ID || again.Bindings[1].Value != "attacker@evil.example" {
		t.Fatalf("new approval = %+v, %v", again, err)
	}
	all, err := k.InstanceApprovals(ctx, "moved")
	byID := map[string]Approval{}
	for _, x := range all {
		byID[x.ID] = x
	}
	if err != nil || len(all) != 2 || byID[a.ID].Status != ApprovalStale || byID[a.ID].Decider != approver.ID || byID[again.ID].Status != ApprovalPending {
		t.Fatalf("instance approvals = %+v, %v", all, err)
	}

	// Unchanged, approving applies, and the effect receives exactly the
	// recorded bindings.
	start("same")
	a, err = k.RequestApproval(ctx, "same", agent(CapabilityToolInvoke), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Approve(ctx, a.ID, approver); err != nil {
		t.Fatal(err)
	}
	if n := b.calls.Load(); n != 1 || !slices.Equal(b.got[0].Bindings, a.Bindings) || b.got[0].Parameters["iban"] != iban {
		t.Fatalf("effect calls = %d, request = %+v", n, b.got)
	}
}

// TestApprovalStoresNoSecret: the stored approval has a digest of the
// secret parameter, never its value; approving still applies it, and
// afterwards neither the approval nor the prescription keeps it. A kernel
// that restarted no longer holds the value and refuses as stale.
func TestApprovalStoresNoSecret(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	b := &bank{staged: "ada"}
	k, p := newPayKernel(t, store, b)
	for _, id := range []string{"i1", "i2"} {
		if _, err := k.Start(ctx, Instance{ID: id, Program: p.Fingerprint(), Phase: "approved", Facts: map[string]Fact{"amount": known("5")}}); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{Transition: "confirm", Parameters: map[string]string{"iban": iban}}
	a, err := k.RequestApproval(ctx, "i1", agent(CapabilityToolInvoke), req)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(id string) string {
		var raw []byte
		store.View(ctx, func(tx Tx) error {
			rec, err := tx.Approval(id)
			raw, _ = json.Marshal(rec)
			return err
		})
		return string(raw)
	}
	if s := stored(a.ID); strings.Contains(s, iban) || a.Parameters[0].Digest == "" || a.Parameters[0].Value != "" {
		t.Fatalf("stored approval: %s", s)
	}
	r, err := k.Approve(ctx, a.ID, person(CapabilityToolInvoke))
	if err != nil {
		t.Fatal(err)
	}
	if b.got[0].Parameters["iban"] != iban {
		t.Fatalf("the effect got %q", b.got[0].Parameters["iban"])
	}
	store.View(ctx, func(tx Tx) error {
		rec, err := tx.Prescription(r.Prescription)
		raw, _ := json.Marshal(rec)
		if err != nil || strings.Contains(string(raw), iban) {
			t.Errorf("stored prescription after apply = %s, %v", raw, err)
		}
		return nil
	})

	// After a restart the value is gone: the approval cannot apply.
	a2, err := k.RequestApproval(ctx, "i2", agent(CapabilityToolInvoke), req)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := newPayKernel(t, store, b)
	if _, err := k2.Approve(ctx, a2.ID, person(CapabilityToolInvoke)); ErrorCode(err) != CodeStalePrescription || !strings.Contains(err.Error(), "no longer held") {
		t.Fatalf("Approve after restart: %v", err)
	}
	if b.calls.Load() != 1 {
		t.Fatalf("the effect ran %d times", b.calls.Load())
	}
	// Asking again files it afresh, and it applies.
	a3, err := k2.RequestApproval(ctx, "i2", agent(CapabilityToolInvoke), req)
	if err != nil || a3.Status != ApprovalPending {
		t.Fatalf("asking again: %+v, %v", a3, err)
	}
	if _, err := k2.Approve(ctx, a3.ID, person(CapabilityToolInvoke)); err != nil || b.calls.Load() != 2 {
		t.Fatalf("Approve after asking again: %v (%d calls)", err, b.calls.Load())
	}
}

// TestUncertainOutcomeIsNeverReapplied: an effect that may have acted puts
// the instance in recovery with the target facets unknown; applying the
// same prescription again is refused RECOVERY_REQUIRED and the effect does
// not run again; the RECOVERY transition keyed on unknown proceeds.
func TestUncertainOutcomeIsNeverReapplied(t *testing.T) {
	ctx := context.Background()
	b := &bank{outcome: Uncertain}
	k, p := newPayKernel(t, NewMemoryStore(), b)
	if _, err := k.Start(ctx, Instance{ID: "p1", Program: p.Fingerprint(), Phase: "approved"}); err != nil {
		t.Fatal(err)
	}
	pr := agent(CapabilityToolInvoke, CapabilityStateWrite)
	d, err := k.Prescribe(ctx, "p1", pr, Request{Parameters: map[string]string{"iban": iban}})
	if err != nil || d.Kind != Prescribed {
		t.Fatalf("prescribe: %+v %v", d, err)
	}
	if _, err := k.Apply(ctx, d.Prescription.ID, pr); ErrorCode(err) != CodeRecoveryRequired {
		t.Fatalf("apply: %v", err)
	}
	for range 2 {
		if _, err := k.Apply(ctx, d.Prescription.ID, pr); ErrorCode(err) != CodeRecoveryRequired {
			t.Fatalf("re-apply: %v", err)
		}
	}
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("the effect ran %d times", n)
	}
	in, _ := k.Instance(ctx, "p1")
	if in.Recovery == nil || in.Facts["payment.status"].Status != StatusUnknown {
		t.Fatalf("instance = %+v", in)
	}
	rec, err := k.Prescribe(ctx, "p1", pr, Request{})
	if err != nil || rec.Kind != Prescribed || LocalID(rec.Transition) != "reconcile" {
		t.Fatalf("recovery decision = %+v %v", rec, err)
	}
	if _, err := k.Apply(ctx, rec.Prescription.ID, pr); err != nil {
		t.Fatal(err)
	}
}

// TestCrashMidApplyRecoversWithUnknownTargets: a runtime killed while an
// effect was executing leaves the journal at executing and the instance
// pending. A new kernel on the same store journals recovery_required, sets
// the transition's target facets unknown, and the RECOVERY transition keyed
// on unknown applies.
func TestCrashMidApplyRecoversWithUnknownTargets(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	b := &bank{}
	k, p := newPayKernel(t, store, b)
	if _, err := k.Start(ctx, Instance{ID: "c1", Program: p.Fingerprint(), Phase: "approved"}); err != nil {
		t.Fatal(err)
	}
	pr := agent(CapabilityToolInvoke, CapabilityStateWrite)
	d, err := k.Prescribe(ctx, "c1", pr, Request{Parameters: map[string]string{"iban": iban}})
	if err != nil || d.Kind != Prescribed {
		t.Fatalf("prescribe: %+v %v", d, err)
	}
	rx := d.Prescription
	err = store.Update(ctx, func(tx Tx) error {
		in, err := tx.Instance("c1")
		if err != nil {
			return err
		}
		next := in.Clone()
		next.Pending = rx.ID
		if err := tx.UpdateInstance(next, in.Revision, ""); err != nil {
			return err
		}
		for _, st := range []JournalStatus{JournalBegun, JournalExecuting} {
			if err := tx.AppendJournal(JournalEntry{Instance: "c1", Prescription: rx.ID, Transition: rx.Transition, Status: st, At: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := newPayKernel(t, store, b)
	if n, err := k2.RecoverInterrupted(ctx); n != 1 || err != nil {
		t.Fatalf("RecoverInterrupted = %d, %v", n, err)
	}
	in, _ := k2.Instance(ctx, "c1")
	if in.Recovery == nil || in.Pending != "" || in.Facts["payment.status"].Status != StatusUnknown {
		t.Fatalf("instance after restart = %+v", in)
	}
	if got := journalStatuses(t, k2, "c1"); !slices.Equal(got, []JournalStatus{JournalBegun, JournalExecuting, JournalRecoveryRequired}) {
		t.Fatalf("journal = %v", got)
	}
	if _, err := k2.Apply(ctx, rx.ID, pr); ErrorCode(err) != CodeRecoveryRequired {
		t.Fatalf("re-apply after the crash: %v", err)
	}
	rec, err := k2.Prescribe(ctx, "c1", pr, Request{})
	if err != nil || rec.Kind != Prescribed || LocalID(rec.Transition) != "reconcile" {
		t.Fatalf("recovery decision = %+v %v", rec, err)
	}
	if _, err := k2.Apply(ctx, rec.Prescription.ID, pr); err != nil {
		t.Fatal(err)
	}
	if b.calls.Load() != 0 {
		t.Fatalf("the payment effect ran %d times", b.calls.Load())
	}
}

// TestProgramLoads: a person's or the operator's load is active; an
// agent's is only proposed and starts nothing; a second program with an
// existing id loaded by an agent does not change what the id names, and
// a person's approval does.
func TestProgramLoads(t *testing.T) {
	ctx := context.Background()
	k := NewKernel(NewMemoryStore(), testInventory(), WithClock((&clock{t: t0}).now))
	src := fullProgram(t)
	other := variant(t, src, func(m doc) { set(m, "transitions.0.priority", 7) })
	ada := person()
	bot := agent()

	p1, l1, err := k.LoadProgram(ctx, src, ada)
	if err != nil || l1.Status != ProgramActive || l1.LoadedBy != ada.ID {
		t.Fatalf("person's load = %+v, %v", l1, err)
	}
	p2, l2, err := k.LoadProgram(ctx, other, bot)
	if err != nil || l2.Status != ProgramProposed || p2.ID() != p1.ID() {
		t.Fatalf("agent's load = %+v, %v", l2, err)
	}
	if _, err := k.Start(ctx, Instance{Program: p2.Fingerprint(), Phase: "new"}); ErrorCode(err) != CodeProgramNotActive {
		t.Fatalf("start of a proposed program: %v", err)
	}
	if got, err := k.ActiveProgram(ctx, p1.ID()); err != nil || got.Fingerprint() != p1.Fingerprint() {
		t.Fatalf("ActiveProgram = %v, %v; want the person's", got, err)
	}
	// An agent reloading the active program changes nothing, not even the
	// program_version shown beside the same fingerprint.
	if _, l, _ := k.LoadProgram(ctx, src, bot); l.Status != ProgramActive || l.LoadedBy != ada.ID {
		t.Fatalf("agent's reload of an active program = %+v", l)
	}
	relabeled := variant(t, src, func(m doc) { m["program_version"] = "9.9.9" })
	p4, l4, err := k.LoadProgram(ctx, relabeled, bot)
	if err != nil || p4.Fingerprint() != p1.Fingerprint() || p4.Version() != p1.Version() || l4.Version != p1.Version() {
		t.Fatalf("agent's reload under another program_version = %s %+v, %v; want version %s kept", p4.Version(), l4, err, p1.Version())
	}
	if got, _ := k.ActiveProgram(ctx, p1.ID()); got.Version() != p1.Version() {
		t.Fatalf("after the agent's reload the active program shows version %s, want %s", got.Version(), p1.Version())
	}
	if _, err := k.ApproveProgram(ctx, p2.Fingerprint(), bot); ErrorCode(err) != CodeCapabilityDenied {
		t.Fatalf("agent approves: %v", err)
	}
	l, err := k.ApproveProgram(ctx, p2.Fingerprint(), ada)
	if err != nil || l.Status != ProgramActive || l.ActivatedBy != ada.ID || l.LoadedBy != bot.ID {
		t.Fatalf("approve = %+v, %v", l, err)
	}
	if got, _ := k.ActiveProgram(ctx, p1.ID()); got.Fingerprint() != p2.Fingerprint() {
		t.Fatal("the approved program is not the one its id names")
	}
	if _, err := k.Start(ctx, Instance{Program: p2.Fingerprint(), Phase: "new"}); err != nil {
		t.Fatal(err)
	}
	// The operator's reload at start keeps the person's choice.
	if _, err := k.AddProgram(ctx, src); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.ActiveProgram(ctx, p1.ID()); got.Fingerprint() != p2.Fingerprint() {
		t.Fatal("the operator's reload took the id back")
	}
	// A service loads only with flow.load.
	third := variant(t, src, func(m doc) { set(m, "transitions.0.priority", 8) })
	svc := Principal{ID: "ci", Kind: AuthorityService, Grants: []string{}}
	_, l3, _ := k.LoadProgram(ctx, third, svc)
	if l3.Status != ProgramProposed {
		t.Fatalf("service without flow.load = %+v", l3)
	}
	if l3, err = k.DeclineProgram(ctx, l3.Fingerprint, ada, "no"); err != nil || l3.Status != ProgramDeclined || l3.Reason != "no" {
		t.Fatalf("decline = %+v, %v", l3, err)
	}
	svc.Grants = []string{CapabilityFlowLoad}
	if _, l, _ := k.LoadProgram(ctx, third, svc); l.Status != ProgramActive || l.ActivatedBy != "ci" {
		t.Fatalf("service with flow.load = %+v", l)
	}
}

func FuzzDecodeApprovalRecord(f *testing.F) {
	f.Add([]byte(`{"approval":{"id":"apr-1","instance_id":"i","revision":0,"program_fingerprint":"sha256:00","transition":"p/t","requester":"a","awaiting":"human","operation":"op","expected_postcondition":"x","required_capabilities":["tool.invoke"],"status":"pending","created_at":"2026-12-02T12:00:00Z"},"parameters":{"memo":"m"}}`))
	f.Add([]byte(`{"approval":{"id":"apr-2","instance_id":"i","transition":"p/t","status":"stale","changed":["x"],"parameters":[{"name":"iban","secret":true,"digest":"sha256:aa"}],"bindings":[{"kind":"control","name":"profile/email","current":"a","value":"b","revision":3}]}}`))
	f.Add([]byte(`{"approval":{"id":"apr-3","instance_id":"i","transition":"p/t","status":"pending","parameters":[{"name":"iban","secret":true,"value":"DE89"}]}}`))
	f.Add([]byte(`{"approval":{"id":"apr-4","instance_id":"i","transition":"p/t","status":"pending","parameters":[{"name":"iban","secret":true}]},"parameters":{"iban":"DE89"}}`))
	f.Add([]byte(`{"approval":{"id":"apr-5","instance_id":"i","transition":"p/t","status":"pending","quorum":2,"group":"finance","approvers":[{"person":"alice","at":"2026-12-02T12:00:00Z"}]}}`))
	f.Add([]byte(`{"approval":{"id":"apr-6","instance_id":"i","transition":"p/t","status":"pending","quorum":2,"approvers":[{"person":"a"},{"person":"a"}]}}`))
	f.Add([]byte(`{"approval":{"id":"apr-7","instance_id":"i","transition":"p/t","status":"pending","quorum":-1,"approvers":[{"person":""}]}}`))
	f.Add([]byte(`{"approval":{"id":"apr-8","instance_id":"i","transition":"p/t","status":"declined","deadline":"2026-12-02T12:00:02Z","fallback":"decline","reason":"no decision before the deadline"}}`))
	f.Add([]byte(`{"approval":{"id":"apr-9","instance_id":"i","transition":"p/t","status":"pending","deadline":"yesterday","fallback":"approve"}}`))
	f.Add([]byte(`{"approval":{"id":"apr-10","instance_id":"i","transition":"p/t","status":"pending","group":"heads","deadline":"2026-12-02T12:02:00Z","fallback":"decline","escalate_to":"heads","escalated_from":"finance","escalated_at":"2026-12-02T12:01:00Z"}}`))
	f.Add([]byte(`{"approval":{},"approval":{}}`))
	f.Add([]byte(`{"approval":{"id":"x"},"extra":1}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := DecodeApprovalRecord(data)
		if err != nil {
			if ErrorCode(err) != CodeStateInvalid {
				t.Fatalf("error code %q: %v", ErrorCode(err), err)
			}
			return
		}
		for _, p := range rec.Approval.Parameters {
			if p.Secret && (p.Value != "" || rec.Parameters[p.Name] != "") {
				t.Fatalf("a decoded record carries the secret %s", p.Name)
			}
		}
		// What decodes survives a round trip.
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeApprovalRecord(b); err != nil {
			t.Fatalf("round trip: %v\n%s", err, b)
		}
	})
}

// TestPrescriptionDropsSecretOnceApplied: a prescription keeps its secret
// parameter as the effect's input only until it is applied (or expires);
// then the stored record no longer has it.
func TestPrescriptionDropsSecretOnceApplied(t *testing.T) {
	ctx := context.Background()
	for _, outcome := range []Outcome{Succeeded, Failed, Uncertain} {
		t.Run(outcome.String(), func(t *testing.T) {
			store := NewMemoryStore()
			b := &bank{outcome: outcome}
			k, p := newPayKernel(t, store, b)
			if _, err := k.Start(ctx, Instance{ID: "s1", Program: p.Fingerprint(), Phase: "approved"}); err != nil {
				t.Fatal(err)
			}
			pr := agent(CapabilityToolInvoke)
			d, err := k.Prescribe(ctx, "s1", pr, Request{Parameters: map[string]string{"iban": iban, "memo": "June"}})
			if err != nil || d.Kind != Prescribed {
				t.Fatalf("prescribe: %+v %v", d, err)
			}
			k.Apply(ctx, d.Prescription.ID, pr)
			if b.calls.Load() != 1 || b.got[0].Parameters["iban"] != iban {
				t.Fatalf("the effect ran %d times with %v", b.calls.Load(), b.got)
			}
			store.View(ctx, func(tx Tx) error {
				rec, err := tx.Prescription(d.Prescription.ID)
				raw, _ := json.Marshal(rec)
				if err != nil || strings.Contains(string(raw), iban) || rec.Parameters["memo"] != "June" {
					t.Errorf("stored prescription = %s, %v", raw, err)
				}
				return nil
			})
			// Applying again never finds the secret.
			if _, err := k.Apply(ctx, d.Prescription.ID, pr); err == nil && outcome != Succeeded {
				t.Fatal("applied again")
			}
			if b.calls.Load() != 1 {
				t.Fatalf("the effect ran %d times", b.calls.Load())
			}
		})
	}
}

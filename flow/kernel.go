package flow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/assent-run/assent/flow/jcs"
	"github.com/assent-run/assent/internal/keylock"
)

// Kernel runs program instances on a Store: it resolves, prescribes,
// admits and applies transitions, and keeps the approval requests that wait
// for a person. A Kernel is safe for concurrent use.
type Kernel struct {
	store Store
	inv   *Inventory
	now   func() time.Time
	locks lockTable

	mu       sync.Mutex
	programs map[string]*Program

	vault     secretVault
	summarize Summarizer
	groups    Groups
	check     ParameterCheck

	// node names this kernel's node on a store several nodes share, and
	// interruptedAfter is how old another node's apply mark must be
	// before this kernel takes that node for dead and settles it.
	node             string
	interruptedAfter time.Duration
}

// Option configures a Kernel.
type Option func(*Kernel)

// WithClock sets the clock that stamps prescriptions, journal entries and
// receipts and decides expiry. The default is time.Now.
func WithClock(now func() time.Time) Option { return func(k *Kernel) { k.now = now } }

// WithNode names the node this kernel runs on when several nodes share
// one store. An apply marks the instance with the node and the time it
// began, so that RecoverInterrupted at this node's start settles only
// this node's interrupted applies, and SweepInterrupted on the others
// settles them once they are older than the bound WithInterruptedAfter
// sets. The default is the empty name, which suits a single node.
func WithNode(node string) Option { return func(k *Kernel) { k.node = node } }

// DefaultInterruptedAfter is how old another node's apply mark must be
// before SweepInterrupted settles it, when WithInterruptedAfter sets no
// bound. It is well above maxApplyWait, the time an applier waits for
// another, so an apply still running on a live node is not cut short.
const DefaultInterruptedAfter = 2 * time.Minute

// WithInterruptedAfter sets how old another node's apply mark must be
// before this kernel takes that apply for interrupted (its node died mid-
// apply) and settles it; d <= 0 keeps DefaultInterruptedAfter.
func WithInterruptedAfter(d time.Duration) Option {
	return func(k *Kernel) {
		if d > 0 {
			k.interruptedAfter = d
		}
	}
}

// NewKernel returns a kernel that keeps its state in store and runs the
// effects and verifiers of inv.
func NewKernel(store Store, inv *Inventory, opts ...Option) *Kernel {
	k := &Kernel{store: store, inv: inv, now: time.Now, programs: make(map[string]*Program), interruptedAfter: DefaultInterruptedAfter, groups: AnyPerson{}}
	for _, o := range opts {
		o(k)
	}
	return k
}

// Receipt proves that a prescription was applied and committed. Its id is
// "rcp-" and the hex SHA-256 of its RFC 8785 form without the id.
type Receipt struct {
	ID           string    `json:"id"`
	Prescription string    `json:"prescription"`
	Instance     string    `json:"instance_id"`
	Transition   string    `json:"transition"`
	Program      string    `json:"program_fingerprint"`
	Principal    string    `json:"principal"`
	FromRevision int64     `json:"from_revision"`
	Revision     int64     `json:"revision"`
	Phase        string    `json:"phase"`
	Snapshot     string    `json:"snapshot_fingerprint"`
	CommittedAt  time.Time `json:"committed_at"`
}

func (r *Receipt) computeID() string {
	b := append([]byte(nil), `{"committed_at":`...)
	b = jcs.AppendString(b, r.CommittedAt.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"from_revision":`...)
	b = jcs.AppendInt(b, r.FromRevision)
	b = append(b, `,"instance_id":`...)
	b = jcs.AppendString(b, r.Instance)
	b = append(b, `,"phase":`...)
	b = jcs.AppendString(b, r.Phase)
	b = append(b, `,"prescription":`...)
	b = jcs.AppendString(b, r.Prescription)
	b = append(b, `,"principal":`...)
	b = jcs.AppendString(b, r.Principal)
	b = append(b, `,"program_fingerprint":`...)
	b = jcs.AppendString(b, r.Program)
	b = append(b, `,"revision":`...)
	b = jcs.AppendInt(b, r.Revision)
	b = append(b, `,"snapshot_fingerprint":`...)
	b = jcs.AppendString(b, r.Snapshot)
	b = append(b, `,"transition":`...)
	b = jcs.AppendString(b, r.Transition)
	b = append(b, '}')
	return contentID("rcp-", b)
}

// Program returns the stored program with this fingerprint.
func (k *Kernel) Program(ctx context.Context, fingerprint string) (*Program, error) {
	k.mu.Lock()
	p := k.programs[fingerprint]
	k.mu.Unlock()
	if p != nil {
		return p, nil
	}
	var src []byte
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		src, err = tx.Program(fingerprint)
		return err
	})
	if err != nil {
		return nil, notFound(err, "program", fingerprint)
	}
	p, err = Load(src, k.inv)
	if err != nil {
		return nil, err
	}
	if p.Fingerprint() != fingerprint {
		return nil, errorf(CodeProgramInvalid, "the stored program %s now loads as %s; the inventory changed", fingerprint, p.Fingerprint())
	}
	k.mu.Lock()
	k.programs[fingerprint] = p
	k.mu.Unlock()
	return p, nil
}

func notFound(err error, what, id string) error {
	if errors.Is(err, ErrNotFound) {
		return errorf(CodeNotFound, "no %s %s", what, id)
	}
	return err
}

// Start creates an instance of a stored program. inst.Program names the
// program's fingerprint, which must be active (PROGRAM_NOT_ACTIVE
// otherwise); an empty inst.ID gets a random "ins-" id; the revision
// starts at 0.
func (k *Kernel) Start(ctx context.Context, inst Instance) (Instance, error) {
	p, err := k.Program(ctx, inst.Program)
	if err != nil {
		return Instance{}, err
	}
	if inst.ID == "" {
		var b [12]byte
		rand.Read(b[:])
		inst.ID = "ins-" + hex.EncodeToString(b[:])
	}
	inst.Revision, inst.Recovery = 0, nil
	inst.ClearPending()
	if inst.Facts == nil {
		inst.Facts = map[string]Fact{}
	}
	if err := inst.Validate(); err != nil {
		return Instance{}, err
	}
	if inst.Objective != "" && p.contracts[inst.Objective] == nil {
		return Instance{}, &Error{Code: CodeObjectiveUnknown, Path: "objective", Message: fmt.Sprintf("program %s has no objective contract %q", p.ID(), inst.Objective)}
	}
	err = k.store.Update(ctx, func(tx Tx) error {
		if err := requireActive(tx, inst.Program); err != nil {
			return err
		}
		return tx.CreateInstance(inst)
	})
	return inst.Clone(), err
}

// Instance returns an instance.
func (k *Kernel) Instance(ctx context.Context, id string) (Instance, error) {
	var inst Instance
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		inst, err = tx.Instance(id)
		return err
	})
	return inst, notFound(err, "instance", id)
}

// Journal returns an instance's journal.
func (k *Kernel) Journal(ctx context.Context, id string) ([]JournalEntry, error) {
	var j []JournalEntry
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		j, err = tx.Journal(id)
		return err
	})
	return j, err
}

// Prescription returns an issued prescription (secret parameters appear as
// digests).
func (k *Kernel) Prescription(ctx context.Context, id string) (Prescription, error) {
	var rec PrescriptionRecord
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		rec, err = tx.Prescription(id)
		return err
	})
	return rec.Prescription, notFound(err, "prescription", id)
}

// Receipt returns the receipt of a committed prescription.
func (k *Kernel) Receipt(ctx context.Context, prescription string) (Receipt, error) {
	var r Receipt
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		r, err = tx.Receipt(prescription)
		return err
	})
	return r, notFound(err, "receipt for prescription", prescription)
}

// Observation is what the outside world reports about an instance.
type Observation struct {
	// Facts are set on the instance (for example a Run's progress under
	// RunFacet).
	Facts map[string]Fact
	// Transition optionally names the OBSERVED_EXTERNAL transition that
	// happened. Its source phase and conditions must hold after Facts are
	// applied; the instance then moves to its target phase (Phase when it
	// has several) and the transition's verifier must pass.
	Transition string
	Phase      string
	// With CheckRevision set, Revision is the revision the observer saw and
	// the observation is refused with ErrConflict if the instance has moved.
	CheckRevision bool
	Revision      int64
}

// CodeObservationInvalid: an observation names a transition that is not
// OBSERVED_EXTERNAL, does not apply, or fails its verifier.
const CodeObservationInvalid = "OBSERVATION_INVALID"

// Observe records an observation and moves the instance to a new revision.
// Prescriptions issued before it become stale.
func (k *Kernel) Observe(ctx context.Context, id string, o Observation) (Instance, error) {
	var out Instance
	err := k.store.Update(ctx, func(tx Tx) error {
		inst, err := tx.Instance(id)
		if err != nil {
			return notFound(err, "instance", id)
		}
		if o.CheckRevision && inst.Revision != o.Revision {
			return ErrConflict
		}
		next := inst.Clone()
		if next.Facts == nil {
			next.Facts = map[string]Fact{}
		}
		for f, v := range o.Facts {
			next.Facts[f] = v
		}
		if o.Transition != "" {
			if err := k.observeTransition(ctx, &inst, &next, o); err != nil {
				return err
			}
		}
		next.Revision++
		if err := next.Validate(); err != nil {
			return err
		}
		out = next
		return tx.UpdateInstance(next, inst.Revision, inst.Pending)
	})
	return out, err
}

func (k *Kernel) observeTransition(ctx context.Context, before, next *Instance, o Observation) error {
	p, err := k.Program(ctx, before.Program)
	if err != nil {
		return err
	}
	t := p.lookup(o.Transition)
	switch {
	case t == nil:
		return errorf(CodeObservationInvalid, "the program has no transition %q", o.Transition)
	case t.Controllable():
		return errorf(CodeObservationInvalid, "transition %s is %s; only OBSERVED_EXTERNAL transitions are observed", t.ID, t.SelectionClass)
	case !contains(t.SourcePhases, before.Phase):
		return errorf(CodeObservationInvalid, "transition %s does not start in phase %s", t.ID, before.Phase)
	}
	if i := next.firstFailing(t.SourceConditions); i >= 0 {
		return errorf(CodeObservationInvalid, "source condition on %s of %s does not hold", t.SourceConditions[i].Facet, t.ID)
	}
	switch {
	case o.Phase != "" && contains(t.TargetPhases, o.Phase):
		next.Phase = o.Phase
	case o.Phase == "" && len(t.TargetPhases) == 1:
		next.Phase = t.TargetPhases[0]
	default:
		return errorf(CodeObservationInvalid, "name which of the target phases %v of %s was reached", t.TargetPhases, t.ID)
	}
	v := k.inv.verifier(t.Verifier)
	if v == nil {
		return errorf(CodeObservationInvalid, "verifier %s is not available", t.Verifier)
	}
	if err := v.Verify(ctx, &VerifyRequest{Transition: t.clone(), Before: before.Clone(), After: next.Clone()}); err != nil {
		return errorf(CodeObservationInvalid, "verifier %s refused the observation of %s: %v", t.Verifier, t.ID, err)
	}
	return nil
}

// Instances lists the stored instances, by id.
func (k *Kernel) Instances(ctx context.Context) ([]Instance, error) {
	var out []Instance
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		out, err = tx.Instances()
		return err
	})
	return out, err
}

// Programs lists the fingerprints of the stored programs, sorted.
func (k *Kernel) Programs(ctx context.Context) ([]string, error) {
	var out []string
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		out, err = tx.Programs()
		return err
	})
	return out, err
}

// Resolve decides the next step for principal on an instance without
// recording anything.
func (k *Kernel) Resolve(ctx context.Context, id string, pr Principal, req Request) (Decision, error) {
	inst, err := k.Instance(ctx, id)
	if err != nil {
		return Decision{}, err
	}
	return k.resolve(ctx, inst, pr, req)
}

// resolve is Resolve on inst as read.
func (k *Kernel) resolve(ctx context.Context, inst Instance, pr Principal, req Request) (Decision, error) {
	p, err := k.Program(ctx, inst.Program)
	if err != nil {
		return Decision{}, err
	}
	d := Resolve(p, k.inv, &inst, &pr, req, k.now())
	if d.Kind == Prescribed || (d.Kind == Frontier && d.Awaiting == AuthorityHuman) {
		if t := p.lookup(d.Transition); t != nil {
			if err := k.checkParameters(ctx, p, t, req.Parameters); err != nil {
				var fe *Error
				errors.As(err, &fe)
				d = refuse(d, fe.Code, "%s", fe.Message)
			}
		}
	}
	return d, nil
}

// Prescribe resolves and, when the decision is PRESCRIBED, stores the
// prescription so that Apply can find it by id.
func (k *Kernel) Prescribe(ctx context.Context, id string, pr Principal, req Request) (Decision, error) {
	if err := pr.Validate(); err != nil {
		return Decision{}, err
	}
	inst, err := k.Instance(ctx, id)
	if err != nil {
		return Decision{}, err
	}
	return k.prescribe(ctx, inst, pr, req)
}

// PrescribeInstance is Prescribe on inst as the caller read it, saving the
// kernel's own read of the instance when the caller needed it anyway (to
// check who owns it, say). A prescription binds the revision it was
// resolved at and Apply resolves again under the instance's lock, so one
// made from an instance that has since moved on is refused there
// (STALE_PRESCRIPTION), as one made by Prescribe would be.
func (k *Kernel) PrescribeInstance(ctx context.Context, inst Instance, pr Principal, req Request) (Decision, error) {
	if err := pr.Validate(); err != nil {
		return Decision{}, err
	}
	return k.prescribe(ctx, inst, pr, req)
}

func (k *Kernel) prescribe(ctx context.Context, inst Instance, pr Principal, req Request) (Decision, error) {
	d, err := k.resolve(ctx, inst, pr, req)
	if err != nil || d.Kind != Prescribed {
		return d, err
	}
	// The record keeps the raw values, secret ones included, as the
	// effect's input until the prescription is applied; Secret names the
	// values to drop then.
	rec := PrescriptionRecord{Prescription: *d.Prescription, Parameters: cloneMap(req.Parameters)}
	if p, err := k.Program(ctx, d.Prescription.Program); err == nil {
		if t := p.lookup(d.Transition); t != nil {
			for _, prm := range t.Parameters {
				if _, ok := rec.Parameters[prm.Name]; ok && prm.Secret {
					rec.Secret = append(rec.Secret, prm.Name)
				}
			}
		}
	}
	// A prescription applied before is kept as it is: it must not get
	// back the secret values dropped when it was applied. The receipts are
	// read only when the id is stored already, so a new prescription's
	// write reads nothing that a concurrent commit writes.
	err = k.store.Update(ctx, func(tx Tx) error { return tx.AddPrescription(rec) })
	return d, err
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Apply applies a stored prescription for principal and returns the
// receipt. In order: a prescription already committed returns its receipt;
// the principal must be the one it was issued to; it must not have expired
// (PRESCRIPTION_EXPIRED); the instance and the transition's owned
// resources are locked; re-resolution must yield the same prescription
// (STALE_PRESCRIPTION) and expiry is checked again; the journal records
// begun and executing; the effect runs with only the effective
// capabilities; the verifier checks the result; the new state, revision
// N+1, the receipt and the journal's committed entry are written in one
// transaction. A Failed effect is journalled aborted and leaves the instance
// as it was (EFFECT_FAILED); an Uncertain one, a panic or a failed
// verification is journalled recovery_required and puts the instance in
// recovery mode (RECOVERY_REQUIRED).
func (k *Kernel) Apply(ctx context.Context, prescription string, pr Principal) (Receipt, error) {
	return k.apply(ctx, prescription, pr, nil, nil, nil)
}

// An ApplyCheck decides whether a caller may apply a prescription, given
// the prescription and its instance as stored. Its error ends the apply
// before anything is written, and is returned as it is.
type ApplyCheck func(rx Prescription, inst Instance) error

// ApplyChecked is Apply after check: check runs on the prescription and
// its instance read in the same transaction as the prescription's receipt,
// so that a caller who must first learn whether the prescription is theirs
// to apply (the instance's owner, say) does not read them again. A
// prescription whose instance is gone is checked with the zero Instance.
func (k *Kernel) ApplyChecked(ctx context.Context, prescription string, pr Principal, check ApplyCheck) (Receipt, error) {
	return k.apply(ctx, prescription, pr, nil, nil, check)
}

// apply is Apply; bound, when not nil, is what a person approved, handed to
// the effect so that it acts on exactly that; claim, when not nil, is the
// approval this apply carries out, claimed and recorded in the same
// transactions as the instance.
func (k *Kernel) apply(ctx context.Context, prescription string, pr Principal, bound []Binding, claim *approvalClaim, check ApplyCheck) (Receipt, error) {
	var rec PrescriptionRecord
	var receipt Receipt
	replay := false
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		if rec, err = tx.Prescription(prescription); err != nil {
			return notFound(err, "prescription", prescription)
		}
		if check != nil {
			inst, err := tx.Instance(rec.Prescription.Instance)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			if err := check(rec.Prescription, inst); err != nil {
				return err
			}
		}
		receipt, err = tx.Receipt(prescription)
		if err == nil {
			replay = true
			return nil
		}
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return Receipt{}, err
	}
	rx := rec.Prescription
	if pr.AuthorityFingerprint() != rx.Authority {
		return Receipt{}, errorf(CodeStalePrescription, "prescription %s was issued to another principal or authority; resolve again", rx.ID)
	}
	if replay {
		return receipt, nil
	}
	if !k.now().Before(rx.ExpiresAt) {
		if len(rec.Secret) > 0 {
			_ = k.store.Update(context.WithoutCancel(ctx), func(tx Tx) error { return dropSecrets(tx, rx.ID) })
		}
		return Receipt{}, errorf(CodePrescriptionExpired, "prescription %s expired at %s; resolve again", rx.ID, rx.ExpiresAt.Format(time.RFC3339))
	}
	params := cloneMap(rec.Parameters)
	missing := ""
	for _, name := range rec.Secret {
		if _, ok := params[name]; !ok {
			missing = name
		}
	}
	p, err := k.Program(ctx, rx.Program)
	if err != nil {
		return Receipt{}, err
	}
	t := p.lookup(rx.Transition)
	if t == nil {
		return Receipt{}, errorf(CodeStalePrescription, "program %s has no transition %s", rx.Program, rx.Transition)
	}
	keys := []string{"instance\x00" + rx.Instance}
	for _, r := range t.OwnedResources {
		keys = append(keys, "resource\x00"+p.ID()+"\x00"+r)
	}
	unlock, err := k.locks.acquire(ctx, keys)
	if err != nil {
		return Receipt{}, err
	}
	defer unlock()

	// Begin: re-resolve under the locks. The locks hold within this
	// process only; another node applying the same prescription shows as
	// the instance marked with it, and this apply waits for that one to
	// settle and answers its receipt.
	var before Instance
	begin := func(tx Tx) error {
		// An applied prescription moved its instance past the revision it
		// binds, so the receipt is read only when the instance is not at
		// that revision: an apply that goes ahead reads nothing that a
		// concurrent commit of another instance writes.
		inst, err := tx.Instance(rx.Instance)
		if err != nil || inst.Revision != rx.Revision {
			if r, rerr := tx.Receipt(rx.ID); rerr == nil {
				receipt, replay = r, true
				return nil
			}
		}
		if err != nil {
			return notFound(err, "instance", rx.Instance)
		}
		if inst.Pending == rx.ID {
			return errApplyingElsewhere
		}
		if inst.Pending != "" {
			return errorf(CodeRevisionConflict, "prescription %s is being applied to instance %s; try again when it settles", inst.Pending, inst.ID)
		}
		if inst.Recovery != nil && t.SelectionClass != Recovery {
			return errorf(CodeRecoveryRequired, "instance %s needs recovery after %s (%s): its outcome is uncertain, so %s cannot be applied again; only a RECOVERY transition proceeds",
				inst.ID, inst.Recovery.Transition, inst.Recovery.Cause, rx.Transition)
		}
		if missing != "" {
			return errorf(CodeStalePrescription, "the value of secret parameter %s of prescription %s is no longer kept (it was applied or expired); prescribe again", missing, rx.ID)
		}
		d := Resolve(p, k.inv, &inst, &pr, Request{Transition: rx.Transition, Objective: rx.Objective, Parameters: params}, rx.IssuedAt)
		if d.Kind != Prescribed || !d.Prescription.sameBinding(&rx) {
			msg := "the instance, program or authority changed since it was issued"
			if d.Message != "" {
				msg = d.Message
			}
			return errorf(CodeStalePrescription, "prescription %s no longer resolves (%s); resolve again", rx.ID, msg)
		}
		if !k.now().Before(rx.ExpiresAt) {
			return errorf(CodePrescriptionExpired, "prescription %s expired at %s; resolve again", rx.ID, rx.ExpiresAt.Format(time.RFC3339))
		}
		if claim != nil {
			if err := claim.claim(tx, k.now().UTC()); err != nil {
				return err
			}
		}
		before = inst
		next := inst.Clone()
		next.Pending, next.PendingNode, next.PendingAt = rx.ID, k.node, k.now().UTC()
		if err := tx.UpdateInstance(next, inst.Revision, ""); err != nil {
			return err
		}
		// Begun and executing commit together: nothing between them can
		// fail, and recovery reads the instance's mark, not which of the
		// two was written last.
		if err := tx.AppendJournal(k.entry(&rx, inst.Revision, JournalBegun, "")); err != nil {
			return err
		}
		return tx.AppendJournal(k.entry(&rx, inst.Revision, JournalExecuting, ""))
	}
	err = k.store.Update(ctx, begin)
	waited := time.Duration(0)
	for wait := 10 * time.Millisecond; errors.Is(err, errApplyingElsewhere) || errors.Is(err, ErrContention); wait = min(2*wait, 200*time.Millisecond) {
		if waited >= maxApplyWait {
			if errors.Is(err, ErrContention) {
				return Receipt{}, err
			}
			return Receipt{}, errorf(CodeRevisionConflict, "prescription %s is being applied elsewhere and did not settle within %s; apply it again to get its receipt", rx.ID, maxApplyWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(err, ErrContention) {
				return Receipt{}, err
			}
			return Receipt{}, errorf(CodeRevisionConflict, "prescription %s is being applied elsewhere and did not settle before the request ended; apply it again to get its receipt", rx.ID)
		case <-t.C:
		}
		waited += wait
		err = k.store.Update(ctx, begin)
	}
	if err != nil || replay {
		return receipt, err
	}

	tc := t.clone()
	req := &EffectRequest{
		Instance:     before.Clone(),
		Transition:   tc,
		Prescription: rx,
		Capabilities: slices.Clone(rx.EffectiveCapabilities),
		Parameters:   params,
		Principal:    pr,
		Bindings:     cloneBindings(bound),
	}
	if tc.Prescription != nil {
		req.Arguments = slices.Clone(tc.Prescription.Arguments)
	}
	res := k.runEffect(ctx, t, req)
	switch res.Outcome {
	case Failed:
		return Receipt{}, k.settle(ctx, &rx, before, nil, JournalAborted, res.Err)
	case Succeeded:
	default:
		return Receipt{}, k.settle(ctx, &rx, before, res.Facts, JournalRecoveryRequired, res.Err)
	}

	after := before.Clone()
	after.ClearPending()
	if after.Facts == nil {
		after.Facts = map[string]Fact{}
	}
	for f, v := range res.Facts {
		after.Facts[f] = v
	}
	switch {
	case res.Phase != "":
		after.Phase = res.Phase
	case len(t.TargetPhases) == 1:
		after.Phase = t.TargetPhases[0]
	default:
		return Receipt{}, k.settle(ctx, &rx, before, res.Facts, JournalRecoveryRequired,
			fmt.Errorf("effect %s did not say which of the target phases %v it reached", t.Effect, t.TargetPhases))
	}
	if err := after.Validate(); err != nil {
		return Receipt{}, k.settle(ctx, &rx, before, nil, JournalRecoveryRequired, fmt.Errorf("effect %s produced an invalid state: %v", t.Effect, err))
	}
	if v := k.inv.verifier(t.Verifier); v == nil {
		return Receipt{}, k.settle(ctx, &rx, before, res.Facts, JournalRecoveryRequired, fmt.Errorf("verifier %s is not available", t.Verifier))
	} else if err := v.Verify(ctx, &VerifyRequest{Transition: tc, Before: before.Clone(), After: after.Clone(), Result: res}); err != nil {
		return Receipt{}, k.settle(ctx, &rx, before, res.Facts, JournalRecoveryRequired, fmt.Errorf("verifier %s: %v", t.Verifier, err))
	}
	if rx.Objective != "" {
		after.Objective = rx.Objective
	}
	if t.SelectionClass == Recovery {
		after.Recovery = nil
	}
	after.Revision = before.Revision + 1
	receipt = Receipt{
		Prescription: rx.ID,
		Instance:     rx.Instance,
		Transition:   rx.Transition,
		Program:      rx.Program,
		Principal:    pr.ID,
		FromRevision: before.Revision,
		Revision:     after.Revision,
		Phase:        after.Phase,
		Snapshot:     after.SnapshotFingerprint(),
		CommittedAt:  k.now().UTC(),
	}
	receipt.ID = receipt.computeID()
	// The commit must happen even if the caller has gone: the effect ran.
	// A commit the store could not order with concurrent ones wrote
	// nothing and is run again (it commits only over the mark this apply
	// made), for as long as an apply elsewhere is waited for: giving up
	// would put the instance in recovery although its outcome is known.
	commitCtx := context.WithoutCancel(ctx)
	err = k.updateContended(commitCtx, func(tx Tx) error {
		if err := tx.UpdateInstance(after, before.Revision, rx.ID); err != nil {
			return err
		}
		if err := tx.PutReceipt(receipt); err != nil {
			return err
		}
		if claim != nil {
			if err := claim.approve(tx, receipt.ID, receipt.CommittedAt); err != nil {
				return err
			}
		}
		if len(rec.Secret) > 0 {
			// Only a prescription with secret values has any to drop.
			if err := dropSecrets(tx, rx.ID); err != nil {
				return err
			}
		}
		return tx.AppendJournal(k.entry(&rx, before.Revision, JournalCommitted, ""))
	})
	if err != nil {
		return Receipt{}, k.settle(commitCtx, &rx, before, res.Facts, JournalRecoveryRequired, fmt.Errorf("commit failed: %v", err))
	}
	return receipt, nil
}

// updateContended is store.Update, run again while it fails with
// ErrContention, for up to maxApplyWait.
func (k *Kernel) updateContended(ctx context.Context, fn func(Tx) error) error {
	err := k.store.Update(ctx, fn)
	for wait, waited := 10*time.Millisecond, time.Duration(0); errors.Is(err, ErrContention) && waited < maxApplyWait; wait = min(2*wait, 200*time.Millisecond) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		waited += wait
		err = k.store.Update(ctx, fn)
	}
	return err
}

// errApplyingElsewhere is begin's answer when the instance is marked with
// the very prescription being applied: another applier holds it.
var errApplyingElsewhere = errors.New("flow: the prescription is being applied by another applier")

// maxApplyWait bounds how long an apply waits for another applier of the
// same prescription to settle.
const maxApplyWait = 30 * time.Second

// RecoverInterrupted settles applies that were cut short, for example by a
// crash: every instance still marked with a pending prescription by this
// node (see WithNode), or by another node longer ago than the
// interrupted-apply bound, is journalled recovery_required and put in
// recovery mode, since its effect may or may not have run; the approval
// the apply carried out is handed back. Call it at start, before serving.
// Marks of other nodes younger than the bound are left alone: those nodes
// may be applying now. It returns the number of instances settled.
func (k *Kernel) RecoverInterrupted(ctx context.Context) (int, error) {
	return k.settleInterrupted(ctx, true)
}

// SweepInterrupted settles the applies of other nodes whose marks are
// older than the interrupted-apply bound: their node died mid-apply, and
// without the sweep the instance (and the approval being carried out)
// would stay marked until that node came back. Nodes sharing a store call
// it periodically. A mark of this node older than the bound is settled
// too, once no apply of this process holds its instance: its apply ended
// without clearing it (the store failed as it settled). It returns the
// number settled.
func (k *Kernel) SweepInterrupted(ctx context.Context) (int, error) {
	return k.settleInterrupted(ctx, false)
}

// interrupted reports whether inst's apply mark is one to settle: at
// start (own) every mark of this node, and at any time a mark older than
// the bound. The caller holds the instance's lock when it decides, so a
// mark of an apply still running in this process is never taken.
func (k *Kernel) interrupted(inst *Instance, own bool) bool {
	if inst.Pending == "" {
		return false
	}
	if own && inst.PendingNode == k.node {
		return true
	}
	return inst.PendingAt.IsZero() || k.now().Sub(inst.PendingAt) >= k.interruptedAfter
}

func (k *Kernel) settleInterrupted(ctx context.Context, own bool) (int, error) {
	var list []Instance
	var err error
	if own {
		// At start: this node's marks, whatever their age.
		list, err = k.Instances(ctx)
	} else {
		list, err = k.markedInstances(ctx, k.now().Add(-k.interruptedAfter))
	}
	if err != nil {
		return 0, err
	}
	settled := 0
	for _, inst := range list {
		if !k.interrupted(&inst, own) {
			continue
		}
		unlock, err := k.locks.acquire(ctx, []string{"instance\x00" + inst.ID})
		if err != nil {
			return settled, err
		}
		n, err := k.recoverOne(ctx, inst.ID, own)
		unlock()
		if err != nil {
			return settled, err
		}
		settled += n
	}
	return settled, nil
}

// recoverOne settles instance id's interrupted apply, when the instance,
// read again under its lock, is still marked by one: it returns 1 when it
// settled one.
func (k *Kernel) recoverOne(ctx context.Context, id string, own bool) (int, error) {
	var rec PrescriptionRecord
	var before Instance
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		if before, err = tx.Instance(id); err != nil || !k.interrupted(&before, own) {
			return err
		}
		rec, err = tx.Prescription(before.Pending)
		return err
	})
	if err != nil || !k.interrupted(&before, own) {
		return 0, err
	}
	rx := rec.Prescription
	cause := errors.New("the runtime stopped while applying it")
	if before.PendingNode != k.node {
		cause = fmt.Errorf("node %q began applying it at %s and did not finish within %s", before.PendingNode, before.PendingAt.Format(time.RFC3339), k.interruptedAfter)
	}
	err = k.settle(ctx, &rx, before, nil, JournalRecoveryRequired, cause)
	if ErrorCode(err) == CodeRecoveryRequired {
		return 1, nil
	}
	if errors.Is(err, ErrConflict) {
		return 0, nil // the applier settled it meanwhile
	}
	return 0, err
}

// runEffect checks the effect's minimum and runs it, turning a panic into
// an uncertain outcome.
func (k *Kernel) runEffect(ctx context.Context, t *Transition, req *EffectRequest) (res EffectResult) {
	def, ok := k.inv.effect(t.Effect)
	if !ok || def.impl == nil {
		return Fail(errorf(CodeEffectUnavailable, "effect %s has no implementation in this runtime", t.Effect))
	}
	if err := req.Require(def.minimum); err != nil {
		return Fail(err)
	}
	defer func() {
		if r := recover(); r != nil {
			res = EffectResult{Outcome: Uncertain, Err: fmt.Errorf("%w: %v", errEffectPanicked, r)}
		}
	}()
	res = def.impl.Apply(ctx, req)
	if res.Phase != "" && !contains(t.TargetPhases, res.Phase) {
		return EffectResult{Outcome: Uncertain, Facts: res.Facts, Err: fmt.Errorf("effect %s reported phase %s, which is not a target phase", t.Effect, res.Phase)}
	}
	return res
}

// settle ends an apply that did not commit: the pending mark is cleared,
// the journal records status, and for recovery_required the instance enters
// recovery mode with the facts the effect reported.
func (k *Kernel) settle(ctx context.Context, rx *Prescription, before Instance, facts map[string]Fact, status JournalStatus, cause error) error {
	if cause == nil {
		cause = errors.New("no cause given")
	}
	ctx = context.WithoutCancel(ctx)
	var targets []string
	if status == JournalRecoveryRequired {
		targets = k.targetFacets(ctx, rx)
	}
	// Run again on contention, as the commit is: a settling given up
	// leaves the mark, which the sweep would later settle as recovery
	// although this apply knows how it ended.
	err := k.updateContended(ctx, func(tx Tx) error {
		next := before.Clone()
		next.ClearPending()
		if status == JournalRecoveryRequired {
			if next.Facts == nil {
				next.Facts = map[string]Fact{}
			}
			for f, v := range facts {
				next.Facts[f] = v
			}
			if next.Validate() != nil {
				next.Facts = before.Clone().Facts
			}
			// What the effect may have changed is not known: every facet
			// of the target conditions it did not report becomes unknown,
			// so that a RECOVERY transition keyed on it can reconcile.
			for _, f := range targets {
				if _, ok := facts[f]; !ok {
					next.Facts[f] = Fact{Status: StatusUnknown}
				}
			}
			next.Recovery = &RecoveryMark{Transition: rx.Transition, Prescription: rx.ID, Cause: truncate(cause.Error(), 1024)}
		}
		if err := tx.UpdateInstance(next, before.Revision, rx.ID); err != nil {
			return err
		}
		if err := releaseClaims(tx, before.ID); err != nil {
			return err
		}
		if err := dropSecrets(tx, rx.ID); err != nil {
			return err
		}
		return tx.AppendJournal(k.entry(rx, before.Revision, status, truncate(cause.Error(), 1024)))
	})
	if err != nil {
		return fmt.Errorf("flow: settling %s after %v: %w", rx.ID, cause, err)
	}
	if status == JournalAborted {
		if ErrorCode(cause) != "" {
			return &Error{Code: ErrorCode(cause), Message: fmt.Sprintf("transition %s was not applied: %v", rx.Transition, cause)}
		}
		return errorf(CodeEffectFailed, "transition %s was not applied; the instance is unchanged: %v", rx.Transition, cause)
	}
	return errorf(CodeRecoveryRequired, "the outcome of %s is uncertain (%v); the instance needs a RECOVERY transition", rx.Transition, cause)
}

// targetFacets returns the facets of the target conditions of rx's
// transition (the phase aside).
func (k *Kernel) targetFacets(ctx context.Context, rx *Prescription) []string {
	p, err := k.Program(ctx, rx.Program)
	if err != nil {
		return nil
	}
	t := p.lookup(rx.Transition)
	if t == nil {
		return nil
	}
	var out []string
	for _, c := range t.TargetConditions {
		if c.Facet != PhaseFacet && !slices.Contains(out, c.Facet) {
			out = append(out, c.Facet)
		}
	}
	return out
}

// dropSecrets removes the raw values of secret parameters from a stored
// prescription once it has been applied (committed, aborted or left for
// recovery) or has expired: they were its effect's input and are not
// needed again.
func dropSecrets(tx Tx, id string) error {
	rec, err := tx.Prescription(id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	if len(rec.Secret) == 0 {
		return nil
	}
	params := cloneMap(rec.Parameters) // the stored map may be shared with readers
	for _, name := range rec.Secret {
		delete(params, name)
	}
	rec.Parameters = params
	return tx.PutPrescription(rec)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (k *Kernel) entry(rx *Prescription, rev int64, s JournalStatus, msg string) JournalEntry {
	return JournalEntry{Instance: rx.Instance, Prescription: rx.ID, Transition: rx.Transition, Revision: rev, Status: s, At: k.now().UTC(), Error: msg}
}

// lockTable holds named locks that are acquired together in sorted order,
// so that two appliers can never deadlock.
type lockTable struct {
	locks keylock.Map
}

// acquire takes the locks of keys, in sorted order, and returns the
// function that releases them all. When ctx ends first it holds none and
// returns ctx's error.
func (lt *lockTable) acquire(ctx context.Context, keys []string) (func(), error) {
	keys = slices.Clone(keys)
	sort.Strings(keys)
	keys = slices.Compact(keys)
	held := make([]func(), 0, len(keys))
	release := func() {
		for _, unlock := range held {
			unlock()
		}
	}
	for _, key := range keys {
		unlock, err := lt.locks.Lock(ctx, key)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, unlock)
	}
	return release, nil
}

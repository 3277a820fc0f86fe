package flow

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrNotFound is returned by a Tx when a record does not exist. Stores may
// wrap it; the kernel tests with errors.Is.
var ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}

// ErrConflict is returned by Tx.UpdateInstance when the stored instance no
// longer has the expected revision and pending prescription.
var ErrConflict = &Error{Code: CodeRevisionConflict, Message: "the instance changed concurrently; resolve again"}

// ErrContention is returned, wrapped, by a Store whose Update could not be
// ordered with concurrent Updates even after running it again for a while
// (PostgreSQL's serialization failures, which concurrent transactions on
// different instances can meet when their reads and writes share index
// pages). The Update changed nothing and may be run again. The kernel does
// so where giving up would cost more than waiting: to mark an instance for
// an apply, and above all to commit an effect that has already run.
var ErrContention = &Error{Code: CodeRevisionConflict, Message: "the store could not order this step with concurrent ones; send it again"}

// Store persists programs, instances, prescriptions, approvals, the journal
// and receipts. The kernel does every read-check-write inside Update, so an
// implementation must make each Update atomic and isolated (serializable):
// either all of fn's writes persist or none do.
type Store interface {
	// Update runs fn in a read-write transaction. When fn returns an
	// error, nothing it wrote is kept and Update returns that error.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
}

// Tx is one transaction of a Store. Getters return ErrNotFound for a
// missing record.
type Tx interface {
	// Program returns the source document of the program with this
	// fingerprint.
	Program(fingerprint string) ([]byte, error)
	// PutProgram stores a program's source under its fingerprint; storing
	// the same fingerprint again is a no-op.
	PutProgram(fingerprint string, source []byte) error
	// Programs returns the stored fingerprints, sorted.
	Programs() ([]string, error)
	// ProgramLoad returns who loaded the program with this fingerprint
	// and whether it is active.
	ProgramLoad(fingerprint string) (ProgramLoad, error)
	// PutProgramLoad stores or replaces a program's load record.
	PutProgramLoad(l ProgramLoad) error
	// ProgramLoads returns every load record, sorted by fingerprint.
	ProgramLoads() ([]ProgramLoad, error)

	// Instance returns the instance with this id.
	Instance(id string) (Instance, error)
	// CreateInstance stores a new instance; it fails if the id exists.
	CreateInstance(inst Instance) error
	// UpdateInstance replaces an instance if the stored one has revision
	// rev and pending prescription pending; otherwise it returns
	// ErrConflict.
	UpdateInstance(inst Instance, rev int64, pending string) error
	// Instances returns every instance, sorted by id.
	Instances() ([]Instance, error)
	// MarkedInstances returns the instances marked with an apply in
	// progress (Pending set) whose mark was made at or before before, or
	// carries no time, sorted by id. A store may compare at a coarser
	// precision and return a few marked a little later; the kernel
	// checks each again.
	MarkedInstances(before time.Time) ([]Instance, error)

	// Prescription returns an issued prescription by id.
	Prescription(id string) (PrescriptionRecord, error)
	// PutPrescription stores an issued prescription under its id,
	// replacing the one stored.
	PutPrescription(rec PrescriptionRecord) error
	// AddPrescription stores an issued prescription under its id,
	// replacing the one stored there unless that one was applied (its
	// receipt is stored): an applied prescription's secret values were
	// dropped and must stay so. A store reads the receipts only when a
	// prescription is stored under the id already.
	AddPrescription(rec PrescriptionRecord) error

	// Approval returns an approval request by id.
	Approval(id string) (ApprovalRecord, error)
	// PutApproval stores or replaces an approval request.
	PutApproval(rec ApprovalRecord) error
	// PendingApprovals returns the pending approvals, oldest first.
	PendingApprovals() ([]ApprovalRecord, error)
	// DueApprovals returns the pending approvals with a deadline at or
	// before now, oldest first. A store may compare at a coarser
	// precision and return a few due a little after now; the kernel
	// checks each again.
	DueApprovals(now time.Time) ([]ApprovalRecord, error)
	// InstanceApprovals returns every approval of an instance, whatever
	// its status, oldest first.
	InstanceApprovals(instance string) ([]ApprovalRecord, error)

	// AppendJournal appends an entry to an instance's journal.
	AppendJournal(e JournalEntry) error
	// Journal returns an instance's journal in append order.
	Journal(instance string) ([]JournalEntry, error)

	// Receipt returns the receipt committed for a prescription.
	Receipt(prescription string) (Receipt, error)
	// PutReceipt stores the receipt of a committed prescription.
	PutReceipt(r Receipt) error
}

// PrescriptionRecord is a stored prescription with the raw parameter values
// that applying it needs: the effect's input. Secret names the secret
// parameters among them; their values are dropped once the prescription
// has been applied or has expired.
type PrescriptionRecord struct {
	Prescription Prescription      `json:"prescription"`
	Parameters   map[string]string `json:"parameters,omitempty"`
	Secret       []string          `json:"secret,omitempty"`
}

// ApprovalRecord is a stored approval with the raw values of its
// parameters that are not secret. Secret values are never stored with an
// approval: the approval keeps their digests, and the kernel holds the
// values in memory until a person decides (see Kernel.Approve).
type ApprovalRecord struct {
	Approval   Approval          `json:"approval"`
	Parameters map[string]string `json:"parameters,omitempty"`
}

// JournalStatus is a step of applying a prescription.
type JournalStatus string

// Journal statuses: begun → executing → committed | aborted |
// recovery_required.
const (
	JournalBegun            JournalStatus = "begun"
	JournalExecuting        JournalStatus = "executing"
	JournalCommitted        JournalStatus = "committed"
	JournalAborted          JournalStatus = "aborted"
	JournalRecoveryRequired JournalStatus = "recovery_required"
)

// JournalEntry records one step of applying a prescription.
type JournalEntry struct {
	Instance     string        `json:"instance_id"`
	Prescription string        `json:"prescription"`
	Transition   string        `json:"transition"`
	Revision     int64         `json:"revision"`
	Status       JournalStatus `json:"status"`
	At           time.Time     `json:"at"`
	Error        string        `json:"error,omitempty"`
}

// MemoryStore is a Store in memory, for tests, examples and the offline
// tools. Transactions are serialized by one mutex; writes are buffered and
// applied only when fn succeeds.
type MemoryStore struct {
	mu            sync.Mutex
	programs      map[string][]byte
	loads         map[string]ProgramLoad
	instances     map[string]Instance
	prescriptions map[string]PrescriptionRecord
	approvals     map[string]ApprovalRecord
	journal       map[string][]JournalEntry
	receipts      map[string]Receipt
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		programs:      make(map[string][]byte),
		loads:         make(map[string]ProgramLoad),
		instances:     make(map[string]Instance),
		prescriptions: make(map[string]PrescriptionRecord),
		approvals:     make(map[string]ApprovalRecord),
		journal:       make(map[string][]JournalEntry),
		receipts:      make(map[string]Receipt),
	}
}

// Update implements Store.
func (s *MemoryStore) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &memTx{s: s}
	if err := fn(tx); err != nil {
		return err
	}
	for _, w := range tx.writes {
		w()
	}
	return nil
}

// View implements Store.
func (s *MemoryStore) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn(&memTx{s: s, readOnly: true})
}

type memTx struct {
	s        *MemoryStore
	readOnly bool
	writes   []func()
	// overlays so that a transaction reads its own writes
	instances map[string]Instance
	journal   map[string][]JournalEntry
	receipts  map[string]Receipt
	approvals map[string]ApprovalRecord
	prescr    map[string]PrescriptionRecord
	programs  map[string][]byte
	loads     map[string]ProgramLoad
}

var errReadOnly = &Error{Code: CodeStateInvalid, Message: "write in a read-only transaction"}

func (t *memTx) write(w func()) error {
	if t.readOnly {
		return errReadOnly
	}
	t.writes = append(t.writes, w)
	return nil
}

func overlay[V any](m *map[string]V, k string, v V) {
	if *m == nil {
		*m = make(map[string]V)
	}
	(*m)[k] = v
}

func lookup[V any](over, base map[string]V, k string) (V, error) {
	if v, ok := over[k]; ok {
		return v, nil
	}
	if v, ok := base[k]; ok {
		return v, nil
	}
	var zero V
	return zero, ErrNotFound
}

func (t *memTx) Program(fp string) ([]byte, error) {
	b, err := lookup(t.programs, t.s.programs, fp)
	return slices.Clone(b), err
}

func (t *memTx) PutProgram(fp string, source []byte) error {
	if _, err := t.Program(fp); err == nil {
		return nil
	}
	b := slices.Clone(source)
	overlay(&t.programs, fp, b)
	return t.write(func() { t.s.programs[fp] = b })
}

func (t *memTx) Programs() ([]string, error) {
	seen := make(map[string]bool, len(t.s.programs)+len(t.programs))
	for fp := range t.s.programs {
		seen[fp] = true
	}
	for fp := range t.programs {
		seen[fp] = true
	}
	return sortedKeys(seen), nil
}

func (t *memTx) ProgramLoad(fp string) (ProgramLoad, error) {
	return lookup(t.loads, t.s.loads, fp)
}

func (t *memTx) PutProgramLoad(l ProgramLoad) error {
	overlay(&t.loads, l.Fingerprint, l)
	return t.write(func() { t.s.loads[l.Fingerprint] = l })
}

func (t *memTx) ProgramLoads() ([]ProgramLoad, error) {
	seen := make(map[string]bool, len(t.s.loads)+len(t.loads))
	for fp := range t.s.loads {
		seen[fp] = true
	}
	for fp := range t.loads {
		seen[fp] = true
	}
	out := make([]ProgramLoad, 0, len(seen))
	for _, fp := range sortedKeys(seen) {
		l, _ := t.ProgramLoad(fp)
		out = append(out, l)
	}
	return out, nil
}

func (t *memTx) Instances() ([]Instance, error) {
	ids := make(map[string]bool, len(t.s.instances)+len(t.instances))
	for id := range t.s.instances {
		ids[id] = true
	}
	for id := range t.instances {
		ids[id] = true
	}
	out := make([]Instance, 0, len(ids))
	for _, id := range sortedKeys(ids) {
		in, _ := t.Instance(id)
		out = append(out, in)
	}
	return out, nil
}

func (t *memTx) MarkedInstances(before time.Time) ([]Instance, error) {
	marked := func(in *Instance) bool { return in.Pending != "" && !in.PendingAt.After(before) }
	ids := make(map[string]bool)
	for id, in := range t.s.instances {
		if _, over := t.instances[id]; !over && marked(&in) {
			ids[id] = true
		}
	}
	for id, in := range t.instances {
		if marked(&in) {
			ids[id] = true
		}
	}
	out := make([]Instance, 0, len(ids))
	for _, id := range sortedKeys(ids) {
		in, _ := t.Instance(id)
		out = append(out, in)
	}
	return out, nil
}

func (t *memTx) Instance(id string) (Instance, error) {
	in, err := lookup(t.instances, t.s.instances, id)
	return in.Clone(), err
}

func (t *memTx) CreateInstance(in Instance) error {
	if _, err := t.Instance(in.ID); err == nil {
		return &Error{Code: CodeStateInvalid, Path: "instance_id", Message: "an instance with id " + in.ID + " already exists"}
	}
	in = in.Clone()
	overlay(&t.instances, in.ID, in)
	return t.write(func() { t.s.instances[in.ID] = in })
}

func (t *memTx) UpdateInstance(in Instance, rev int64, pending string) error {
	cur, err := t.Instance(in.ID)
	if err != nil {
		return err
	}
	if cur.Revision != rev || cur.Pending != pending {
		return ErrConflict
	}
	in = in.Clone()
	overlay(&t.instances, in.ID, in)
	return t.write(func() { t.s.instances[in.ID] = in })
}

func (t *memTx) Prescription(id string) (PrescriptionRecord, error) {
	return lookup(t.prescr, t.s.prescriptions, id)
}

func (t *memTx) PutPrescription(rec PrescriptionRecord) error {
	overlay(&t.prescr, rec.Prescription.ID, rec)
	return t.write(func() { t.s.prescriptions[rec.Prescription.ID] = rec })
}

func (t *memTx) AddPrescription(rec PrescriptionRecord) error {
	if _, err := t.Prescription(rec.Prescription.ID); err == nil {
		if _, err := t.Receipt(rec.Prescription.ID); err == nil {
			return nil
		}
	}
	return t.PutPrescription(rec)
}

func (t *memTx) Approval(id string) (ApprovalRecord, error) {
	return lookup(t.approvals, t.s.approvals, id)
}

func (t *memTx) PutApproval(rec ApprovalRecord) error {
	overlay(&t.approvals, rec.Approval.ID, rec)
	return t.write(func() { t.s.approvals[rec.Approval.ID] = rec })
}

func (t *memTx) PendingApprovals() ([]ApprovalRecord, error) {
	return t.approvalsWhere(func(a *Approval) bool { return a.Status == ApprovalPending }), nil
}

func (t *memTx) DueApprovals(now time.Time) ([]ApprovalRecord, error) {
	return t.approvalsWhere(func(a *Approval) bool { return a.Overdue(now) }), nil
}

func (t *memTx) InstanceApprovals(instance string) ([]ApprovalRecord, error) {
	return t.approvalsWhere(func(a *Approval) bool { return a.Instance == instance }), nil
}

// approvalsWhere returns the approvals keep accepts, as this transaction
// sees them (its own writes over the store's), oldest first.
func (t *memTx) approvalsWhere(keep func(*Approval) bool) []ApprovalRecord {
	var out []ApprovalRecord
	for id, rec := range t.s.approvals {
		if _, ok := t.approvals[id]; !ok && keep(&rec.Approval) {
			out = append(out, rec)
		}
	}
	for _, rec := range t.approvals {
		if keep(&rec.Approval) {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b ApprovalRecord) int {
		return cmp.Or(a.Approval.CreatedAt.Compare(b.Approval.CreatedAt), strings.Compare(a.Approval.ID, b.Approval.ID))
	})
	return out
}

func (t *memTx) AppendJournal(e JournalEntry) error {
	cur, _ := t.Journal(e.Instance)
	overlay(&t.journal, e.Instance, append(cur, e))
	return t.write(func() { t.s.journal[e.Instance] = append(t.s.journal[e.Instance], e) })
}

func (t *memTx) Journal(instance string) ([]JournalEntry, error) {
	if j, ok := t.journal[instance]; ok {
		return slices.Clone(j), nil
	}
	return slices.Clone(t.s.journal[instance]), nil
}

func (t *memTx) Receipt(prescription string) (Receipt, error) {
	return lookup(t.receipts, t.s.receipts, prescription)
}

func (t *memTx) PutReceipt(r Receipt) error {
	overlay(&t.receipts, r.Prescription, r)
	return t.write(func() { t.s.receipts[r.Prescription] = r })
}

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/assent-run/assent/flow"
)

// flowMigrations holds the schema of Control Programs and their instances.
// Records are kept as JSON documents keyed by their identifiers; the columns
// beside them are what queries and compare-and-swap need. Approvals are
// numbered by an identity column, in the order they were first filed.
var flowMigrations = []migration{{1, `
CREATE TABLE flow_programs (
	fingerprint TEXT COLLATE "C" PRIMARY KEY,
	source BYTEA NOT NULL
);
CREATE TABLE flow_instances (
	id TEXT COLLATE "C" PRIMARY KEY,
	revision BIGINT NOT NULL,
	pending TEXT NOT NULL DEFAULT '',
	body TEXT NOT NULL
);
CREATE TABLE flow_prescriptions (
	id TEXT PRIMARY KEY,
	body TEXT NOT NULL
);
CREATE TABLE flow_approvals (
	id TEXT PRIMARY KEY,
	pending BOOLEAN NOT NULL,
	seq BIGINT GENERATED ALWAYS AS IDENTITY,
	body TEXT NOT NULL
);
CREATE TABLE flow_journal (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	instance TEXT NOT NULL,
	body TEXT NOT NULL
);
CREATE INDEX flow_journal_instance ON flow_journal(instance, seq);
CREATE TABLE flow_receipts (
	prescription TEXT PRIMARY KEY,
	body TEXT NOT NULL
);
`}, {2, `
CREATE TABLE flow_program_loads (
	fingerprint TEXT COLLATE "C" PRIMARY KEY,
	body TEXT NOT NULL
);
ALTER TABLE flow_approvals ADD COLUMN instance TEXT NOT NULL DEFAULT '';
CREATE INDEX flow_approvals_instance ON flow_approvals(instance, seq);
CREATE INDEX flow_approvals_pending ON flow_approvals(seq) WHERE pending;
`}, {3, `
-- The sweeps read only what is due: a pending approval's deadline and an
-- apply mark's time, in microseconds since 1970 (0: none), each behind an
-- index of the rows that can come due. Rows written before this step get
-- their time from the body, a second early, so that none is missed; only
-- the bodies of pending rows that name the time are read.
ALTER TABLE flow_approvals ADD COLUMN deadline BIGINT NOT NULL DEFAULT 0;
UPDATE flow_approvals SET deadline = coalesce(floor(extract(epoch FROM (body::jsonb #>> '{approval,deadline}')::timestamptz) * 1000000)::bigint - 1000000, 0)
WHERE pending AND body LIKE '%"deadline"%';
CREATE INDEX flow_approvals_due ON flow_approvals(deadline) WHERE pending AND deadline > 0;
ALTER TABLE flow_instances ADD COLUMN pending_at BIGINT NOT NULL DEFAULT 0;
UPDATE flow_instances SET pending_at = coalesce(floor(extract(epoch FROM (body::jsonb ->> 'pending_at')::timestamptz) * 1000000)::bigint - 1000000, 0)
WHERE pending <> '' AND body LIKE '%"pending_at"%';
CREATE INDEX flow_instances_marked ON flow_instances(pending_at) WHERE pending <> '';
`}}

// micros is t in microseconds since 1970, rounded down, and 0 for the zero
// time: the form of the deadline and pending_at columns.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// flowStore is the flow.Store of a DB. Each Update is one SERIALIZABLE
// transaction, so the kernel's read-check-write sequences behave as if run
// one at a time, across every node sharing the database; an Update that
// fails to serialize runs again (see the package documentation). Each View
// is one read-only REPEATABLE READ transaction: a consistent snapshot.
type flowStore struct{ s *DB }

var _ flow.Store = flowStore{}

// Update implements flow.Store: fn runs in one serializable transaction,
// again from the start when the transaction fails to serialize.
func (f flowStore) Update(ctx context.Context, fn func(flow.Tx) error) error {
	start := time.Now()
	for {
		err := f.update(ctx, fn)
		if err == nil || !retryable(err) {
			return err
		}
		// Transactions on different instances can fail to serialize
		// with one another (their reads lock index pages that the others
		// write), many times over when many run at once: keep going for
		// a while, then say so in a way the kernel recognizes.
		if time.Since(start) >= flowContentionBudget || ctx.Err() != nil {
			return fmt.Errorf("%w: %w", flow.ErrContention, err)
		}
	}
}

// flowContentionBudget is how long a Flow Update that keeps failing to
// serialize is run again before it returns flow.ErrContention.
const flowContentionBudget = 5 * time.Second

// update is one run of Update's retries.
func (f flowStore) update(ctx context.Context, fn func(flow.Tx) error) error {
	return f.s.inTx(ctx, "flow store", pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		q := &queuedTx{tx: tx.(*lazyTx)}
		// A statement that failed to serialize aborts the transaction,
		// whatever fn makes of its error: run it again.
		var failed error
		if err := fn(flowTx{ctx: ctx, tx: q, failed: &failed}); err != nil {
			if failed != nil {
				return failed
			}
			return err
		}
		// The writes still queued go with COMMIT.
		return q.commit(ctx)
	})
}

// View implements flow.Store.
func (f flowStore) View(ctx context.Context, fn func(flow.Tx) error) error {
	return f.s.inTx(ctx, "flow store", pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var failed error
		if err := fn(flowTx{ctx: ctx, tx: &queuedTx{tx: tx.(*lazyTx)}, ro: true, failed: &failed}); err != nil {
			if failed != nil {
				return failed
			}
			return err
		}
		return nil
	})
}

// queuedTx is a Flow transaction that holds back the writes whose
// results nobody reads (inserts and upserts of records) until the next
// statement that reads, or until COMMIT, and sends them with it: a step's
// journal entries and receipt cost no round trip of their own.
type queuedTx struct {
	tx      *lazyTx
	pending pgx.Batch
}

// queue holds back a write.
func (q *queuedTx) queue(sql string, args ...any) {
	q.pending.Queue(sql, args...)
}

// flush sends the writes held back, in one round trip.
func (q *queuedTx) flush(ctx context.Context) error {
	if q.pending.Len() == 0 {
		return nil
	}
	b := q.pending
	q.pending = pgx.Batch{}
	return execAll(q.tx.SendBatch(ctx, &b), b.Len())
}

func (q *queuedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := q.flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return q.tx.Exec(ctx, sql, args...)
}

func (q *queuedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := q.flush(ctx); err != nil {
		return nil, err
	}
	return q.tx.Query(ctx, sql, args...)
}

func (q *queuedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := q.flush(ctx); err != nil {
		return errRow{err}
	}
	return q.tx.QueryRow(ctx, sql, args...)
}

// commit sends the writes held back with COMMIT.
func (q *queuedTx) commit(ctx context.Context) error {
	b := q.pending
	q.pending = pgx.Batch{}
	return q.tx.commitWith(ctx, &b)
}

type flowTx struct {
	ctx context.Context
	tx  *queuedTx
	ro  bool
	// failed keeps the first serialization failure or deadlock a
	// statement met.
	failed *error
}

// note records err in t.failed when the transaction may be run again
// after it, and returns err.
func (t flowTx) note(err error) error {
	if *t.failed == nil && retryable(err) {
		*t.failed = err
	}
	return err
}

var errFlowReadOnly = &flow.Error{Code: flow.CodeStateInvalid, Message: "write in a read-only transaction"}

// get reads one JSON body into v.
func (t flowTx) get(query string, v any, args ...any) error {
	var body string
	if err := t.note(t.tx.QueryRow(t.ctx, query, args...).Scan(&body)); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return flow.ErrNotFound
		}
		return err
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("flow store: corrupt record: %w", err)
	}
	return nil
}

// exec holds back a write whose result is not read: it goes with the
// transaction's next read or its COMMIT, and an error it meets is
// returned there.
func (t flowTx) exec(query string, args ...any) error {
	if t.ro {
		return errFlowReadOnly
	}
	t.tx.queue(query, args...)
	return nil
}

// write runs a statement that changes data, refusing in a View.
func (t flowTx) write(query string, args ...any) (pgconn.CommandTag, error) {
	if t.ro {
		return pgconn.CommandTag{}, errFlowReadOnly
	}
	tag, err := t.tx.Exec(t.ctx, query, args...)
	return tag, t.note(err)
}

// bodies reads the JSON bodies a query returns, decoding each with decode.
func bodies[T any](t flowTx, decode func([]byte) (T, error), query string, args ...any) ([]T, error) {
	rows, err := t.tx.Query(t.ctx, query, args...)
	if err != nil {
		return nil, t.note(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		v, err := decode([]byte(body))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, t.note(rows.Err())
}

// decoder returns a decode function for bodies of type T; what names the
// record in errors.
func decoder[T any](what string) func([]byte) (T, error) {
	return func(b []byte) (T, error) {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return v, fmt.Errorf("flow store: corrupt %s: %w", what, err)
		}
		return v, nil
	}
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func (t flowTx) Program(fp string) ([]byte, error) {
	var src []byte
	err := t.note(t.tx.QueryRow(t.ctx, `SELECT source FROM flow_programs WHERE fingerprint = $1`, fp).Scan(&src))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, flow.ErrNotFound
	}
	return src, err
}

func (t flowTx) PutProgram(fp string, source []byte) error {
	return t.exec(`INSERT INTO flow_programs (fingerprint, source) VALUES ($1, $2) ON CONFLICT DO NOTHING`, fp, source)
}

func (t flowTx) Programs() ([]string, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT fingerprint FROM flow_programs ORDER BY fingerprint`)
	if err != nil {
		return nil, t.note(err)
	}
	fps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return fps, t.note(err)
}

func (t flowTx) ProgramLoad(fp string) (flow.ProgramLoad, error) {
	var l flow.ProgramLoad
	err := t.get(`SELECT body FROM flow_program_loads WHERE fingerprint = $1`, &l, fp)
	return l, err
}

func (t flowTx) PutProgramLoad(l flow.ProgramLoad) error {
	body, err := jsonText(l)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_program_loads (fingerprint, body) VALUES ($1, $2)
		ON CONFLICT (fingerprint) DO UPDATE SET body = excluded.body`, l.Fingerprint, body)
}

func (t flowTx) ProgramLoads() ([]flow.ProgramLoad, error) {
	return bodies(t, decoder[flow.ProgramLoad]("program load"), `SELECT body FROM flow_program_loads ORDER BY fingerprint`)
}

func (t flowTx) Instance(id string) (flow.Instance, error) {
	var in flow.Instance
	err := t.get(`SELECT body FROM flow_instances WHERE id = $1`, &in, id)
	return in, err
}

func (t flowTx) CreateInstance(in flow.Instance) error {
	body, err := jsonText(in)
	if err != nil {
		return err
	}
	tag, err := t.write(`INSERT INTO flow_instances (id, revision, pending, pending_at, body) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		in.ID, in.Revision, in.Pending, micros(in.PendingAt), body)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return &flow.Error{Code: flow.CodeStateInvalid, Path: "instance_id", Message: "an instance with id " + in.ID + " already exists"}
	}
	return nil
}

func (t flowTx) UpdateInstance(in flow.Instance, rev int64, pending string) error {
	body, err := jsonText(in)
	if err != nil {
		return err
	}
	tag, err := t.write(`UPDATE flow_instances SET revision = $1, pending = $2, pending_at = $3, body = $4 WHERE id = $5 AND revision = $6 AND pending = $7`,
		in.Revision, in.Pending, micros(in.PendingAt), body, in.ID, rev, pending)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return flow.ErrConflict
	}
	return nil
}

func (t flowTx) Instances() ([]flow.Instance, error) {
	return bodies(t, decoder[flow.Instance]("instance"), `SELECT body FROM flow_instances ORDER BY id`)
}

// MarkedInstances implements flow.Tx: the index of marked instances
// holds only those with an apply in progress.
func (t flowTx) MarkedInstances(before time.Time) ([]flow.Instance, error) {
	return bodies(t, decoder[flow.Instance]("instance"), `SELECT body FROM flow_instances WHERE pending <> '' AND pending_at <= $1 ORDER BY id`, micros(before))
}

func (t flowTx) Prescription(id string) (flow.PrescriptionRecord, error) {
	var rec flow.PrescriptionRecord
	err := t.get(`SELECT body FROM flow_prescriptions WHERE id = $1`, &rec, id)
	return rec, err
}

func (t flowTx) PutPrescription(rec flow.PrescriptionRecord) error {
	body, err := jsonText(rec)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_prescriptions (id, body) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET body = excluded.body`, rec.Prescription.ID, body)
}

func (t flowTx) AddPrescription(rec flow.PrescriptionRecord) error {
	body, err := jsonText(rec)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_prescriptions (id, body) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET body = excluded.body
		WHERE NOT EXISTS (SELECT 1 FROM flow_receipts WHERE prescription = excluded.id)`, rec.Prescription.ID, body)
}

func (t flowTx) Approval(id string) (flow.ApprovalRecord, error) {
	var body string
	if err := t.note(t.tx.QueryRow(t.ctx, `SELECT body FROM flow_approvals WHERE id = $1`, id).Scan(&body)); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return flow.ApprovalRecord{}, flow.ErrNotFound
		}
		return flow.ApprovalRecord{}, err
	}
	rec, err := flow.DecodeApprovalRecord([]byte(body))
	if err != nil {
		return flow.ApprovalRecord{}, fmt.Errorf("flow store: corrupt approval %s: %w", id, err)
	}
	return rec, nil
}

func (t flowTx) PutApproval(rec flow.ApprovalRecord) error {
	body, err := jsonText(rec)
	if err != nil {
		return err
	}
	pending := rec.Approval.Status == flow.ApprovalPending
	return t.exec(`INSERT INTO flow_approvals (id, pending, instance, deadline, body) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO UPDATE SET pending = excluded.pending, deadline = excluded.deadline, body = excluded.body`,
		rec.Approval.ID, pending, rec.Approval.Instance, micros(rec.Approval.Deadline), body)
}

func decodeApproval(b []byte) (flow.ApprovalRecord, error) {
	rec, err := flow.DecodeApprovalRecord(b)
	if err != nil {
		return rec, fmt.Errorf("flow store: corrupt approval: %w", err)
	}
	return rec, nil
}

func (t flowTx) PendingApprovals() ([]flow.ApprovalRecord, error) {
	return bodies(t, decodeApproval, `SELECT body FROM flow_approvals WHERE pending ORDER BY seq`)
}

// DueApprovals implements flow.Tx: the index of due approvals holds only
// pending ones with a deadline.
func (t flowTx) DueApprovals(now time.Time) ([]flow.ApprovalRecord, error) {
	return bodies(t, decodeApproval, `SELECT body FROM flow_approvals WHERE pending AND deadline > 0 AND deadline <= $1 ORDER BY seq`, micros(now))
}

func (t flowTx) InstanceApprovals(instance string) ([]flow.ApprovalRecord, error) {
	return bodies(t, decodeApproval, `SELECT body FROM flow_approvals WHERE instance = $1 ORDER BY seq`, instance)
}

func (t flowTx) AppendJournal(e flow.JournalEntry) error {
	body, err := jsonText(e)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_journal (instance, body) VALUES ($1, $2)`, e.Instance, body)
}

func (t flowTx) Journal(instance string) ([]flow.JournalEntry, error) {
	return bodies(t, decoder[flow.JournalEntry]("journal entry"), `SELECT body FROM flow_journal WHERE instance = $1 ORDER BY seq`, instance)
}

func (t flowTx) Receipt(prescription string) (flow.Receipt, error) {
	var r flow.Receipt
	err := t.get(`SELECT body FROM flow_receipts WHERE prescription = $1`, &r, prescription)
	return r, err
}

func (t flowTx) PutReceipt(r flow.Receipt) error {
	body, err := jsonText(r)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_receipts (prescription, body) VALUES ($1, $2)
		ON CONFLICT (prescription) DO UPDATE SET body = excluded.body`, r.Prescription, body)
}

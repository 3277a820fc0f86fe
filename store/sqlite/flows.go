package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/flow"
)

// flowMigrations holds the schema of Control Programs and their instances.
// Records are kept as JSON documents keyed by their identifiers; the columns
// beside them are what queries and compare-and-swap need.
var flowMigrations = []migration{{1, `
CREATE TABLE flow_programs (
	fingerprint TEXT PRIMARY KEY,
	source BLOB NOT NULL
);
CREATE TABLE flow_instances (
	id TEXT PRIMARY KEY,
	revision INTEGER NOT NULL,
	pending TEXT NOT NULL DEFAULT '',
	body TEXT NOT NULL
);
CREATE TABLE flow_prescriptions (
	id TEXT PRIMARY KEY,
	body TEXT NOT NULL
);
CREATE TABLE flow_approvals (
	id TEXT PRIMARY KEY,
	pending INTEGER NOT NULL,
	seq INTEGER NOT NULL,
	body TEXT NOT NULL
);
CREATE TABLE flow_journal (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
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
	fingerprint TEXT PRIMARY KEY,
	body TEXT NOT NULL
);
-- Programs stored before loads were recorded have no known loader: they
-- wait for a person's approval like any proposed program.
INSERT INTO flow_program_loads (fingerprint, body)
SELECT fingerprint, json_object(
	'fingerprint', fingerprint,
	'program_id', CASE WHEN json_valid(CAST(source AS TEXT)) THEN coalesce(json_extract(CAST(source AS TEXT), '$.program_id'), '') ELSE '' END,
	'program_version', '',
	'status', 'proposed',
	'loader_kind', '',
	'loaded_at', '0001-01-01T00:00:00Z')
FROM flow_programs;
ALTER TABLE flow_approvals ADD COLUMN instance TEXT NOT NULL DEFAULT '';
UPDATE flow_approvals SET instance = coalesce(json_extract(body, '$.approval.instance_id'), '') WHERE json_valid(body);
CREATE INDEX flow_approvals_instance ON flow_approvals(instance, seq);
`}, {3, `
-- The sweeps read only what is due: a pending approval's deadline and an
-- apply mark's time, in microseconds since 1970 (0: none), each behind an
-- index of the rows that can come due. Rows written before this step get
-- their time from the body, a second early, so that none is missed.
ALTER TABLE flow_approvals ADD COLUMN deadline INTEGER NOT NULL DEFAULT 0;
UPDATE flow_approvals SET deadline = coalesce(CAST((julianday(json_extract(body, '$.approval.deadline')) - 2440587.5) * 86400000000 AS INTEGER) - 1000000, 0)
WHERE pending AND json_valid(body) AND json_extract(body, '$.approval.deadline') IS NOT NULL;
CREATE INDEX flow_approvals_due ON flow_approvals(deadline) WHERE pending AND deadline > 0;
ALTER TABLE flow_instances ADD COLUMN pending_at INTEGER NOT NULL DEFAULT 0;
UPDATE flow_instances SET pending_at = coalesce(CAST((julianday(json_extract(body, '$.pending_at')) - 2440587.5) * 86400000000 AS INTEGER) - 1000000, 0)
WHERE pending <> '' AND json_valid(body) AND json_extract(body, '$.pending_at') IS NOT NULL;
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

// flowStore is the flow.Store of a DB: each Update or View is one SQLite
// transaction, so the kernel's compare-and-swap on an instance's revision
// holds across processes.
type flowStore struct {
	db    *sql.DB
	stmts *stmtCache // the Flow kernel's statements, prepared once
}

// Update implements flow.Store: fn runs in one write transaction.
func (f flowStore) Update(ctx context.Context, fn func(flow.Tx) error) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("flow store: %w", err)
	}
	defer tx.Rollback()
	if err := fn(flowTx{ctx: ctx, tx: tx, stmts: f.stmts}); err != nil {
		return err
	}
	return tx.Commit()
}

// View implements flow.Store.
func (f flowStore) View(ctx context.Context, fn func(flow.Tx) error) error {
	tx, err := f.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("flow store: %w", err)
	}
	defer tx.Rollback()
	return fn(flowTx{ctx: ctx, tx: tx, stmts: f.stmts, ro: true})
}

type flowTx struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts *stmtCache
	ro    bool
}

// stmt is the prepared statement of query (a constant text) bound to the
// transaction: a step runs the same few statements every time, and
// parsing them again each time cost about as much as running them.
func (t flowTx) stmt(query string) (*sql.Stmt, error) {
	st, err := t.stmts.stmt(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(t.ctx, st), nil
}

// queryRow runs a constant query expected to return at most one row.
func (t flowTx) queryRow(query string, args ...any) (*sql.Row, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryRowContext(t.ctx, args...), nil
}

var errFlowReadOnly = &flow.Error{Code: flow.CodeStateInvalid, Message: "write in a read-only transaction"}

// get reads one JSON body into v.
func (t flowTx) get(query string, v any, args ...any) error {
	var body string
	row, err := t.queryRow(query, args...)
	if err != nil {
		return err
	}
	if err := row.Scan(&body); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return flow.ErrNotFound
		}
		return err
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("flow store: corrupt record: %w", err)
	}
	return nil
}

func (t flowTx) exec(query string, args ...any) error {
	_, err := t.write(query, args...)
	return err
}

// write runs a statement that changes data, refusing in a View.
func (t flowTx) write(query string, args ...any) (sql.Result, error) {
	if t.ro {
		return nil, errFlowReadOnly
	}
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func (t flowTx) Program(fp string) ([]byte, error) {
	var src []byte
	row, err := t.queryRow(`SELECT source FROM flow_programs WHERE fingerprint = ?`, fp)
	if err != nil {
		return nil, err
	}
	err = row.Scan(&src)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, flow.ErrNotFound
	}
	return src, err
}

func (t flowTx) PutProgram(fp string, source []byte) error {
	return t.exec(`INSERT INTO flow_programs (fingerprint, source) VALUES (?, ?) ON CONFLICT DO NOTHING`, fp, source)
}

func (t flowTx) Programs() ([]string, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT fingerprint FROM flow_programs ORDER BY fingerprint`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var fp string
		if err := rows.Scan(&fp); err != nil {
			return nil, err
		}
		out = append(out, fp)
	}
	return out, rows.Err()
}

func (t flowTx) ProgramLoad(fp string) (flow.ProgramLoad, error) {
	var l flow.ProgramLoad
	err := t.get(`SELECT body FROM flow_program_loads WHERE fingerprint = ?`, &l, fp)
	return l, err
}

func (t flowTx) PutProgramLoad(l flow.ProgramLoad) error {
	body, err := jsonText(l)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_program_loads (fingerprint, body) VALUES (?, ?) ON CONFLICT(fingerprint) DO UPDATE SET body = excluded.body`, l.Fingerprint, body)
}

func (t flowTx) ProgramLoads() ([]flow.ProgramLoad, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT body FROM flow_program_loads ORDER BY fingerprint`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []flow.ProgramLoad
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		var l flow.ProgramLoad
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			return nil, fmt.Errorf("flow store: corrupt program load: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

func (t flowTx) Instance(id string) (flow.Instance, error) {
	var in flow.Instance
	err := t.get(`SELECT body FROM flow_instances WHERE id = ?`, &in, id)
	return in, err
}

func (t flowTx) CreateInstance(in flow.Instance) error {
	body, err := jsonText(in)
	if err != nil {
		return err
	}
	res, err := t.write(`INSERT INTO flow_instances (id, revision, pending, pending_at, body) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		in.ID, in.Revision, in.Pending, micros(in.PendingAt), body)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &flow.Error{Code: flow.CodeStateInvalid, Path: "instance_id", Message: "an instance with id " + in.ID + " already exists"}
	}
	return nil
}

func (t flowTx) UpdateInstance(in flow.Instance, rev int64, pending string) error {
	body, err := jsonText(in)
	if err != nil {
		return err
	}
	res, err := t.write(`UPDATE flow_instances SET revision = ?, pending = ?, pending_at = ?, body = ? WHERE id = ? AND revision = ? AND pending = ?`,
		in.Revision, in.Pending, micros(in.PendingAt), body, in.ID, rev, pending)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return flow.ErrConflict
	}
	return nil
}

func (t flowTx) Instances() ([]flow.Instance, error) {
	return t.instances(`SELECT body FROM flow_instances ORDER BY id`)
}

// MarkedInstances implements flow.Tx: the index of marked instances
// holds only those with an apply in progress.
func (t flowTx) MarkedInstances(before time.Time) ([]flow.Instance, error) {
	return t.instances(`SELECT body FROM flow_instances WHERE pending <> '' AND pending_at <= ? ORDER BY id`, micros(before))
}

func (t flowTx) instances(query string, args ...any) ([]flow.Instance, error) {
	rows, err := t.tx.QueryContext(t.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []flow.Instance
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		var in flow.Instance
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			return nil, fmt.Errorf("flow store: corrupt instance: %w", err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

func (t flowTx) Prescription(id string) (flow.PrescriptionRecord, error) {
	var rec flow.PrescriptionRecord
	err := t.get(`SELECT body FROM flow_prescriptions WHERE id = ?`, &rec, id)
	return rec, err
}

func (t flowTx) PutPrescription(rec flow.PrescriptionRecord) error {
	body, err := jsonText(rec)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_prescriptions (id, body) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body`, rec.Prescription.ID, body)
}

func (t flowTx) AddPrescription(rec flow.PrescriptionRecord) error {
	body, err := jsonText(rec)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_prescriptions (id, body) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body
		WHERE NOT EXISTS (SELECT 1 FROM flow_receipts WHERE prescription = excluded.id)`, rec.Prescription.ID, body)
}

func (t flowTx) Approval(id string) (flow.ApprovalRecord, error) {
	var body string
	if err := t.tx.QueryRowContext(t.ctx, `SELECT body FROM flow_approvals WHERE id = ?`, id).Scan(&body); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
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
	return t.exec(`INSERT INTO flow_approvals (id, pending, seq, instance, deadline, body)
		VALUES (?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM flow_approvals), ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET pending = excluded.pending, deadline = excluded.deadline, body = excluded.body`,
		rec.Approval.ID, pending, rec.Approval.Instance, micros(rec.Approval.Deadline), body)
}

// DueApprovals implements flow.Tx: the index of due approvals holds only
// pending ones with a deadline.
func (t flowTx) DueApprovals(now time.Time) ([]flow.ApprovalRecord, error) {
	return t.approvals(`SELECT body FROM flow_approvals WHERE pending AND deadline > 0 AND deadline <= ? ORDER BY seq`, micros(now))
}

func (t flowTx) PendingApprovals() ([]flow.ApprovalRecord, error) {
	return t.approvals(`SELECT body FROM flow_approvals WHERE pending ORDER BY seq`)
}

func (t flowTx) InstanceApprovals(instance string) ([]flow.ApprovalRecord, error) {
	return t.approvals(`SELECT body FROM flow_approvals WHERE instance = ? ORDER BY seq`, instance)
}

func (t flowTx) approvals(query string, args ...any) ([]flow.ApprovalRecord, error) {
	rows, err := t.tx.QueryContext(t.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []flow.ApprovalRecord
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		rec, err := flow.DecodeApprovalRecord([]byte(body))
		if err != nil {
			return nil, fmt.Errorf("flow store: corrupt approval: %w", err)
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

func (t flowTx) AppendJournal(e flow.JournalEntry) error {
	body, err := jsonText(e)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_journal (instance, body) VALUES (?, ?)`, e.Instance, body)
}

func (t flowTx) Journal(instance string) ([]flow.JournalEntry, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT body FROM flow_journal WHERE instance = ? ORDER BY seq`, instance)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []flow.JournalEntry
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		var e flow.JournalEntry
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return nil, fmt.Errorf("flow store: corrupt journal entry: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (t flowTx) Receipt(prescription string) (flow.Receipt, error) {
	var r flow.Receipt
	err := t.get(`SELECT body FROM flow_receipts WHERE prescription = ?`, &r, prescription)
	return r, err
}

func (t flowTx) PutReceipt(r flow.Receipt) error {
	body, err := jsonText(r)
	if err != nil {
		return err
	}
	return t.exec(`INSERT INTO flow_receipts (prescription, body) VALUES (?, ?) ON CONFLICT(prescription) DO UPDATE SET body = excluded.body`, r.Prescription, body)
}

var _ flow.Store = flowStore{}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/assent-run/assent/run/journal"
	"github.com/assent-run/assent/store"
)

// runMigrations holds the schema of Runs, Control journals, Traces and
// registered tools.
//
// The Control journal and the Trace keep, per row, the encoded size of the
// record as a JSON line, so the byte bounds are checked without re-encoding
// the journal. Statuses are not constrained by the schema: a damaged row is
// reported as an integrity failure rather than hidden. From step 4 each
// Control row states its first integrity flaw (flaw: 1 malformed input,
// 2 invalid record, 3 missing status time, 0 none; the action test is
// journal.ActionPattern as GLOB patterns: a lowercase first letter, no
// byte outside [a-z0-9_.-], no empty segment), and triggers keep, on the
// Run's row, the journal's size and the count of each flaw, whatever
// writes the rows; a partial index holds the pending records.
var runMigrations = []migration{{1, `
CREATE TABLE runs (
	id TEXT PRIMARY KEY,
	owner_id TEXT NOT NULL,
	instance_id TEXT NOT NULL,
	generation INTEGER NOT NULL,
	pid INTEGER NOT NULL DEFAULT 0,
	start_time TEXT NOT NULL DEFAULT '',
	exit_code INTEGER,
	stop TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at INTEGER NOT NULL DEFAULT 0,
	archived INTEGER NOT NULL DEFAULT 0,
	archive_dir TEXT NOT NULL DEFAULT '',
	doc TEXT NOT NULL DEFAULT '{}',
	trace_events INTEGER NOT NULL DEFAULT 0,
	trace_bytes INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_owner ON runs(owner_id, created_at);
CREATE TABLE run_controls (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id TEXT NOT NULL,
	id TEXT NOT NULL,
	instance_id TEXT NOT NULL,
	action TEXT NOT NULL,
	input TEXT,
	status TEXT NOT NULL,
	queued_at INTEGER,
	delivered_at INTEGER,
	claimed_at INTEGER,
	handled_at INTEGER,
	failed_at INTEGER,
	error TEXT,
	bytes INTEGER NOT NULL
);
CREATE INDEX run_controls_run ON run_controls(run_id, seq);
CREATE TABLE run_trace (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	line TEXT NOT NULL,
	bytes INTEGER NOT NULL
);
CREATE INDEX run_trace_run ON run_trace(run_id, seq);
CREATE TABLE run_tools (
	name TEXT PRIMARY KEY,
	owner_id TEXT NOT NULL,
	expose INTEGER NOT NULL,
	doc TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
`}, {2, `
CREATE TRIGGER run_trace_count AFTER INSERT ON run_trace BEGIN
	UPDATE runs SET trace_events = trace_events + 1, trace_bytes = trace_bytes + NEW.bytes WHERE id = NEW.run_id;
END;
`}, {3, `
ALTER TABLE run_controls ADD COLUMN sender_id TEXT NOT NULL DEFAULT '';
`}, {4, `
ALTER TABLE run_controls ADD COLUMN flaw INTEGER GENERATED ALWAYS AS (CASE
	WHEN input IS NOT NULL AND input <> '' AND NOT json_valid(input) THEN 1
	WHEN status NOT IN ('queued', 'delivered', 'claimed', 'handled', 'failed') OR id = '' OR instance_id = ''
		OR length(CAST(action AS BLOB)) > 64 OR action NOT GLOB '[a-z]*' OR action GLOB '*[^a-z0-9_.-]*'
		OR action GLOB '*..*' OR action GLOB '*.' OR COALESCE(length(CAST(input AS BLOB)) > 380, 0) THEN 2
	WHEN CASE status WHEN 'queued' THEN queued_at WHEN 'delivered' THEN delivered_at WHEN 'claimed' THEN claimed_at
		WHEN 'handled' THEN handled_at WHEN 'failed' THEN failed_at END IS NULL THEN 3
	ELSE 0 END) VIRTUAL;
CREATE INDEX run_controls_pending ON run_controls(run_id, seq) WHERE status IN ('queued', 'delivered', 'claimed');
ALTER TABLE runs ADD COLUMN control_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN control_malformed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN control_invalid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN control_untimed INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET
	control_bytes = (SELECT COALESCE(SUM(bytes), 0) FROM run_controls WHERE run_id = runs.id),
	control_malformed = (SELECT COUNT(*) FROM run_controls WHERE run_id = runs.id AND flaw = 1),
	control_invalid = (SELECT COUNT(*) FROM run_controls WHERE run_id = runs.id AND flaw = 2),
	control_untimed = (SELECT COUNT(*) FROM run_controls WHERE run_id = runs.id AND flaw = 3);
CREATE TRIGGER run_controls_tally_insert AFTER INSERT ON run_controls BEGIN
	UPDATE runs SET control_bytes = control_bytes + NEW.bytes, control_malformed = control_malformed + (NEW.flaw = 1),
		control_invalid = control_invalid + (NEW.flaw = 2), control_untimed = control_untimed + (NEW.flaw = 3)
	WHERE id = NEW.run_id;
END;
CREATE TRIGGER run_controls_tally_delete AFTER DELETE ON run_controls BEGIN
	UPDATE runs SET control_bytes = control_bytes - OLD.bytes, control_malformed = control_malformed - (OLD.flaw = 1),
		control_invalid = control_invalid - (OLD.flaw = 2), control_untimed = control_untimed - (OLD.flaw = 3)
	WHERE id = OLD.run_id;
END;
CREATE TRIGGER run_controls_tally_update AFTER UPDATE ON run_controls BEGIN
	UPDATE runs SET control_bytes = control_bytes - OLD.bytes, control_malformed = control_malformed - (OLD.flaw = 1),
		control_invalid = control_invalid - (OLD.flaw = 2), control_untimed = control_untimed - (OLD.flaw = 3)
	WHERE id = OLD.run_id;
	UPDATE runs SET control_bytes = control_bytes + NEW.bytes, control_malformed = control_malformed + (NEW.flaw = 1),
		control_invalid = control_invalid + (NEW.flaw = 2), control_untimed = control_untimed + (NEW.flaw = 3)
	WHERE id = NEW.run_id;
END;
`}, {5, runRequestsSchema}, {6, `
-- A record is found by its id (a transition, a claim by id, a read of one
-- record) without walking the Run's whole journal.
CREATE INDEX run_controls_id ON run_controls(run_id, id);
`}, {7, `
-- A record that stays in its Run's journal (every transition) moves the
-- Run's tally in one write, not two.
DROP TRIGGER run_controls_tally_update;
CREATE TRIGGER run_controls_tally_update AFTER UPDATE ON run_controls WHEN OLD.run_id IS NOT NEW.run_id BEGIN
	UPDATE runs SET control_bytes = control_bytes - OLD.bytes, control_malformed = control_malformed - (OLD.flaw = 1),
		control_invalid = control_invalid - (OLD.flaw = 2), control_untimed = control_untimed - (OLD.flaw = 3)
	WHERE id = OLD.run_id;
	UPDATE runs SET control_bytes = control_bytes + NEW.bytes, control_malformed = control_malformed + (NEW.flaw = 1),
		control_invalid = control_invalid + (NEW.flaw = 2), control_untimed = control_untimed + (NEW.flaw = 3)
	WHERE id = NEW.run_id;
END;
CREATE TRIGGER run_controls_tally_change AFTER UPDATE ON run_controls WHEN OLD.run_id IS NEW.run_id BEGIN
	UPDATE runs SET control_bytes = control_bytes - OLD.bytes + NEW.bytes,
		control_malformed = control_malformed - (OLD.flaw = 1) + (NEW.flaw = 1),
		control_invalid = control_invalid - (OLD.flaw = 2) + (NEW.flaw = 2),
		control_untimed = control_untimed - (OLD.flaw = 3) + (NEW.flaw = 3)
	WHERE id = NEW.run_id;
END;
`}}

const runColumns = `id, owner_id, instance_id, generation, pid, start_time, exit_code, stop,
	created_at, started_at, ended_at, archived, archive_dir, doc`

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (store.RunRecord, error) {
	var r store.RunRecord
	var exit sql.NullInt64
	var created, started, ended int64
	var archived int
	var doc string
	if err := sc.Scan(&r.ID, &r.OwnerID, &r.InstanceID, &r.Generation, &r.PID, &r.StartTime, &exit, &r.Stop,
		&created, &started, &ended, &archived, &r.ArchiveDir, &doc); err != nil {
		return r, err
	}
	if exit.Valid {
		c := int(exit.Int64)
		r.ExitCode = &c
	}
	r.CreatedAt = fromMS(created)
	r.StartedAt = fromMS(started)
	if ended != 0 {
		r.EndedAt = fromMS(ended)
	}
	r.Archived = archived != 0
	r.Doc = json.RawMessage(doc)
	return r, nil
}

func docText(d json.RawMessage) string {
	if len(d) == 0 {
		return "{}"
	}
	return string(d)
}

func exitArg(c *int) any {
	if c == nil {
		return nil
	}
	return *c
}

func endedArg(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return ms(t)
}

// ClaimRun implements store.Runs.
func (s *DB) ClaimRun(ctx context.Context, rec store.RunRecord, replaceInstance string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("claim run: %w", err)
	}
	defer tx.Rollback()
	var cur string
	err = tx.QueryRowContext(ctx, `SELECT instance_id FROM runs WHERE id = ?`, rec.ID).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if replaceInstance != "" {
			return store.ErrConflict
		}
	case err != nil:
		return fmt.Errorf("claim run: %w", err)
	default:
		if replaceInstance == "" || cur != replaceInstance {
			return store.ErrConflict
		}
		for _, q := range []string{`DELETE FROM runs WHERE id = ?`, `DELETE FROM run_controls WHERE run_id = ?`, `DELETE FROM run_trace WHERE run_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, rec.ID); err != nil {
				return fmt.Errorf("claim run: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		rec.ID, rec.OwnerID, rec.InstanceID, rec.Generation, rec.PID, rec.StartTime, exitArg(rec.ExitCode), rec.Stop,
		ms(rec.CreatedAt), ms(rec.StartedAt), endedArg(rec.EndedAt), boolInt(rec.Archived), rec.ArchiveDir, docText(rec.Doc)); err != nil {
		return fmt.Errorf("claim run: %w", err)
	}
	return tx.Commit()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SaveRun implements store.Runs.
func (s *DB) SaveRun(ctx context.Context, rec store.RunRecord) error {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET pid = ?, start_time = ?, exit_code = ?, stop = ?, ended_at = ?,
		archived = ?, archive_dir = ?, doc = ? WHERE id = ? AND instance_id = ?`,
		rec.PID, rec.StartTime, exitArg(rec.ExitCode), rec.Stop, endedArg(rec.EndedAt),
		boolInt(rec.Archived), rec.ArchiveDir, docText(rec.Doc), rec.ID, rec.InstanceID)
	if err != nil {
		return fmt.Errorf("save run: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Run implements store.Runs.
func (s *DB) Run(ctx context.Context, id string) (store.RunRecord, error) {
	r, err := scanRun(s.stmts.queryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns implements store.Runs.
func (s *DB) ListRuns(ctx context.Context, ownerID string) ([]store.RunRecord, error) {
	q := `SELECT ` + runColumns + ` FROM runs`
	var args []any
	if ownerID != "" {
		q += ` WHERE owner_id = ?`
		args = append(args, ownerID)
	}
	q += ` ORDER BY created_at, id`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []store.RunRecord
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteRun implements store.Runs.
func (s *DB) DeleteRun(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete run: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete run: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	for _, q := range []string{`DELETE FROM run_controls WHERE run_id = ?`, `DELETE FROM run_trace WHERE run_id = ?`} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("delete run: %w", err)
		}
	}
	return tx.Commit()
}

// readJournal summarizes runID's Control journal for generation instance:
// the size and flaw counts the triggers keep on the Run's row, and the
// pending records, read through their partial index. The rules of
// run/journal decide on the counts, and no terminal record is read, so the
// cost does not grow with the terminal records a journal keeps. A Run that
// does not exist has an empty journal.
func (s *DB) readJournal(ctx context.Context, tx *sql.Tx, runID, instance string) (journal.State, error) {
	var t journal.Tally
	counts, err := s.txStmt(ctx, tx, `SELECT control_bytes, control_malformed, control_invalid, control_untimed FROM runs WHERE id = ?`)
	if err != nil {
		return journal.State{}, err
	}
	err = counts.QueryRowContext(ctx, runID).Scan(&t.Bytes, &t.Malformed, &t.Invalid, &t.Timestamp)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return journal.State{}, err
	}
	pending, err := s.txStmt(ctx, tx, `SELECT COUNT(*), MIN(CASE status WHEN 'queued' THEN queued_at WHEN 'delivered' THEN delivered_at
		WHEN 'claimed' THEN claimed_at END), COALESCE(SUM(instance_id <> ?1), 0)
		FROM run_controls WHERE run_id = ?2 AND status IN ('queued', 'delivered', 'claimed')`)
	if err != nil {
		return journal.State{}, err
	}
	var oldest sql.NullInt64
	if err := pending.QueryRowContext(ctx, instance, runID).Scan(&t.Pending, &oldest, &t.Generation); err != nil {
		return journal.State{}, err
	}
	if oldest.Valid {
		t.Oldest = fromMS(oldest.Int64)
	}
	return t.State(), nil
}

// txStmt returns the cached prepared statement of query bound to tx.
func (s *DB) txStmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	st, err := s.stmts.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st), nil
}

func nullMS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ms(*t)
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// AdmitControl implements store.Runs.
func (s *DB) AdmitControl(ctx context.Context, runID string, c store.Control) (store.Control, error) {
	errs, err := s.AdmitControls(ctx, []store.ControlAdmission{{RunID: runID, Control: c}})
	if err != nil {
		return c, err
	}
	if errs[0] != nil {
		return c, errs[0]
	}
	c, _, err = journal.Admission(c)
	return c, err
}

// AdmitControls implements store.Runs. Each admission is decided by
// journal.State.Admit on the journal as read inside the transaction, so
// the bounds hold exactly whatever the interleaving of callers.
func (s *DB) AdmitControls(ctx context.Context, items []store.ControlAdmission) ([]error, error) {
	errs := make([]error, len(items))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("admit control: %w", err)
	}
	defer tx.Rollback()
	ins, err := s.txStmt(ctx, tx, `INSERT INTO run_controls (run_id, id, instance_id, action, input, status, queued_at, bytes, sender_id)
		SELECT ?, ?, ?, ?, ?, 'queued', ?, ?, ? WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?)`)
	if err != nil {
		return nil, fmt.Errorf("admit control: %w", err)
	}
	// The journal is read once per Run and generation in a batch and then
	// kept up to date in memory with what this batch inserts.
	seen := map[[2]string]*journal.State{}
	for i, it := range items {
		c, n, err := journal.Admission(it.Control)
		if err != nil {
			errs[i] = fmt.Errorf("admit control: %w", err)
			continue
		}
		key := [2]string{it.RunID, c.InstanceID}
		j, ok := seen[key]
		if !ok {
			st, err := s.readJournal(ctx, tx, it.RunID, c.InstanceID)
			if err != nil {
				return nil, fmt.Errorf("admit control: %w", err)
			}
			j = &st
			seen[key] = j
		}
		before := *j
		if errs[i] = j.Admit(c, n); errs[i] != nil {
			continue
		}
		var input any
		if len(c.Input) > 0 {
			input = string(c.Input)
		}
		res, err := ins.ExecContext(ctx, it.RunID, c.ID, c.InstanceID, c.Action, input, ms(*c.QueuedAt), n, c.SenderID, it.RunID)
		if err != nil {
			return nil, fmt.Errorf("admit control: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			*j = before
			errs[i] = store.ErrNotFound
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("admit control: %w", err)
	}
	return errs, nil
}

const controlColumns = `seq, id, instance_id, action, input, status, queued_at, delivered_at, claimed_at, handled_at, failed_at, error, sender_id`

func scanControl(sc scanner, extra ...any) (int64, store.Control, error) {
	var c store.Control
	var seq int64
	var input, errText sql.NullString
	var ts [5]sql.NullInt64
	dest := append([]any{&seq, &c.ID, &c.InstanceID, &c.Action, &input, &c.Status, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &errText, &c.SenderID}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return 0, c, err
	}
	if input.Valid {
		c.Input = json.RawMessage(input.String)
	}
	c.Error = errText.String
	ptrs := []**time.Time{&c.QueuedAt, &c.DeliveredAt, &c.ClaimedAt, &c.HandledAt, &c.FailedAt}
	for i, v := range ts {
		if v.Valid {
			t := fromMS(v.Int64)
			*ptrs[i] = &t
		}
	}
	return seq, c, nil
}

// TransitionControl implements store.Runs: journal.Transition decides the
// move, on a journal that passes its integrity check.
func (s *DB) TransitionControl(ctx context.Context, runID, id, next string, expected []string, errText string, at time.Time) (store.Control, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Control{}, fmt.Errorf("control transition: %w", err)
	}
	defer tx.Rollback()
	sel, err := s.txStmt(ctx, tx, `SELECT `+controlColumns+`, bytes FROM run_controls WHERE run_id = ? AND id = ?`)
	if err != nil {
		return store.Control{}, fmt.Errorf("control transition: %w", err)
	}
	var old int
	seq, c, err := scanControl(sel.QueryRowContext(ctx, runID, id), &old)
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("control transition: %w", err)
	}
	j, err := s.readJournal(ctx, tx, runID, c.InstanceID)
	if err != nil {
		return c, fmt.Errorf("control transition: %w", err)
	}
	if err := j.Sound(c.InstanceID); err != nil {
		return c, err
	}
	c, err = journal.Transition(c, next, expected, errText, at)
	if err != nil {
		return c, err
	}
	if err := s.writeControl(ctx, tx, seq, old, c, j); err != nil {
		return c, err
	}
	if !store.ControlPending(c.Status) {
		// Keep the newest ControlTerminalLimit terminal records.
		if _, err := s.stmts.execTx(ctx, tx, `DELETE FROM run_controls WHERE run_id = ? AND status IN ('handled','failed') AND seq NOT IN
			(SELECT seq FROM run_controls WHERE run_id = ? AND status IN ('handled','failed') ORDER BY seq DESC LIMIT ?)`,
			runID, runID, store.ControlTerminalLimit); err != nil {
			return c, fmt.Errorf("control transition: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return c, fmt.Errorf("control transition: %w", err)
	}
	return c, nil
}

// MarkControlDelivered implements store.Runs.
func (s *DB) MarkControlDelivered(ctx context.Context, runID string, c store.Control, at time.Time) error {
	was, old, next, n, err := journal.DeliveredMark(c, at)
	if err != nil {
		return fmt.Errorf("control delivered: %w", err)
	}
	// The generation's check (no pending record of another generation)
	// and the byte bound are journal.State's, on the counts the triggers
	// keep on the Run's row.
	res, err := s.stmts.exec(ctx, `UPDATE run_controls SET status = 'delivered', delivered_at = ?1, bytes = ?2
		WHERE run_id = ?3 AND id = ?4 AND instance_id = ?5 AND status = 'queued' AND delivered_at IS NULL AND bytes = ?6
		AND EXISTS (SELECT 1 FROM runs r WHERE r.id = ?3 AND r.control_malformed = 0 AND r.control_invalid = 0 AND r.control_untimed = 0
			AND r.control_bytes <= ?7 AND r.control_bytes - ?6 + ?2 <= ?7)
		AND NOT EXISTS (SELECT 1 FROM run_controls o WHERE o.run_id = ?3 AND o.status IN ('queued', 'delivered', 'claimed') AND o.instance_id <> ?5)`,
		ms(*next.DeliveredAt), n, runID, was.ID, was.InstanceID, old, store.ControlJournalMaxBytes)
	if err != nil {
		return fmt.Errorf("control delivered: %w", err)
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return store.ErrConflict
	}
	return nil
}

// writeControl rewrites record seq (old bytes long) as c, checking that the
// journal j stays within its byte bound.
func (s *DB) writeControl(ctx context.Context, tx *sql.Tx, seq int64, old int, c store.Control, j journal.State) error {
	n, err := journal.Size(c)
	if err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	if err := j.Resize(old, n); err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	_, err = s.stmts.execTx(ctx, tx, `UPDATE run_controls SET status = ?, delivered_at = ?, claimed_at = ?, handled_at = ?, failed_at = ?,
		error = ?, bytes = ? WHERE seq = ?`, c.Status, nullMS(c.DeliveredAt), nullMS(c.ClaimedAt), nullMS(c.HandledAt),
		nullMS(c.FailedAt), nullText(c.Error), n, seq)
	if err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	return nil
}

// ClaimControl implements store.Runs.
func (s *DB) ClaimControl(ctx context.Context, runID, instanceID, id string, at time.Time) (store.Control, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Control{}, fmt.Errorf("claim control: %w", err)
	}
	defer tx.Rollback()
	j, err := s.readJournal(ctx, tx, runID, instanceID)
	if err != nil {
		return store.Control{}, fmt.Errorf("claim control: %w", err)
	}
	if err := j.Sound(instanceID); err != nil {
		return store.Control{}, err
	}
	sel, err := s.txStmt(ctx, tx, `SELECT `+controlColumns+`, bytes FROM run_controls
		WHERE run_id = ? AND instance_id = ? AND status IN ('queued','delivered') AND (?3 = '' OR id = ?3) ORDER BY seq LIMIT 1`)
	if err != nil {
		return store.Control{}, fmt.Errorf("claim control: %w", err)
	}
	var old int
	seq, c, err := scanControl(sel.QueryRowContext(ctx, runID, instanceID, id), &old)
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("claim control: %w", err)
	}
	if c, err = journal.Transition(c, store.ControlClaimed, nil, "", at); err != nil {
		return c, err
	}
	if err := s.writeControl(ctx, tx, seq, old, c, j); err != nil {
		return c, err
	}
	if err := tx.Commit(); err != nil {
		return c, fmt.Errorf("claim control: %w", err)
	}
	return c, nil
}

// Control implements store.Runs.
func (s *DB) Control(ctx context.Context, runID, id string) (store.Control, error) {
	sel, err := s.stmts.stmt(ctx, `SELECT `+controlColumns+` FROM run_controls WHERE run_id = ? AND id = ? ORDER BY seq LIMIT 1`)
	if err != nil {
		return store.Control{}, fmt.Errorf("control: %w", err)
	}
	_, c, err := scanControl(sel.QueryRowContext(ctx, runID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Control{}, store.ErrNotFound
	}
	if err != nil {
		return store.Control{}, fmt.Errorf("control: %w", err)
	}
	return c, nil
}

// Controls implements store.Runs.
func (s *DB) Controls(ctx context.Context, runID string) ([]store.Control, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+controlColumns+` FROM run_controls WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("controls: %w", err)
	}
	defer rows.Close()
	var out []store.Control
	for rows.Next() {
		_, c, err := scanControl(rows)
		if err != nil {
			return nil, fmt.Errorf("controls: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// AppendTrace implements store.Runs.
func (s *DB) AppendTrace(ctx context.Context, runID string, ev store.TraceEvent) error {
	errs, err := s.AppendTraces(ctx, []store.TraceAppend{{RunID: runID, Event: ev}})
	if err != nil {
		return err
	}
	return errs[0]
}

// AppendTraces implements store.Runs. The common case reads the Run's
// two counters and inserts one row (a trigger keeps the counters). When
// journal.TraceFits refuses an append, journal.Compact plans the
// compaction, which is written in the same transaction: the dropped rows
// and the previous marker deleted, the event and a new marker inserted.
func (s *DB) AppendTraces(ctx context.Context, items []store.TraceAppend) ([]error, error) {
	errs := make([]error, len(items))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("append trace: %w", err)
	}
	defer tx.Rollback()
	counts, err := s.txStmt(ctx, tx, `SELECT trace_events, trace_bytes FROM runs WHERE id = ?`)
	if err != nil {
		return nil, fmt.Errorf("append trace: %w", err)
	}
	ins, err := s.txStmt(ctx, tx, `INSERT INTO run_trace (run_id, kind, line, bytes) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("append trace: %w", err)
	}
	for i, it := range items {
		ev := it.Event
		line := it.Line
		if line == nil {
			line, err = journal.EventLine(ev)
		} else {
			err = journal.CheckLine(line)
		}
		if err != nil {
			errs[i] = fmt.Errorf("append trace: %w", err)
			continue
		}
		var events, size int64
		err := counts.QueryRowContext(ctx, it.RunID).Scan(&events, &size)
		if errors.Is(err, sql.ErrNoRows) {
			errs[i] = store.ErrNotFound
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("append trace: %w", err)
		}
		n := int64(len(line))
		if journal.TraceFits(events, size, n) {
			if _, err := ins.ExecContext(ctx, it.RunID, ev.Kind, string(line[:n-1]), n); err != nil {
				return nil, fmt.Errorf("append trace: %w", err)
			}
			continue
		}
		if err := compactTrace(ctx, tx, it.RunID, ev, line); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("append trace: %w", err)
	}
	return errs, nil
}

func commit(tx *sql.Tx, what string) error {
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// compactTrace writes the compaction journal.Compact plans for appending
// ev (encoded as line) to runID's Trace.
func compactTrace(ctx context.Context, tx *sql.Tx, runID string, ev store.TraceEvent, line []byte) error {
	rows, err := tx.QueryContext(ctx, `SELECT seq, kind, bytes FROM run_trace WHERE run_id = ? ORDER BY seq DESC`, runID)
	if err != nil {
		return fmt.Errorf("compact trace: %w", err)
	}
	var entries []journal.TraceEntry
	for rows.Next() {
		var e journal.TraceEntry
		if err := rows.Scan(&e.Key, &e.Kind, &e.Bytes); err != nil {
			rows.Close()
			return fmt.Errorf("compact trace: %w", err)
		}
		entries = append(entries, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("compact trace: %w", err)
	}
	var prev *journal.Compaction
	for _, e := range entries {
		if e.Kind != store.TraceCompactedKind {
			continue
		}
		// Entries are newest first: this is the last marker written.
		var text string
		if err := tx.QueryRowContext(ctx, `SELECT line FROM run_trace WHERE seq = ?`, e.Key).Scan(&text); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
		var m store.TraceEvent
		if json.Unmarshal([]byte(text), &m) == nil {
			prev = journal.MarkerData(m)
		}
		break
	}
	plan, err := journal.Compact(entries, prev, ev, int64(len(line)))
	if err != nil {
		return fmt.Errorf("compact trace: %w", err)
	}
	if plan.Drop {
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_trace WHERE run_id = ? AND seq <= ?`, runID, plan.DropThrough); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
	}
	for _, seq := range plan.Markers {
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_trace WHERE seq = ?`, seq); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
	}
	for _, l := range []struct {
		kind string
		line []byte
	}{{ev.Kind, line}, {store.TraceCompactedKind, plan.MarkerLine}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_trace (run_id, kind, line, bytes) VALUES (?, ?, ?, ?)`,
			runID, l.kind, string(l.line[:len(l.line)-1]), len(l.line)); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET trace_events = ?, trace_bytes = ? WHERE id = ?`, plan.RetainedEvents, plan.RetainedBytes, runID); err != nil {
		return fmt.Errorf("compact trace: %w", err)
	}
	return nil
}

// Trace implements store.Runs.
func (s *DB) Trace(ctx context.Context, runID string, limit int) ([]store.TraceEvent, error) {
	q := `SELECT line FROM run_trace WHERE run_id = ? ORDER BY seq DESC`
	args := []any{runID}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer rows.Close()
	var out []store.TraceEvent
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		var e store.TraceEvent
		if err := json.Unmarshal([]byte(text), &e); err != nil {
			continue // a damaged row is skipped, never fatal to a read
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// TraceStats implements store.Runs.
func (s *DB) TraceStats(ctx context.Context, runID string) (store.TraceStats, error) {
	var st store.TraceStats
	err := s.db.QueryRowContext(ctx, `SELECT trace_events, trace_bytes FROM runs WHERE id = ?`, runID).Scan(&st.Events, &st.Bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return st, store.ErrNotFound
	}
	if err != nil {
		return st, fmt.Errorf("trace stats: %w", err)
	}
	var text string
	err = s.db.QueryRowContext(ctx, `SELECT line FROM run_trace WHERE run_id = ? AND kind = ? ORDER BY seq DESC LIMIT 1`, runID, store.TraceCompactedKind).Scan(&text)
	if err == nil {
		var m store.TraceEvent
		if json.Unmarshal([]byte(text), &m) == nil {
			st.Marker = &m
		}
	} else if !errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("trace stats: %w", err)
	}
	return st, nil
}

// PutTool implements store.Runs.
func (s *DB) PutTool(ctx context.Context, t store.ToolRecord, update bool) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("put tool: %w", err)
	}
	defer tx.Rollback()
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT created_at FROM run_tools WHERE name = ?`, t.Name).Scan(&created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		created = ms(t.CreatedAt)
	case err != nil:
		return fmt.Errorf("put tool: %w", err)
	case !update:
		return store.ErrConflict
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO run_tools (name, owner_id, expose, doc, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		t.Name, t.OwnerID, boolInt(t.Expose), docText(t.Doc), created, ms(t.UpdatedAt)); err != nil {
		return fmt.Errorf("put tool: %w", err)
	}
	return commit(tx, "put tool")
}

func scanTool(sc scanner) (store.ToolRecord, error) {
	var t store.ToolRecord
	var expose int
	var doc string
	var created, updated int64
	if err := sc.Scan(&t.Name, &t.OwnerID, &expose, &doc, &created, &updated); err != nil {
		return t, err
	}
	t.Expose = expose != 0
	t.Doc = json.RawMessage(doc)
	t.CreatedAt, t.UpdatedAt = fromMS(created), fromMS(updated)
	return t, nil
}

// Tool implements store.Runs.
func (s *DB) Tool(ctx context.Context, name string) (store.ToolRecord, error) {
	t, err := scanTool(s.db.QueryRowContext(ctx, `SELECT name, owner_id, expose, doc, created_at, updated_at FROM run_tools WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return t, store.ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("tool %s: %w", name, err)
	}
	return t, nil
}

// ListTools implements store.Runs.
func (s *DB) ListTools(ctx context.Context) ([]store.ToolRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, owner_id, expose, doc, created_at, updated_at FROM run_tools ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	defer rows.Close()
	var out []store.ToolRecord
	for rows.Next() {
		t, err := scanTool(rows)
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteTool implements store.Runs.
func (s *DB) DeleteTool(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM run_tools WHERE name = ?`, strings.TrimSpace(name))
	if err != nil {
		return fmt.Errorf("delete tool: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/assent-run/assent/store"
)

// runMigrations holds the schema of Runs, Control journals, Traces and
// registered tools.
//
// The Control journal and the Trace keep, per row, the encoded size of the
// record as a JSON line, so the byte bounds are checked without re-encoding
// the journal. Statuses are not constrained by the schema: a damaged row is
// reported as an integrity failure rather than hidden.
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
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
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

// journalState is the aggregate view of a Control journal used to decide
// admissions and transitions.
type journalState struct {
	rows      int
	bytes     int
	pending   int
	oldest    sql.NullInt64
	malformed int
	invalid   int
	badTime   int
	foreign   int
}

// journalSQL computes journalState in one pass. A record is invalid when its
// status is unknown, an id is empty, its action is not a lowercase semantic
// token of at most 64 characters or its input is over 380 bytes.
const journalSQL = `SELECT count(*), coalesce(sum(bytes), 0),
	coalesce(sum(status IN ('queued','delivered','claimed')), 0),
	min(CASE status WHEN 'queued' THEN queued_at WHEN 'delivered' THEN delivered_at WHEN 'claimed' THEN claimed_at END),
	coalesce(sum(input IS NOT NULL AND NOT json_valid(input)), 0),
	coalesce(sum(status NOT IN ('queued','delivered','claimed','handled','failed') OR id = '' OR instance_id = ''
		OR NOT (action GLOB '[a-z]*' AND action NOT GLOB '*[^a-z0-9_.-]*' AND length(action) <= 64)
		OR (input IS NOT NULL AND length(CAST(input AS BLOB)) > 380)), 0),
	coalesce(sum(CASE status WHEN 'queued' THEN queued_at IS NULL WHEN 'delivered' THEN delivered_at IS NULL
		WHEN 'claimed' THEN claimed_at IS NULL WHEN 'handled' THEN handled_at IS NULL WHEN 'failed' THEN failed_at IS NULL ELSE 0 END), 0),
	coalesce(sum(status IN ('queued','delivered','claimed') AND instance_id != ?), 0)
	FROM run_controls WHERE run_id = ?`

func readJournal(ctx context.Context, tx *sql.Tx, runID, instance string) (journalState, error) {
	var j journalState
	err := tx.QueryRowContext(ctx, journalSQL, instance, runID).Scan(&j.rows, &j.bytes, &j.pending, &j.oldest,
		&j.malformed, &j.invalid, &j.badTime, &j.foreign)
	return j, err
}

// integrity returns the first integrity failure of j, or "".
func (j journalState) integrity() string {
	switch {
	case j.bytes > store.ControlJournalMaxBytes:
		return "journal_bytes"
	case j.malformed > 0:
		return "malformed"
	case j.invalid > 0:
		return "invalid_record"
	case j.badTime > 0:
		return "invalid_status_timestamp"
	case j.foreign > 0:
		return "generation_mismatch"
	}
	return ""
}

func (j journalState) refusal(reason, integrity, instance string) *store.ControlError {
	e := &store.ControlError{Reason: reason, Pending: j.pending, Limit: store.ControlPendingLimit,
		JournalBytes: j.bytes, JournalLimit: store.ControlJournalMaxBytes, InstanceID: instance, IntegrityReason: integrity}
	if j.oldest.Valid {
		e.OldestPendingAt = fromMS(j.oldest.Int64)
	}
	return e
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

func controlBytes(c store.Control) (int, error) {
	b, err := store.EncodeLine(c)
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// AdmitControl implements store.Runs.
func (s *DB) AdmitControl(ctx context.Context, runID string, c store.Control) (store.Control, error) {
	items := []store.ControlAdmission{{RunID: runID, Control: c}}
	errs, err := s.AdmitControls(ctx, items)
	if err != nil {
		return c, err
	}
	return canonicalAdmission(c), errs[0]
}

func canonicalAdmission(c store.Control) store.Control {
	c.Status = store.ControlQueued
	c.DeliveredAt, c.ClaimedAt, c.HandledAt, c.FailedAt, c.Error = nil, nil, nil, nil, ""
	t := time.Now()
	if c.QueuedAt != nil {
		t = *c.QueuedAt
	}
	t = t.UTC().Truncate(time.Millisecond)
	c.QueuedAt = &t
	return c
}

// AdmitControls implements store.Runs. Each admission reads the aggregate
// state of its journal inside the transaction, so the bounds hold exactly
// whatever the interleaving of callers.
func (s *DB) AdmitControls(ctx context.Context, items []store.ControlAdmission) ([]error, error) {
	errs := make([]error, len(items))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("admit control: %w", err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO run_controls (run_id, id, instance_id, action, input, status, queued_at, bytes, sender_id)
		SELECT ?, ?, ?, ?, ?, 'queued', ?, ?, ? WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?)`)
	if err != nil {
		return nil, fmt.Errorf("admit control: %w", err)
	}
	defer ins.Close()
	agg, err := tx.PrepareContext(ctx, journalSQL)
	if err != nil {
		return nil, fmt.Errorf("admit control: %w", err)
	}
	defer agg.Close()
	seen := map[[2]string]journalState{}
	for i, it := range items {
		c := canonicalAdmission(it.Control)
		n, err := controlBytes(c)
		if err != nil {
			errs[i] = fmt.Errorf("admit control: %w", err)
			continue
		}
		// The journal is read once per Run and generation in a batch and
		// then kept up to date in memory with what this batch inserts.
		key := [2]string{it.RunID, c.InstanceID}
		j, ok := seen[key]
		if !ok {
			if err := agg.QueryRowContext(ctx, c.InstanceID, it.RunID).Scan(&j.rows, &j.bytes, &j.pending, &j.oldest,
				&j.malformed, &j.invalid, &j.badTime, &j.foreign); err != nil {
				return nil, fmt.Errorf("admit control: %w", err)
			}
			seen[key] = j
		}
		if r := j.integrity(); r != "" {
			errs[i] = j.refusal("control_journal_integrity", r, c.InstanceID)
			continue
		}
		if j.pending >= store.ControlPendingLimit || j.bytes+n > store.ControlJournalMaxBytes {
			errs[i] = j.refusal("control_backpressure", "", c.InstanceID)
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
			errs[i] = store.ErrNotFound
			continue
		}
		j.rows++
		j.pending++
		j.bytes += n
		if !j.oldest.Valid || ms(*c.QueuedAt) < j.oldest.Int64 {
			j.oldest = sql.NullInt64{Int64: ms(*c.QueuedAt), Valid: true}
		}
		seen[key] = j
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("admit control: %w", err)
	}
	return errs, nil
}

const controlColumns = `seq, id, instance_id, action, input, status, queued_at, delivered_at, claimed_at, handled_at, failed_at, error, sender_id`

func scanControl(sc scanner) (int64, store.Control, error) {
	var c store.Control
	var seq int64
	var input, errText sql.NullString
	var ts [5]sql.NullInt64
	if err := sc.Scan(&seq, &c.ID, &c.InstanceID, &c.Action, &input, &c.Status, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &errText, &c.SenderID); err != nil {
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

// TruncateControlError bounds a Control error to store.ControlErrorMaxBytes,
// cutting on a UTF-8 boundary and marking the cut.
func truncateControlError(s string) string {
	const suffix = "… [truncated]"
	if len(s) <= store.ControlErrorMaxBytes {
		return s
	}
	n := store.ControlErrorMaxBytes - len(suffix)
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + suffix
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

func legalTransition(cur, next string) bool {
	switch next {
	case store.ControlDelivered:
		return store.ControlPending(cur)
	case store.ControlClaimed:
		return cur == store.ControlQueued || cur == store.ControlDelivered
	case store.ControlHandled:
		return cur == store.ControlClaimed
	case store.ControlFailed:
		return store.ControlPending(cur)
	}
	return false
}

// TransitionControl implements store.Runs.
func (s *DB) TransitionControl(ctx context.Context, runID, id, next string, expected []string, errText string, at time.Time) (store.Control, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Control{}, fmt.Errorf("control transition: %w", err)
	}
	defer tx.Rollback()
	seq, c, err := scanControl(tx.QueryRowContext(ctx, `SELECT `+controlColumns+` FROM run_controls WHERE run_id = ? AND id = ?`, runID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("control transition: %w", err)
	}
	j, err := readJournal(ctx, tx, runID, c.InstanceID)
	if err != nil {
		return c, fmt.Errorf("control transition: %w", err)
	}
	if r := j.integrity(); r != "" {
		return c, j.refusal("control_journal_integrity", r, c.InstanceID)
	}
	if len(expected) > 0 && !contains(expected, c.Status) {
		return c, store.ErrConflict
	}
	if next == c.Status || !legalTransition(c.Status, next) {
		return c, store.ErrConflict
	}
	t := at.UTC().Truncate(time.Millisecond)
	switch next {
	case store.ControlDelivered:
		if c.DeliveredAt != nil {
			return c, store.ErrConflict
		}
		c.DeliveredAt = &t
		if c.Status == store.ControlQueued {
			c.Status = store.ControlDelivered
		}
	case store.ControlClaimed:
		c.ClaimedAt, c.Status = &t, next
	case store.ControlHandled:
		c.HandledAt, c.Status = &t, next
	case store.ControlFailed:
		c.FailedAt, c.Status = &t, next
		c.Error = truncateControlError(errText)
	}
	if err := writeControl(ctx, tx, runID, seq, c, j.bytes); err != nil {
		return c, err
	}
	if !store.ControlPending(c.Status) {
		// Keep the newest ControlTerminalLimit terminal records.
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_controls WHERE run_id = ? AND status IN ('handled','failed') AND seq NOT IN
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

func writeControl(ctx context.Context, tx *sql.Tx, runID string, seq int64, c store.Control, journalBytes int) error {
	n, err := controlBytes(c)
	if err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	var old int
	if err := tx.QueryRowContext(ctx, `SELECT bytes FROM run_controls WHERE seq = ?`, seq).Scan(&old); err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	if journalBytes-old+n > store.ControlJournalMaxBytes {
		return errors.New("control transition: Run Control journal transition exceeds bounded byte limit")
	}
	_, err = tx.ExecContext(ctx, `UPDATE run_controls SET status = ?, delivered_at = ?, claimed_at = ?, handled_at = ?, failed_at = ?,
		error = ?, bytes = ? WHERE seq = ?`, c.Status, nullMS(c.DeliveredAt), nullMS(c.ClaimedAt), nullMS(c.HandledAt),
		nullMS(c.FailedAt), nullText(c.Error), n, seq)
	if err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ClaimControl implements store.Runs.
func (s *DB) ClaimControl(ctx context.Context, runID, instanceID, id string, at time.Time) (store.Control, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Control{}, fmt.Errorf("claim control: %w", err)
	}
	defer tx.Rollback()
	j, err := readJournal(ctx, tx, runID, instanceID)
	if err != nil {
		return store.Control{}, fmt.Errorf("claim control: %w", err)
	}
	if r := j.integrity(); r != "" {
		return store.Control{}, j.refusal("control_journal_integrity", r, instanceID)
	}
	q := `SELECT ` + controlColumns + ` FROM run_controls WHERE run_id = ? AND instance_id = ? AND status IN ('queued','delivered')`
	args := []any{runID, instanceID}
	if id != "" {
		q += ` AND id = ?`
		args = append(args, id)
	}
	q += ` ORDER BY seq LIMIT 1`
	seq, c, err := scanControl(tx.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("claim control: %w", err)
	}
	t := at.UTC().Truncate(time.Millisecond)
	c.ClaimedAt, c.Status = &t, store.ControlClaimed
	if err := writeControl(ctx, tx, runID, seq, c, j.bytes); err != nil {
		return c, err
	}
	if err := tx.Commit(); err != nil {
		return c, fmt.Errorf("claim control: %w", err)
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

// compactionData is the data of a runtime.trace_compacted marker; the
// counters are cumulative over every compaction of the generation.
type compactionData struct {
	Version                    int   `json:"version"`
	CompactionsTotal           int64 `json:"compactions_total"`
	DroppedValidEventsTotal    int64 `json:"dropped_valid_events_total"`
	DroppedMalformedLinesTotal int64 `json:"dropped_malformed_lines_total"`
	DroppedBytesTotal          int64 `json:"dropped_bytes_total"`
	DroppedEventCountExact     bool  `json:"dropped_event_count_exact"`
	RetainedEvents             int64 `json:"retained_events"`
	RetainedBytes              int64 `json:"retained_bytes"`
	HistoryComplete            bool  `json:"history_complete"`
}

const maxSafeInteger = 1<<53 - 1

func satAdd(a, b int64) int64 {
	if a > maxSafeInteger-b {
		return maxSafeInteger
	}
	return a + b
}

func markerLine(id string, ts time.Time, d compactionData) ([]byte, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return store.EncodeLine(store.TraceEvent{ID: id, TS: ts, Kind: store.TraceCompactedKind, Level: "warning", Data: data})
}

// AppendTrace implements store.Runs.
func (s *DB) AppendTrace(ctx context.Context, runID string, ev store.TraceEvent) error {
	errs, err := s.AppendTraces(ctx, []store.TraceAppend{{RunID: runID, Event: ev}})
	if err != nil {
		return err
	}
	return errs[0]
}

// AppendTraces implements store.Runs. The common case inserts one row and
// bumps two counters. When an append would pass TraceMaxEvents or
// TraceMaxBytes, the newest suffix that fits TraceTargetEvents and
// TraceTargetBytes (with room for the new event and the marker) is kept,
// the rest and the previous marker are deleted, and the new event is
// followed by one marker carrying the cumulative totals. A compaction
// happens at most once per TraceMaxEvents-TraceTargetEvents appends of
// small events, so appends stay amortized O(1).
func (s *DB) AppendTraces(ctx context.Context, items []store.TraceAppend) ([]error, error) {
	errs := make([]error, len(items))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("append trace: %w", err)
	}
	defer tx.Rollback()
	// The fast path is one statement: the row goes in only while both
	// bounds hold, and a trigger keeps the Run's counters.
	ins, err := tx.PrepareContext(ctx, `INSERT INTO run_trace (run_id, kind, line, bytes) SELECT ?, ?, ?, ?
		WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND trace_events + 1 <= ? AND trace_bytes + ? <= ?)`)
	if err != nil {
		return nil, fmt.Errorf("append trace: %w", err)
	}
	defer ins.Close()
	for i, it := range items {
		ev := it.Event
		line := it.Line
		if line == nil {
			ev.TS = ev.TS.UTC().Truncate(time.Millisecond)
			if line, err = store.EncodeLine(ev); err != nil {
				errs[i] = fmt.Errorf("append trace: %w", err)
				continue
			}
		}
		if len(line)-1 > store.TraceEventMaxBytes {
			errs[i] = fmt.Errorf("append trace: event exceeds %d bytes", store.TraceEventMaxBytes)
			continue
		}
		n := int64(len(line))
		res, err := ins.ExecContext(ctx, it.RunID, ev.Kind, string(line[:n-1]), n, it.RunID, store.TraceMaxEvents, n, store.TraceMaxBytes)
		if err != nil {
			return nil, fmt.Errorf("append trace: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
			continue
		}
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, it.RunID).Scan(&exists); err != nil {
			return nil, fmt.Errorf("append trace: %w", err)
		}
		if exists == 0 {
			errs[i] = store.ErrNotFound
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

func compactTrace(ctx context.Context, tx *sql.Tx, runID string, ev store.TraceEvent, line []byte) error {
	type row struct {
		seq   int64
		kind  string
		bytes int64
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, kind, bytes FROM run_trace WHERE run_id = ? ORDER BY seq DESC`, runID)
	if err != nil {
		return fmt.Errorf("compact trace: %w", err)
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.kind, &r.bytes); err != nil {
			rows.Close()
			return fmt.Errorf("compact trace: %w", err)
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("compact trace: %w", err)
	}
	var prev compactionData
	prev.DroppedEventCountExact = true
	var markers []int64
	var candidates []row
	var candidateBytes int64
	for _, r := range all {
		if r.kind == store.TraceCompactedKind {
			markers = append(markers, r.seq)
			continue
		}
		candidates = append(candidates, r)
		candidateBytes += r.bytes
	}
	if len(markers) > 0 {
		// Rows are newest first: markers[0] is the last marker written.
		var text string
		if err := tx.QueryRowContext(ctx, `SELECT line FROM run_trace WHERE seq = ?`, markers[0]).Scan(&text); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
		var m store.TraceEvent
		if json.Unmarshal([]byte(text), &m) == nil {
			_ = json.Unmarshal(m.Data, &prev)
		}
	}
	n := int64(len(line))
	markerID := uuid.NewString()
	reserveLine, err := markerLine(markerID, ev.TS, compactionData{Version: 1, CompactionsTotal: maxSafeInteger,
		DroppedValidEventsTotal: maxSafeInteger, DroppedMalformedLinesTotal: maxSafeInteger, DroppedBytesTotal: maxSafeInteger,
		RetainedEvents: maxSafeInteger, RetainedBytes: maxSafeInteger})
	if err != nil {
		return fmt.Errorf("compact trace: %w", err)
	}
	budget := int64(store.TraceTargetBytes) - n - int64(len(reserveLine))
	var kept int
	var keptBytes int64
	for _, r := range candidates {
		if kept >= store.TraceTargetEvents-2 || keptBytes+r.bytes > budget {
			break
		}
		kept++
		keptBytes += r.bytes
	}
	// Delete everything older than the oldest kept candidate, and every
	// previous marker.
	if kept < len(candidates) {
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_trace WHERE run_id = ? AND seq <= ?`, runID, candidates[kept].seq); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
	}
	for _, seq := range markers {
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_trace WHERE seq = ?`, seq); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
	}
	d := compactionData{
		Version:                    1,
		CompactionsTotal:           satAdd(prev.CompactionsTotal, 1),
		DroppedValidEventsTotal:    satAdd(prev.DroppedValidEventsTotal, int64(len(candidates)-kept)),
		DroppedMalformedLinesTotal: prev.DroppedMalformedLinesTotal,
		DroppedBytesTotal:          satAdd(prev.DroppedBytesTotal, candidateBytes-keptBytes),
		DroppedEventCountExact:     prev.DroppedEventCountExact,
		RetainedEvents:             int64(kept + 2),
	}
	var mline []byte
	for i := 0; ; i++ {
		if i == 8 {
			return errors.New("compact trace: marker size did not converge")
		}
		mline, err = markerLine(markerID, ev.TS, d)
		if err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
		total := keptBytes + n + int64(len(mline))
		if d.RetainedBytes == total {
			break
		}
		d.RetainedBytes = total
	}
	if d.RetainedBytes > store.TraceTargetBytes || d.RetainedEvents > store.TraceTargetEvents {
		return errors.New("compact trace: could not satisfy journal bounds")
	}
	for _, l := range []struct {
		kind string
		line []byte
	}{{ev.Kind, line}, {store.TraceCompactedKind, mline}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_trace (run_id, kind, line, bytes) VALUES (?, ?, ?, ?)`,
			runID, l.kind, string(l.line[:len(l.line)-1]), len(l.line)); err != nil {
			return fmt.Errorf("compact trace: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET trace_events = ?, trace_bytes = ? WHERE id = ?`, d.RetainedEvents, d.RetainedBytes, runID); err != nil {
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

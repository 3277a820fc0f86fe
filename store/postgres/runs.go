package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/run/journal"
	"github.com/assent-run/assent/store"
)

// runMigrations holds the schema of Runs, Control journals, Traces and
// registered tools.
//
// The Control journal and the Trace keep, per row, the encoded size of the
// record as a JSON line, so the byte bounds are checked without re-encoding
// the journal; the runs row keeps the Trace's event and byte counts. A Run's
// row is also the lock its journal and Trace are written under. Statuses
// are not constrained by the schema: a damaged row is reported as an
// integrity failure rather than hidden. JSON documents are text, so they
// read back byte for byte. From step 4 a trigger keeps, on the Run's row,
// the journal's size and the count of each integrity flaw of its rows
// (assent_control_flaw: 1 malformed input, 2 invalid record, 3 missing
// status time, 0 none; the action test is journal.ActionPattern), whatever
// writes the rows; a partial index holds the pending records.
var runMigrations = []migration{{1, `
CREATE TABLE runs (
	id TEXT COLLATE "C" PRIMARY KEY,
	owner_id TEXT NOT NULL,
	instance_id TEXT NOT NULL,
	generation INTEGER NOT NULL,
	pid INTEGER NOT NULL DEFAULT 0,
	start_time TEXT NOT NULL DEFAULT '',
	exit_code INTEGER,
	stop TEXT NOT NULL DEFAULT '',
	created_at TIMESTAMPTZ NOT NULL,
	started_at TIMESTAMPTZ NOT NULL,
	ended_at TIMESTAMPTZ,
	archived BOOLEAN NOT NULL DEFAULT false,
	archive_dir TEXT NOT NULL DEFAULT '',
	doc TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX runs_owner ON runs(owner_id, created_at);
CREATE TABLE run_controls (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id TEXT NOT NULL,
	id TEXT NOT NULL,
	instance_id TEXT NOT NULL,
	action TEXT NOT NULL,
	input TEXT,
	status TEXT NOT NULL,
	queued_at TIMESTAMPTZ,
	delivered_at TIMESTAMPTZ,
	claimed_at TIMESTAMPTZ,
	handled_at TIMESTAMPTZ,
	failed_at TIMESTAMPTZ,
	error TEXT,
	bytes INTEGER NOT NULL
);
CREATE INDEX run_controls_run ON run_controls(run_id, seq);
CREATE TABLE run_trace (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	line TEXT NOT NULL,
	bytes INTEGER NOT NULL
);
CREATE INDEX run_trace_run ON run_trace(run_id, seq);
CREATE TABLE run_tools (
	name TEXT COLLATE "C" PRIMARY KEY,
	owner_id TEXT NOT NULL,
	expose BOOLEAN NOT NULL,
	doc TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL
);
`}, {2, `
ALTER TABLE runs ADD COLUMN trace_events BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN trace_bytes BIGINT NOT NULL DEFAULT 0;
`}, {3, `
ALTER TABLE run_controls ADD COLUMN sender_id TEXT NOT NULL DEFAULT '';
`}, {4, `
CREATE FUNCTION assent_control_flaw(c run_controls) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
	st timestamptz;
BEGIN
	IF c.input <> '' THEN
		BEGIN
			PERFORM c.input::json;
		EXCEPTION WHEN others THEN
			RETURN 1;
		END;
	END IF;
	IF c.status NOT IN ('queued', 'delivered', 'claimed', 'handled', 'failed') OR c.id = '' OR c.instance_id = ''
		OR octet_length(c.action) > 64 OR c.action COLLATE "C" !~ '^[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)*$'
		OR COALESCE(octet_length(c.input) > 380, false) THEN
		RETURN 2;
	END IF;
	st := CASE c.status WHEN 'queued' THEN c.queued_at WHEN 'delivered' THEN c.delivered_at WHEN 'claimed' THEN c.claimed_at
		WHEN 'handled' THEN c.handled_at WHEN 'failed' THEN c.failed_at END;
	IF st IS NULL THEN
		RETURN 3;
	END IF;
	RETURN 0;
END
$fn$;
CREATE FUNCTION assent_control_tally() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
	f integer;
BEGIN
	IF TG_OP <> 'INSERT' THEN
		f := assent_control_flaw(OLD);
		UPDATE runs SET control_bytes = control_bytes - OLD.bytes, control_malformed = control_malformed - (f = 1)::int,
			control_invalid = control_invalid - (f = 2)::int, control_untimed = control_untimed - (f = 3)::int
		WHERE id = OLD.run_id;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		f := assent_control_flaw(NEW);
		UPDATE runs SET control_bytes = control_bytes + NEW.bytes, control_malformed = control_malformed + (f = 1)::int,
			control_invalid = control_invalid + (f = 2)::int, control_untimed = control_untimed + (f = 3)::int
		WHERE id = NEW.run_id;
	END IF;
	RETURN NULL;
END
$fn$;
ALTER TABLE runs ADD COLUMN control_bytes BIGINT NOT NULL DEFAULT 0,
	ADD COLUMN control_malformed INTEGER NOT NULL DEFAULT 0,
	ADD COLUMN control_invalid INTEGER NOT NULL DEFAULT 0,
	ADD COLUMN control_untimed INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET control_bytes = t.bytes, control_malformed = t.malformed, control_invalid = t.invalid, control_untimed = t.untimed
FROM (SELECT run_id, SUM(bytes) AS bytes, COUNT(*) FILTER (WHERE f = 1) AS malformed,
		COUNT(*) FILTER (WHERE f = 2) AS invalid, COUNT(*) FILTER (WHERE f = 3) AS untimed
	FROM (SELECT c.run_id, c.bytes, assent_control_flaw(c) AS f FROM run_controls c) x GROUP BY run_id) t
WHERE runs.id = t.run_id;
CREATE TRIGGER run_controls_tally AFTER INSERT OR UPDATE OR DELETE ON run_controls
	FOR EACH ROW EXECUTE FUNCTION assent_control_tally();
CREATE INDEX run_controls_pending ON run_controls(run_id, seq) WHERE status IN ('queued', 'delivered', 'claimed');
`}, {5, runRequestsSchema}, {6, `
-- A record is found by its id (a transition, a claim by id, a read of one
-- record) without walking the Run's whole journal.
CREATE INDEX run_controls_id ON run_controls(run_id, id);
`}, {7, `
-- A record that stays in its Run's journal (every transition) moves the
-- Run's tally in one write, not two.
CREATE OR REPLACE FUNCTION assent_control_tally() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
	f integer;
	g integer;
BEGIN
	IF TG_OP = 'UPDATE' AND OLD.run_id = NEW.run_id THEN
		f := assent_control_flaw(OLD);
		g := assent_control_flaw(NEW);
		UPDATE runs SET control_bytes = control_bytes - OLD.bytes + NEW.bytes,
			control_malformed = control_malformed - (f = 1)::int + (g = 1)::int,
			control_invalid = control_invalid - (f = 2)::int + (g = 2)::int,
			control_untimed = control_untimed - (f = 3)::int + (g = 3)::int
		WHERE id = NEW.run_id;
		RETURN NULL;
	END IF;
	IF TG_OP <> 'INSERT' THEN
		f := assent_control_flaw(OLD);
		UPDATE runs SET control_bytes = control_bytes - OLD.bytes, control_malformed = control_malformed - (f = 1)::int,
			control_invalid = control_invalid - (f = 2)::int, control_untimed = control_untimed - (f = 3)::int
		WHERE id = OLD.run_id;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		f := assent_control_flaw(NEW);
		UPDATE runs SET control_bytes = control_bytes + NEW.bytes, control_malformed = control_malformed + (f = 1)::int,
			control_invalid = control_invalid + (f = 2)::int, control_untimed = control_untimed + (f = 3)::int
		WHERE id = NEW.run_id;
	END IF;
	RETURN NULL;
END
$fn$;
`}}

const runColumns = `id, owner_id, instance_id, generation, pid, start_time, exit_code, stop,
	created_at, started_at, ended_at, archived, archive_dir, doc`

func scanRun(row pgx.Row) (store.RunRecord, error) {
	var (
		r     store.RunRecord
		ended *time.Time
		doc   string
	)
	if err := row.Scan(&r.ID, &r.OwnerID, &r.InstanceID, &r.Generation, &r.PID, &r.StartTime, &r.ExitCode, &r.Stop,
		&r.CreatedAt, &r.StartedAt, &ended, &r.Archived, &r.ArchiveDir, &doc); err != nil {
		return r, err
	}
	r.CreatedAt, r.StartedAt, r.EndedAt = utc(r.CreatedAt), utc(r.StartedAt), fromOpt(ended)
	r.Doc = json.RawMessage(doc)
	return r, nil
}

func docText(d json.RawMessage) string {
	if len(d) == 0 {
		return "{}"
	}
	return string(d)
}

// ClaimRun implements store.Runs. Replacing a generation rewrites the Run's
// row in place, so writers waiting on its lock carry on with the new
// generation.
func (s *DB) ClaimRun(ctx context.Context, rec store.RunRecord, replaceInstance string) error {
	return s.write(ctx, "claim run", func(tx pgx.Tx) error {
		var cur string
		err := tx.QueryRow(ctx, `SELECT instance_id FROM runs WHERE id = $1 FOR UPDATE`, rec.ID).Scan(&cur)
		switch err = rowErr(err, "claim run"); {
		case errors.Is(err, store.ErrNotFound):
			if replaceInstance != "" {
				return store.ErrConflict
			}
			_, err := tx.Exec(ctx, `INSERT INTO runs (`+runColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
				rec.ID, rec.OwnerID, rec.InstanceID, rec.Generation, rec.PID, rec.StartTime, rec.ExitCode, rec.Stop,
				rec.CreatedAt, rec.StartedAt, optTime(rec.EndedAt), rec.Archived, rec.ArchiveDir, docText(rec.Doc))
			if isUnique(err) {
				return store.ErrConflict
			}
			if err != nil {
				return fmt.Errorf("claim run: %w", err)
			}
			return nil
		case err != nil:
			return err
		case replaceInstance == "" || cur != replaceInstance:
			return store.ErrConflict
		}
		for _, q := range []string{`DELETE FROM run_controls WHERE run_id = $1`, `DELETE FROM run_trace WHERE run_id = $1`} {
			if _, err := tx.Exec(ctx, q, rec.ID); err != nil {
				return fmt.Errorf("claim run: %w", err)
			}
		}
		_, err = tx.Exec(ctx, `UPDATE runs SET owner_id = $2, instance_id = $3, generation = $4, pid = $5, start_time = $6,
			exit_code = $7, stop = $8, created_at = $9, started_at = $10, ended_at = $11, archived = $12, archive_dir = $13,
			doc = $14, trace_events = 0, trace_bytes = 0, control_bytes = 0, control_malformed = 0, control_invalid = 0,
			control_untimed = 0 WHERE id = $1`,
			rec.ID, rec.OwnerID, rec.InstanceID, rec.Generation, rec.PID, rec.StartTime, rec.ExitCode, rec.Stop,
			rec.CreatedAt, rec.StartedAt, optTime(rec.EndedAt), rec.Archived, rec.ArchiveDir, docText(rec.Doc))
		if err != nil {
			return fmt.Errorf("claim run: %w", err)
		}
		return nil
	})
}

// SaveRun implements store.Runs.
func (s *DB) SaveRun(ctx context.Context, rec store.RunRecord) error {
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET pid = $1, start_time = $2, exit_code = $3, stop = $4, ended_at = $5,
		archived = $6, archive_dir = $7, doc = $8 WHERE id = $9 AND instance_id = $10`,
		rec.PID, rec.StartTime, rec.ExitCode, rec.Stop, optTime(rec.EndedAt),
		rec.Archived, rec.ArchiveDir, docText(rec.Doc), rec.ID, rec.InstanceID)
	if err != nil {
		return fmt.Errorf("save run: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Run implements store.Runs.
func (s *DB) Run(ctx context.Context, id string) (store.RunRecord, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id))
	if err != nil {
		return store.RunRecord{}, rowErr(err, "run "+id)
	}
	return r, nil
}

// ListRuns implements store.Runs.
func (s *DB) ListRuns(ctx context.Context, ownerID string) ([]store.RunRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE ($1::text = '' OR owner_id = $1) ORDER BY created_at, id`, ownerID)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// DeleteRun implements store.Runs.
func (s *DB) DeleteRun(ctx context.Context, id string) error {
	return s.write(ctx, "delete run", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM runs WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("delete run: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		for _, q := range []string{`DELETE FROM run_controls WHERE run_id = $1`, `DELETE FROM run_trace WHERE run_id = $1`} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("delete run: %w", err)
			}
		}
		return nil
	})
}

// traceCounts are a locked Run's Trace counters, kept up to date in memory
// while a transaction appends.
type traceCounts struct {
	events, bytes int64
	changed       bool
}

// lockRuns locks the rows of the Runs ids names, in id order so that
// transactions locking several Runs cannot deadlock, and returns the Trace
// counters of those that exist.
func lockRuns(ctx context.Context, tx txQuerier, ids []string) (map[string]*traceCounts, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rows, err := tx.Query(ctx, `SELECT id, trace_events, trace_bytes FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]*traceCounts, len(ids))
	for rows.Next() {
		var (
			id string
			c  traceCounts
		)
		if err := rows.Scan(&id, &c.events, &c.bytes); err != nil {
			return nil, err
		}
		out[id] = &c
	}
	return out, rows.Err()
}

const controlColumns = `seq, id, instance_id, action, input, status, queued_at, delivered_at, claimed_at, handled_at, failed_at, error, sender_id, bytes`

// scanControl reads a row of controlColumns: the record with its sequence
// number and encoded size.
func scanControl(row pgx.Row) (int64, journal.Record, error) {
	var (
		r       journal.Record
		seq     int64
		input   *string
		errText *string
		ts      [5]*time.Time
	)
	c := &r.Control
	if err := row.Scan(&seq, &c.ID, &c.InstanceID, &c.Action, &input, &c.Status, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &errText, &c.SenderID, &r.Bytes); err != nil {
		return 0, r, err
	}
	if input != nil {
		c.Input = json.RawMessage(*input)
	}
	if errText != nil {
		c.Error = *errText
	}
	ptrs := []**time.Time{&c.QueuedAt, &c.DeliveredAt, &c.ClaimedAt, &c.HandledAt, &c.FailedAt}
	for i, t := range ts {
		if t != nil {
			u := t.UTC()
			*ptrs[i] = &u
		}
	}
	return seq, r, nil
}

// journalQuery summarizes the Control journal of the Run $1 for the
// generation given by the SQL expression instance: the size and flaw
// counts the trigger keeps on the Run's row, and the pending records, read
// through their partial index. The rules of run/journal decide on the
// counts, and no terminal record is read, so the cost does not grow with
// the terminal records a journal keeps. A Run that does not exist has an
// empty journal.
func journalQuery(instance string) string {
	return `SELECT r.control_bytes, r.control_malformed, r.control_invalid, r.control_untimed, p.n, p.oldest, p.foreign
		FROM runs r, LATERAL (SELECT COUNT(*) AS n, COUNT(*) FILTER (WHERE instance_id <> ` + instance + `) AS foreign,
			MIN(CASE status WHEN 'queued' THEN queued_at WHEN 'delivered' THEN delivered_at WHEN 'claimed' THEN claimed_at END) AS oldest
			FROM run_controls WHERE run_id = r.id AND status IN ('queued', 'delivered', 'claimed')) p
		WHERE r.id = $1`
}

// scanJournal reads the row of journalQuery.
func scanJournal(row pgx.Row) (journal.State, error) {
	var (
		t      journal.Tally
		oldest *time.Time
	)
	err := row.Scan(&t.Bytes, &t.Malformed, &t.Invalid, &t.Timestamp, &t.Pending, &oldest, &t.Generation)
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.State{}, nil
	}
	if err != nil {
		return journal.State{}, err
	}
	if oldest != nil {
		t.Oldest = oldest.UTC()
	}
	return t.State(), nil
}

func optTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

func optText(s string) any {
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

// AdmitControls implements store.Runs. The Runs of the batch are locked
// first; each admission is then decided by journal.State.Admit on the
// journal as read under that lock, so the bounds hold exactly whatever the
// interleaving of callers, on one node or many. The inserts go to the
// server in one round trip.
func (s *DB) AdmitControls(ctx context.Context, items []store.ControlAdmission) ([]error, error) {
	var errs []error
	// Two round trips for a batch whose items each name a Run's current
	// generation: the locks and the journals as one batch, then the
	// inserts with COMMIT. A journal read after an insert to the same Run
	// costs one more.
	err := s.pipeWrite(ctx, "admit control", func(p *pipe) error {
		errs = make([]error, len(items))
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.RunID
		}
		ids = slices.Clone(ids)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		// The journal of each Run's first generation in items is read
		// with the locks, before any insert.
		type key = [2]string
		var first []key
		firstRun := map[string]bool{}
		for _, it := range items {
			if !firstRun[it.RunID] {
				firstRun[it.RunID] = true
				first = append(first, key{it.RunID, it.Control.InstanceID})
			}
		}
		reads := &pgx.Batch{}
		reads.Queue(`SELECT id FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
		for _, k := range first {
			reads.Queue(journalQuery("$2"), k[0], k[1])
		}
		br := p.SendBatch(ctx, reads)
		exists, err := scanIDs(br)
		if err != nil {
			br.Close()
			return fmt.Errorf("admit control: %w", err)
		}
		// The journal is read once per Run and generation in a batch and
		// then kept up to date in memory with what this batch inserts.
		seen := map[key]*journal.State{}
		for _, k := range first {
			st, err := scanJournal(br.QueryRow())
			if err != nil {
				br.Close()
				return fmt.Errorf("admit control: %w", err)
			}
			seen[k] = &st
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("admit control: %w", err)
		}
		batch := &pgx.Batch{}
		for i, it := range items {
			c, n, err := journal.Admission(it.Control)
			if err != nil {
				errs[i] = fmt.Errorf("admit control: %w", err)
				continue
			}
			if !exists[it.RunID] {
				errs[i] = store.ErrNotFound
				continue
			}
			k := key{it.RunID, c.InstanceID}
			j, ok := seen[k]
			if !ok {
				// The journal read must see this batch's earlier inserts.
				batch.Queue(journalQuery("$2"), it.RunID, c.InstanceID)
				br := p.SendBatch(ctx, batch)
				for range batch.Len() - 1 {
					if _, err = br.Exec(); err != nil {
						break
					}
				}
				var st journal.State
				if err == nil {
					st, err = scanJournal(br.QueryRow())
				}
				if cerr := br.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return fmt.Errorf("admit control: %w", err)
				}
				batch = &pgx.Batch{}
				j = &st
				seen[k] = j
			}
			if errs[i] = j.Admit(c, n); errs[i] != nil {
				continue
			}
			var input any
			if len(c.Input) > 0 {
				input = string(c.Input)
			}
			batch.Queue(`INSERT INTO run_controls (run_id, id, instance_id, action, input, status, queued_at, bytes, sender_id)
				VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8)`, it.RunID, c.ID, c.InstanceID, c.Action, input, *c.QueuedAt, n, c.SenderID)
		}
		if err := p.SendFinal(ctx, batch).Close(); err != nil {
			return fmt.Errorf("admit control: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// scanIDs reads the ids the next statement of br returns.
func scanIDs(br pgx.BatchResults) (map[string]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// TransitionControl implements store.Runs: journal.Transition decides the
// move, on a journal that passes its integrity check, under the Run's
// lock.
func (s *DB) TransitionControl(ctx context.Context, runID, id, next string, expected []string, errText string, at time.Time) (store.Control, error) {
	var out store.Control
	// Two round trips: the lock, the record and its journal as one batch
	// (each read after the lock is held), then the writes with COMMIT.
	err := s.pipeWrite(ctx, "control transition", func(p *pipe) error {
		reads := &pgx.Batch{}
		reads.Queue(`SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, runID)
		reads.Queue(`SELECT `+controlColumns+` FROM run_controls WHERE run_id = $1 AND id = $2 ORDER BY seq LIMIT 1`, runID, id)
		reads.Queue(journalQuery(`(SELECT instance_id FROM run_controls WHERE run_id = $1 AND id = $2 ORDER BY seq LIMIT 1)`), runID, id)
		br := p.SendBatch(ctx, reads)
		var one int
		if err := br.QueryRow().Scan(&one); err != nil {
			br.Close()
			return rowErr(err, "control transition")
		}
		seq, rec, err := scanControl(br.QueryRow())
		if err != nil {
			br.Close()
			return rowErr(err, "control transition")
		}
		j, err := scanJournal(br.QueryRow())
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("control transition: %w", err)
		}
		c := rec.Control
		out = c
		if err := j.Sound(c.InstanceID); err != nil {
			return err
		}
		if c, err = journal.Transition(c, next, expected, errText, at); err != nil {
			return err
		}
		writes := &pgx.Batch{}
		if err := queueWriteControl(writes, seq, rec.Bytes, c, j); err != nil {
			return err
		}
		if !store.ControlPending(c.Status) {
			// Keep the newest ControlTerminalLimit terminal records.
			writes.Queue(`DELETE FROM run_controls WHERE run_id = $1 AND status IN ('handled','failed') AND seq NOT IN
				(SELECT seq FROM run_controls WHERE run_id = $1 AND status IN ('handled','failed') ORDER BY seq DESC LIMIT $2)`,
				runID, store.ControlTerminalLimit)
		}
		if err := p.SendFinal(ctx, writes).Close(); err != nil {
			return fmt.Errorf("control transition: %w", err)
		}
		out = c
		return nil
	})
	return out, err
}

// MarkControlDelivered implements store.Runs. The Run's row is locked, as
// every write to its journal locks it, so the byte bound holds against
// concurrent writers.
func (s *DB) MarkControlDelivered(ctx context.Context, runID string, c store.Control, at time.Time) error {
	was, old, next, n, err := journal.DeliveredMark(c, at)
	if err != nil {
		return fmt.Errorf("control delivered: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `WITH r AS (SELECT control_bytes, control_malformed, control_invalid, control_untimed
			FROM runs WHERE id = $3 FOR UPDATE)
		UPDATE run_controls SET status = 'delivered', delivered_at = $1, bytes = $2
		WHERE run_id = $3 AND id = $4 AND instance_id = $5 AND status = 'queued' AND delivered_at IS NULL AND bytes = $6
		AND EXISTS (SELECT 1 FROM r WHERE control_malformed = 0 AND control_invalid = 0 AND control_untimed = 0
			AND control_bytes <= $7 AND control_bytes - $6 + $2 <= $7)
		AND NOT EXISTS (SELECT 1 FROM run_controls o WHERE o.run_id = $3 AND o.status IN ('queued', 'delivered', 'claimed') AND o.instance_id <> $5)`,
		*next.DeliveredAt, n, runID, was.ID, was.InstanceID, old, store.ControlJournalMaxBytes)
	if err != nil {
		return fmt.Errorf("control delivered: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrConflict
	}
	return nil
}

// queueWriteControl queues in b the statement that rewrites record seq
// (old bytes long) as c, once the journal j's byte bound allows it.
func queueWriteControl(b *pgx.Batch, seq int64, old int, c store.Control, j journal.State) error {
	n, err := journal.Size(c)
	if err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	if err := j.Resize(old, n); err != nil {
		return fmt.Errorf("control transition: %w", err)
	}
	b.Queue(`UPDATE run_controls SET status = $1, delivered_at = $2, claimed_at = $3, handled_at = $4, failed_at = $5,
		error = $6, bytes = $7 WHERE seq = $8`, c.Status, optTimePtr(c.DeliveredAt), optTimePtr(c.ClaimedAt), optTimePtr(c.HandledAt),
		optTimePtr(c.FailedAt), optText(c.Error), n, seq)
	return nil
}

// ClaimControl implements store.Runs.
func (s *DB) ClaimControl(ctx context.Context, runID, instanceID, id string, at time.Time) (store.Control, error) {
	var out store.Control
	// Two round trips: the lock, the journal and the record as one batch
	// (each read after the lock is held), then the write with COMMIT.
	err := s.pipeWrite(ctx, "claim control", func(p *pipe) error {
		reads := &pgx.Batch{}
		reads.Queue(`SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, runID)
		reads.Queue(journalQuery("$2"), runID, instanceID)
		reads.Queue(`SELECT `+controlColumns+` FROM run_controls
			WHERE run_id = $1 AND instance_id = $2 AND status IN ('queued','delivered') AND ($3::text = '' OR id = $3)
			ORDER BY seq LIMIT 1`, runID, instanceID, id)
		br := p.SendBatch(ctx, reads)
		var one int
		if err := br.QueryRow().Scan(&one); err != nil {
			br.Close()
			return rowErr(err, "claim control")
		}
		j, err := scanJournal(br.QueryRow())
		if err != nil {
			br.Close()
			return fmt.Errorf("claim control: %w", err)
		}
		if err := j.Sound(instanceID); err != nil {
			br.Close()
			return err
		}
		seq, rec, err := scanControl(br.QueryRow())
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return rowErr(err, "claim control")
		}
		c, err := journal.Transition(rec.Control, store.ControlClaimed, nil, "", at)
		out = c
		if err != nil {
			return err
		}
		writes := &pgx.Batch{}
		if err := queueWriteControl(writes, seq, rec.Bytes, c, j); err != nil {
			return err
		}
		if err := p.SendFinal(ctx, writes).Close(); err != nil {
			return fmt.Errorf("claim control: %w", err)
		}
		return nil
	})
	return out, err
}

// Control implements store.Runs.
func (s *DB) Control(ctx context.Context, runID, id string) (store.Control, error) {
	_, r, err := scanControl(s.pool.QueryRow(ctx, `SELECT `+controlColumns+` FROM run_controls WHERE run_id = $1 AND id = $2 ORDER BY seq LIMIT 1`, runID, id))
	if err != nil {
		return store.Control{}, rowErr(err, "control")
	}
	return r.Control, nil
}

// Controls implements store.Runs.
func (s *DB) Controls(ctx context.Context, runID string) ([]store.Control, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+controlColumns+` FROM run_controls WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("controls: %w", err)
	}
	defer rows.Close()
	var out []store.Control
	for rows.Next() {
		_, r, err := scanControl(rows)
		if err != nil {
			return nil, fmt.Errorf("controls: %w", err)
		}
		out = append(out, r.Control)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("controls: %w", err)
	}
	return out, nil
}

// AppendTrace implements store.Runs.
func (s *DB) AppendTrace(ctx context.Context, runID string, ev store.TraceEvent) error {
	errs, err := s.AppendTraces(ctx, []store.TraceAppend{{RunID: runID, Event: ev}})
	if err != nil {
		return err
	}
	return errs[0]
}

// AppendTraces implements store.Runs. The Runs of the batch are locked and
// their counters read once; journal.TraceFits decides each append against
// the counters kept in memory. Appends that fit are sent together with the
// new counters in one round trip. When an append does not fit,
// journal.Compact plans the compaction, which is written in the same
// transaction: the dropped rows and the previous marker deleted, the event
// and a new marker inserted.
func (s *DB) AppendTraces(ctx context.Context, items []store.TraceAppend) ([]error, error) {
	var errs []error
	// Two round trips, unless a compaction reads the Trace: the locks,
	// then the appends and counters with COMMIT.
	err := s.pipeWrite(ctx, "append trace", func(tx *pipe) error {
		errs = make([]error, len(items))
		lines := make([][]byte, len(items))
		ids := make([]string, 0, len(items))
		for i, it := range items {
			line, err := it.Line, error(nil)
			if line == nil {
				line, err = journal.EventLine(it.Event)
			} else {
				err = journal.CheckLine(line)
			}
			if err != nil {
				errs[i] = fmt.Errorf("append trace: %w", err)
				continue
			}
			lines[i] = line
			ids = append(ids, it.RunID)
		}
		runs, err := lockRuns(ctx, tx, ids)
		if err != nil {
			return fmt.Errorf("append trace: %w", err)
		}
		var batch pgx.Batch
		flush := func() error {
			if batch.Len() == 0 {
				return nil
			}
			err := tx.SendBatch(ctx, &batch).Close()
			batch = pgx.Batch{}
			return err
		}
		for i, it := range items {
			line := lines[i]
			if line == nil {
				continue
			}
			c := runs[it.RunID]
			if c == nil {
				errs[i] = store.ErrNotFound
				continue
			}
			n := int64(len(line))
			c.changed = true
			if journal.TraceFits(c.events, c.bytes, n) {
				batch.Queue(`INSERT INTO run_trace (run_id, kind, line, bytes) VALUES ($1, $2, $3, $4)`, it.RunID, it.Event.Kind, string(line[:n-1]), n)
				c.events++
				c.bytes += n
				continue
			}
			// Compaction reads the Trace: send what is queued first.
			if err := flush(); err != nil {
				return fmt.Errorf("append trace: %w", err)
			}
			plan, err := compactTrace(ctx, tx, it.RunID, it.Event, line)
			if err != nil {
				return err
			}
			c.events, c.bytes = plan.RetainedEvents, plan.RetainedBytes
		}
		for id, c := range runs {
			if c.changed {
				batch.Queue(`UPDATE runs SET trace_events = $2, trace_bytes = $3 WHERE id = $1`, id, c.events, c.bytes)
			}
		}
		if err := tx.SendFinal(ctx, &batch).Close(); err != nil {
			return fmt.Errorf("append trace: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// compactTrace writes the compaction journal.Compact plans for appending
// ev (encoded as line) to runID's Trace, and returns the plan.
func compactTrace(ctx context.Context, tx txQuerier, runID string, ev store.TraceEvent, line []byte) (journal.CompactPlan, error) {
	var plan journal.CompactPlan
	rows, err := tx.Query(ctx, `SELECT seq, kind, bytes FROM run_trace WHERE run_id = $1 ORDER BY seq DESC`, runID)
	if err != nil {
		return plan, fmt.Errorf("compact trace: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.TraceEntry, error) {
		var e journal.TraceEntry
		err := row.Scan(&e.Key, &e.Kind, &e.Bytes)
		return e, err
	})
	if err != nil {
		return plan, fmt.Errorf("compact trace: %w", err)
	}
	var prev *journal.Compaction
	for _, e := range entries {
		if e.Kind != store.TraceCompactedKind {
			continue
		}
		// Entries are newest first: this is the last marker written.
		var text string
		if err := tx.QueryRow(ctx, `SELECT line FROM run_trace WHERE seq = $1`, e.Key).Scan(&text); err != nil {
			return plan, fmt.Errorf("compact trace: %w", err)
		}
		var m store.TraceEvent
		if json.Unmarshal([]byte(text), &m) == nil {
			prev = journal.MarkerData(m)
		}
		break
	}
	plan, err = journal.Compact(entries, prev, ev, int64(len(line)))
	if err != nil {
		return plan, fmt.Errorf("compact trace: %w", err)
	}
	var batch pgx.Batch
	if plan.Drop {
		batch.Queue(`DELETE FROM run_trace WHERE run_id = $1 AND seq <= $2`, runID, plan.DropThrough)
	}
	if len(plan.Markers) > 0 {
		batch.Queue(`DELETE FROM run_trace WHERE seq = ANY($1)`, plan.Markers)
	}
	for _, l := range []struct {
		kind string
		line []byte
	}{{ev.Kind, line}, {store.TraceCompactedKind, plan.MarkerLine}} {
		batch.Queue(`INSERT INTO run_trace (run_id, kind, line, bytes) VALUES ($1, $2, $3, $4)`,
			runID, l.kind, string(l.line[:len(l.line)-1]), len(l.line))
	}
	if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
		return plan, fmt.Errorf("compact trace: %w", err)
	}
	return plan, nil
}

// Trace implements store.Runs.
func (s *DB) Trace(ctx context.Context, runID string, limit int) ([]store.TraceEvent, error) {
	q := `SELECT line FROM run_trace WHERE run_id = $1 ORDER BY seq DESC`
	args := []any{runID}
	if limit > 0 {
		q += ` LIMIT $2`
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
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
	slices.Reverse(out)
	return out, nil
}

// TraceStats implements store.Runs.
func (s *DB) TraceStats(ctx context.Context, runID string) (store.TraceStats, error) {
	var st store.TraceStats
	if err := s.pool.QueryRow(ctx, `SELECT trace_events, trace_bytes FROM runs WHERE id = $1`, runID).Scan(&st.Events, &st.Bytes); err != nil {
		return st, rowErr(err, "trace stats")
	}
	var text string
	err := s.pool.QueryRow(ctx, `SELECT line FROM run_trace WHERE run_id = $1 AND kind = $2 ORDER BY seq DESC LIMIT 1`, runID, store.TraceCompactedKind).Scan(&text)
	switch err = rowErr(err, "trace stats"); {
	case err == nil:
		var m store.TraceEvent
		if json.Unmarshal([]byte(text), &m) == nil {
			st.Marker = &m
		}
	case !errors.Is(err, store.ErrNotFound):
		return st, err
	}
	return st, nil
}

// PutTool implements store.Runs. One conditional statement decides: an
// existing name is replaced (keeping its creation time) only with update.
func (s *DB) PutTool(ctx context.Context, t store.ToolRecord, update bool) error {
	q := `INSERT INTO run_tools (name, owner_id, expose, doc, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING`
	if update {
		q = `INSERT INTO run_tools (name, owner_id, expose, doc, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (name) DO UPDATE SET owner_id = excluded.owner_id, expose = excluded.expose, doc = excluded.doc, updated_at = excluded.updated_at`
	}
	tag, err := s.pool.Exec(ctx, q, t.Name, t.OwnerID, t.Expose, docText(t.Doc), t.CreatedAt, t.UpdatedAt)
	if err != nil {
		return fmt.Errorf("put tool: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrConflict
	}
	return nil
}

const toolColumns = `name, owner_id, expose, doc, created_at, updated_at`

func scanTool(row pgx.Row) (store.ToolRecord, error) {
	var (
		t   store.ToolRecord
		doc string
	)
	if err := row.Scan(&t.Name, &t.OwnerID, &t.Expose, &doc, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return t, err
	}
	t.Doc = json.RawMessage(doc)
	t.CreatedAt, t.UpdatedAt = utc(t.CreatedAt), utc(t.UpdatedAt)
	return t, nil
}

// Tool implements store.Runs.
func (s *DB) Tool(ctx context.Context, name string) (store.ToolRecord, error) {
	t, err := scanTool(s.pool.QueryRow(ctx, `SELECT `+toolColumns+` FROM run_tools WHERE name = $1`, name))
	if err != nil {
		return store.ToolRecord{}, rowErr(err, "tool "+name)
	}
	return t, nil
}

// ListTools implements store.Runs.
func (s *DB) ListTools(ctx context.Context) ([]store.ToolRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+toolColumns+` FROM run_tools ORDER BY name`)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	return out, nil
}

// DeleteTool implements store.Runs.
func (s *DB) DeleteTool(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM run_tools WHERE name = $1`, strings.TrimSpace(name))
	if err != nil {
		return fmt.Errorf("delete tool: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

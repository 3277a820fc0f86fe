package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/store"
)

// askMigrations holds agents' questions to people. deadline is 0 when the
// question has none; the partial index finds the open ones that are due.
// ask_announce holds the questions written but not yet announced: a row
// is inserted with its question, and removed once the question's outbox
// messages are stored.
var askMigrations = []migration{{1, `
CREATE TABLE asks (
	id TEXT PRIMARY KEY,
	asker TEXT NOT NULL,
	question TEXT NOT NULL,
	options TEXT NOT NULL DEFAULT '[]',
	kind TEXT NOT NULL CHECK (kind IN ('yes_no','choice','text')),
	reason TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	deadline INTEGER NOT NULL DEFAULT 0,
	fallback TEXT NOT NULL DEFAULT '',
	state TEXT NOT NULL CHECK (state IN ('open','answered','declined','expired')),
	answer TEXT NOT NULL DEFAULT '',
	decided_by TEXT NOT NULL DEFAULT '',
	note TEXT NOT NULL DEFAULT '',
	decided_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX asks_open ON asks(asker, created_at) WHERE state = 'open';
CREATE INDEX asks_due ON asks(deadline) WHERE state = 'open' AND deadline > 0;
`}, {2, `
CREATE TABLE ask_announce (
	ask_id TEXT PRIMARY KEY,
	queued_at INTEGER NOT NULL
);
`}, {3, `
ALTER TABLE asks ADD COLUMN ask_group TEXT NOT NULL DEFAULT '';
`}, {4, `
ALTER TABLE asks ADD COLUMN quorum INTEGER NOT NULL DEFAULT 0;
ALTER TABLE asks ADD COLUMN answers TEXT NOT NULL DEFAULT '[]';
ALTER TABLE asks ADD COLUMN answer_count INTEGER NOT NULL DEFAULT 0;
`}}

// Asks implements store.Store.
func (s *DB) Asks() store.Asks { return s }

const askCols = `id, asker, question, options, kind, reason, created_at, deadline, fallback, state, answer, decided_by, note, decided_at, ask_group, quorum, answers`

func scanAsk(row interface{ Scan(...any) error }) (store.Ask, error) {
	var a store.Ask
	var opts, answers string
	var created, deadline, decided int64
	err := row.Scan(&a.ID, &a.Asker, &a.Question, &opts, &a.Kind, &a.Reason, &created, &deadline, &a.Fallback,
		&a.State, &a.Answer, &a.DecidedBy, &a.Note, &decided, &a.Group, &a.Quorum, &answers)
	if errors.Is(err, sql.ErrNoRows) {
		return a, store.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("read question: %w", err)
	}
	if err := json.Unmarshal([]byte(opts), &a.Options); err != nil {
		return a, fmt.Errorf("read question %s: options: %w", a.ID, err)
	}
	if len(a.Options) == 0 {
		a.Options = nil
	}
	if err := json.Unmarshal([]byte(answers), &a.Answers); err != nil {
		return a, fmt.Errorf("read question %s: answers: %w", a.ID, err)
	}
	if len(a.Answers) == 0 {
		a.Answers = nil
	}
	a.CreatedAt = fromMS(created)
	if deadline > 0 {
		a.Deadline = fromMS(deadline)
	}
	if decided > 0 {
		a.DecidedAt = fromMS(decided)
	}
	return a, nil
}

func optMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return ms(t)
}

// CreateAsk implements store.Asks. The transaction takes the write lock
// up front, so the count it reads stays true until the insert.
func (s *DB) CreateAsk(ctx context.Context, a store.Ask, maxOpen int) error {
	if err := a.Check(); err != nil {
		return err
	}
	opts, err := json.Marshal(a.Options)
	if err != nil || a.Options == nil {
		opts = []byte("[]")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create question: %w", err)
	}
	defer tx.Rollback()
	if maxOpen > 0 {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM asks WHERE asker = ? AND state = 'open'`, a.Asker).Scan(&n); err != nil {
			return fmt.Errorf("create question: %w", err)
		}
		if n >= maxOpen {
			return store.ErrTooManyAsks
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO asks (id, asker, question, options, kind, reason, created_at, deadline, fallback, state, ask_group, quorum)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?)`,
		a.ID, a.Asker, a.Question, string(opts), a.Kind, a.Reason, ms(a.CreatedAt), optMS(a.Deadline), a.Fallback, a.Group, a.Quorum)
	if isUnique(err) {
		return store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("create question: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ask_announce (ask_id, queued_at) VALUES (?, ?)`, a.ID, ms(a.CreatedAt)); err != nil {
		return fmt.Errorf("create question: announce: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create question: %w", err)
	}
	return nil
}

// Ask implements store.Asks.
func (s *DB) Ask(ctx context.Context, id string) (store.Ask, error) {
	return scanAsk(s.db.QueryRowContext(ctx, `SELECT `+askCols+` FROM asks WHERE id = ?`, id))
}

func (s *DB) listAsks(ctx context.Context, query string, args ...any) ([]store.Ask, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	defer rows.Close()
	var out []store.Ask
	for rows.Next() {
		a, err := scanAsk(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	return out, nil
}

// OpenAsks implements store.Asks.
func (s *DB) OpenAsks(ctx context.Context, asker string) ([]store.Ask, error) {
	if asker == "" {
		return s.listAsks(ctx, `SELECT `+askCols+` FROM asks WHERE state = 'open' ORDER BY created_at, id`)
	}
	return s.listAsks(ctx, `SELECT `+askCols+` FROM asks WHERE asker = ? AND state = 'open' ORDER BY created_at, id`, asker)
}

// DecideAsk implements store.Asks. The update's condition on the open
// state is the compare-and-set: SQLite runs one writer at a time, so the
// second decision finds the question decided.
func (s *DB) DecideAsk(ctx context.Context, id string, d store.AskDecision) (store.Ask, error) {
	if !store.ValidAskDecision(d) {
		return store.Ask{}, fmt.Errorf("%w: a question ends answered (with an answer), declined or expired, not %q", store.ErrInvalid, d.State)
	}
	a, err := scanAsk(s.db.QueryRowContext(ctx, `UPDATE asks SET state = ?, answer = ?, decided_by = ?, note = ?, decided_at = ?
		WHERE id = ? AND state = 'open' RETURNING `+askCols, d.State, d.Answer, d.DecidedBy, d.Note, ms(d.At), id))
	if !errors.Is(err, store.ErrNotFound) {
		return a, err
	}
	a, err = s.Ask(ctx, id)
	if err != nil {
		return a, err
	}
	return a, store.ErrConflict
}

// AddAskAnswer implements store.Asks. The update's condition on the open
// state and the number of answers is the compare-and-set.
func (s *DB) AddAskAnswer(ctx context.Context, id string, answers []store.AskAnswer, end *store.AskDecision) (store.Ask, error) {
	if err := store.CheckAskAnswers(answers); err != nil {
		return store.Ask{}, err
	}
	if end != nil && !store.ValidAskDecision(*end) {
		return store.Ask{}, fmt.Errorf("%w: a question ends answered (with an answer), declined or expired, not %q", store.ErrInvalid, end.State)
	}
	b, err := json.Marshal(answers)
	if err != nil {
		return store.Ask{}, fmt.Errorf("answer question: %w", err)
	}
	var a store.Ask
	if end == nil {
		a, err = scanAsk(s.db.QueryRowContext(ctx, `UPDATE asks SET answers = ?, answer_count = ?
			WHERE id = ? AND state = 'open' AND answer_count = ? RETURNING `+askCols, string(b), len(answers), id, len(answers)-1))
	} else {
		a, err = scanAsk(s.db.QueryRowContext(ctx, `UPDATE asks SET answers = ?, answer_count = ?, state = ?, answer = ?, decided_by = ?, note = ?, decided_at = ?
			WHERE id = ? AND state = 'open' AND answer_count = ? RETURNING `+askCols,
			string(b), len(answers), end.State, end.Answer, end.DecidedBy, end.Note, ms(end.At), id, len(answers)-1))
	}
	if !errors.Is(err, store.ErrNotFound) {
		return a, err
	}
	a, err = s.Ask(ctx, id)
	if err != nil {
		return a, err
	}
	return a, store.ErrConflict
}

// DueAsks implements store.Asks.
func (s *DB) DueAsks(ctx context.Context, now time.Time, limit int) ([]store.Ask, error) {
	return s.listAsks(ctx, `SELECT `+askCols+` FROM asks WHERE state = 'open' AND deadline > 0 AND deadline <= ? ORDER BY deadline, id LIMIT ?`, ms(now), limit)
}

// AsksToAnnounce implements store.Asks.
func (s *DB) AsksToAnnounce(ctx context.Context, limit int) ([]store.Ask, error) {
	return s.listAsks(ctx, `SELECT `+askCols+` FROM ask_announce JOIN asks ON id = ask_id
		ORDER BY queued_at, ask_id LIMIT ?`, limit)
}

// AnnouncedAsks implements store.Asks.
func (s *DB) AnnouncedAsks(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("clear announced questions: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM ask_announce WHERE ask_id IN (SELECT value FROM json_each(?))`, string(b)); err != nil {
		return fmt.Errorf("clear announced questions: %w", err)
	}
	return nil
}

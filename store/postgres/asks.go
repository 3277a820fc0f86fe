package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/store"
)

// askMigrations holds agents' questions to people. deadline is NULL when
// the question has none; the partial index finds the open ones that are
// due. ask_announce holds the questions written but not yet announced: a
// row is inserted with its question, and removed once the question's
// outbox messages are stored. ask_group names the group a question is
// asked of, or is empty.
var askMigrations = []migration{{1, `
CREATE TABLE asks (
	id TEXT COLLATE "C" PRIMARY KEY,
	asker TEXT COLLATE "C" NOT NULL,
	question TEXT NOT NULL,
	options TEXT NOT NULL DEFAULT '[]',
	kind TEXT NOT NULL CHECK (kind IN ('yes_no','choice','text')),
	reason TEXT NOT NULL DEFAULT '',
	created_at TIMESTAMPTZ NOT NULL,
	deadline TIMESTAMPTZ,
	fallback TEXT NOT NULL DEFAULT '',
	state TEXT NOT NULL CHECK (state IN ('open','answered','declined','expired')),
	answer TEXT NOT NULL DEFAULT '',
	decided_by TEXT NOT NULL DEFAULT '',
	note TEXT NOT NULL DEFAULT '',
	decided_at TIMESTAMPTZ
);
CREATE INDEX asks_open ON asks(asker, created_at) WHERE state = 'open';
CREATE INDEX asks_due ON asks(deadline) WHERE state = 'open' AND deadline IS NOT NULL;
`}, {2, `
CREATE TABLE ask_announce (
	ask_id TEXT COLLATE "C" PRIMARY KEY,
	queued_at TIMESTAMPTZ NOT NULL
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

func scanAsk(row pgx.Row) (store.Ask, error) {
	var a store.Ask
	var opts, answers string
	var deadline, decided *time.Time
	err := row.Scan(&a.ID, &a.Asker, &a.Question, &opts, &a.Kind, &a.Reason, &a.CreatedAt, &deadline, &a.Fallback,
		&a.State, &a.Answer, &a.DecidedBy, &a.Note, &decided, &a.Group, &a.Quorum, &answers)
	if err != nil {
		return a, rowErr(err, "read question")
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
	for i := range a.Answers {
		a.Answers[i].At = a.Answers[i].At.UTC()
	}
	a.CreatedAt, a.Deadline, a.DecidedAt = utc(a.CreatedAt), fromOpt(deadline), fromOpt(decided)
	return a, nil
}

// CreateAsk implements store.Asks. A transaction-scoped advisory lock on
// the asker serializes its count and insert with those of its concurrent
// questions, on every node.
func (s *DB) CreateAsk(ctx context.Context, a store.Ask, maxOpen int) error {
	if err := a.Check(); err != nil {
		return err
	}
	opts, err := json.Marshal(a.Options)
	if err != nil || a.Options == nil {
		opts = []byte("[]")
	}
	err = s.inTx(ctx, "create question", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if maxOpen > 0 {
			if err := lockItem(ctx, tx, "asks", a.Asker); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM asks WHERE asker = $1 AND state = 'open'`, a.Asker).Scan(&n); err != nil {
				return err
			}
			if n >= maxOpen {
				return store.ErrTooManyAsks
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO asks (id, asker, question, options, kind, reason, created_at, deadline, fallback, state, ask_group, quorum)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'open', $10, $11)`,
			a.ID, a.Asker, a.Question, string(opts), a.Kind, a.Reason, a.CreatedAt, optTime(a.Deadline), a.Fallback, a.Group, a.Quorum)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO ask_announce (ask_id, queued_at) VALUES ($1, $2)`, a.ID, a.CreatedAt)
		return err
	})
	switch {
	case isUnique(err):
		return store.ErrConflict
	case errors.Is(err, store.ErrTooManyAsks):
		return store.ErrTooManyAsks
	case err != nil:
		return fmt.Errorf("create question: %w", err)
	}
	return nil
}

// Ask implements store.Asks.
func (s *DB) Ask(ctx context.Context, id string) (store.Ask, error) {
	return scanAsk(s.pool.QueryRow(ctx, `SELECT `+askCols+` FROM asks WHERE id = $1`, id))
}

func (s *DB) listAsks(ctx context.Context, query string, args ...any) ([]store.Ask, error) {
	rows, err := s.pool.Query(ctx, query, args...)
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
	return s.listAsks(ctx, `SELECT `+askCols+` FROM asks WHERE asker = $1 AND state = 'open' ORDER BY created_at, id`, asker)
}

// DecideAsk implements store.Asks. The update's condition on the open
// state is the compare-and-set: of concurrent updates, the first to lock
// the row wins, and the others find it decided when they re-check the
// condition.
func (s *DB) DecideAsk(ctx context.Context, id string, d store.AskDecision) (store.Ask, error) {
	if !store.ValidAskDecision(d) {
		return store.Ask{}, fmt.Errorf("%w: a question ends answered (with an answer), declined or expired, not %q", store.ErrInvalid, d.State)
	}
	a, err := scanAsk(s.pool.QueryRow(ctx, `UPDATE asks SET state = $1, answer = $2, decided_by = $3, note = $4, decided_at = $5
		WHERE id = $6 AND state = 'open' RETURNING `+askCols, d.State, d.Answer, d.DecidedBy, d.Note, d.At, id))
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
// state and the number of answers is the compare-and-set: of concurrent
// updates, the first to lock the row wins, and the others find another
// count when they re-check the condition.
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
		a, err = scanAsk(s.pool.QueryRow(ctx, `UPDATE asks SET answers = $1, answer_count = $2
			WHERE id = $3 AND state = 'open' AND answer_count = $4 RETURNING `+askCols, string(b), len(answers), id, len(answers)-1))
	} else {
		a, err = scanAsk(s.pool.QueryRow(ctx, `UPDATE asks SET answers = $1, answer_count = $2, state = $3, answer = $4, decided_by = $5, note = $6, decided_at = $7
			WHERE id = $8 AND state = 'open' AND answer_count = $9 RETURNING `+askCols,
			string(b), len(answers), end.State, end.Answer, end.DecidedBy, end.Note, end.At, id, len(answers)-1))
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
	return s.listAsks(ctx, `SELECT `+askCols+` FROM asks WHERE state = 'open' AND deadline IS NOT NULL AND deadline <= $1 ORDER BY deadline, id LIMIT $2`, now, limit)
}

// AsksToAnnounce implements store.Asks.
func (s *DB) AsksToAnnounce(ctx context.Context, limit int) ([]store.Ask, error) {
	return s.listAsks(ctx, `SELECT `+askCols+` FROM ask_announce JOIN asks ON id = ask_id
		ORDER BY queued_at, ask_id LIMIT $1`, limit)
}

// AnnouncedAsks implements store.Asks.
func (s *DB) AnnouncedAsks(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM ask_announce WHERE ask_id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("clear announced questions: %w", err)
	}
	return nil
}

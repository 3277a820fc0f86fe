package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/store"
)

// deadlineMigrations holds the deadlines of decisions: one row per item
// with a deadline, removed once the item is decided or ended; then the
// group it escalates to and how many of its deadlines passed.
var deadlineMigrations = []migration{{1, `
CREATE TABLE decision_deadlines (
	kind TEXT COLLATE "C" NOT NULL,
	item TEXT COLLATE "C" NOT NULL,
	due_at TIMESTAMPTZ NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (kind, item)
);
CREATE INDEX decision_deadlines_due ON decision_deadlines(due_at);
`}, {2, `
ALTER TABLE decision_deadlines ADD COLUMN escalate_to TEXT NOT NULL DEFAULT '';
ALTER TABLE decision_deadlines ADD COLUMN stage INTEGER NOT NULL DEFAULT 0;
`}}

// Deadlines implements store.Store.
func (s *DB) Deadlines() store.Deadlines { return s }

// SetDeadline implements store.Deadlines.
func (s *DB) SetDeadline(ctx context.Context, d store.DecisionDeadline) error {
	if err := d.Check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, setDeadlineSQL, deadlineArgs(d)...); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	return nil
}

// setDeadlineSQL keeps the deadline deadlineArgs gives, replacing the
// item's earlier one.
const setDeadlineSQL = `INSERT INTO decision_deadlines (kind, item, due_at, created_at, escalate_to, stage) VALUES ($1, $2, $3, $4, $5, $6)
	ON CONFLICT (kind, item) DO UPDATE SET due_at = excluded.due_at, created_at = excluded.created_at,
		escalate_to = excluded.escalate_to, stage = excluded.stage`

func deadlineArgs(d store.DecisionDeadline) []any {
	return []any{d.Kind, d.Item, d.Due.UTC().Truncate(time.Microsecond), d.CreatedAt.UTC().Truncate(time.Microsecond), d.EscalateTo, d.Stage}
}

// Deadline implements store.Deadlines.
func (s *DB) Deadline(ctx context.Context, kind, item string) (store.DecisionDeadline, error) {
	d := store.DecisionDeadline{Kind: kind, Item: item}
	err := s.pool.QueryRow(ctx, `SELECT due_at, created_at, escalate_to, stage FROM decision_deadlines WHERE kind = $1 AND item = $2`, kind, item).Scan(&d.Due, &d.CreatedAt, &d.EscalateTo, &d.Stage)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("deadline: %w", err)
	}
	d.Due, d.CreatedAt = d.Due.UTC(), d.CreatedAt.UTC()
	return d, nil
}

// DueDeadlines implements store.Deadlines.
func (s *DB) DueDeadlines(ctx context.Context, kind string, before time.Time, limit int) ([]store.DecisionDeadline, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT kind, item, due_at, created_at, escalate_to, stage FROM decision_deadlines
		WHERE ($1 = '' OR kind = $1) AND due_at <= $2 ORDER BY due_at, kind, item LIMIT $3`, kind, before.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("due deadlines: %w", err)
	}
	defer rows.Close()
	var out []store.DecisionDeadline
	for rows.Next() {
		var d store.DecisionDeadline
		if err := rows.Scan(&d.Kind, &d.Item, &d.Due, &d.CreatedAt, &d.EscalateTo, &d.Stage); err != nil {
			return nil, fmt.Errorf("due deadlines: %w", err)
		}
		d.Due, d.CreatedAt = d.Due.UTC(), d.CreatedAt.UTC()
		out = append(out, d)
	}
	return out, rows.Err()
}

// AdvanceDeadline implements store.Deadlines.
func (s *DB) AdvanceDeadline(ctx context.Context, kind, item string, stage int, due time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE decision_deadlines SET stage = stage + 1, due_at = $1 WHERE kind = $2 AND item = $3 AND stage = $4`,
		due.UTC().Truncate(time.Microsecond), kind, item, stage)
	if err != nil {
		return fmt.Errorf("advance deadline: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.Deadline(ctx, kind, item); err != nil {
		return err
	}
	return fmt.Errorf("%w: deadline of %s %s is past stage %d", store.ErrConflict, kind, item, stage)
}

// DeleteDeadline implements store.Deadlines.
func (s *DB) DeleteDeadline(ctx context.Context, kind, item string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM decision_deadlines WHERE kind = $1 AND item = $2`, kind, item); err != nil {
		return fmt.Errorf("delete deadline: %w", err)
	}
	return nil
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/store"
)

// deadlineMigrations holds the deadlines of decisions: one row per item
// with a deadline, removed once the item is decided or ended; then the
// group it escalates to and how many of its deadlines passed.
var deadlineMigrations = []migration{{1, `
CREATE TABLE decision_deadlines (
	kind TEXT NOT NULL,
	item TEXT NOT NULL,
	due_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
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
	if _, err := s.db.ExecContext(ctx, setDeadlineSQL, deadlineArgs(d)...); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	return nil
}

// setDeadlineSQL keeps the deadline deadlineArgs gives, replacing the
// item's earlier one.
const setDeadlineSQL = `INSERT INTO decision_deadlines (kind, item, due_at, created_at, escalate_to, stage) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (kind, item) DO UPDATE SET due_at = excluded.due_at, created_at = excluded.created_at,
		escalate_to = excluded.escalate_to, stage = excluded.stage`

func deadlineArgs(d store.DecisionDeadline) []any {
	return []any{d.Kind, d.Item, ms(d.Due), ms(d.CreatedAt), d.EscalateTo, d.Stage}
}

// Deadline implements store.Deadlines.
func (s *DB) Deadline(ctx context.Context, kind, item string) (store.DecisionDeadline, error) {
	d := store.DecisionDeadline{Kind: kind, Item: item}
	var due, created int64
	err := s.db.QueryRowContext(ctx, `SELECT due_at, created_at, escalate_to, stage FROM decision_deadlines WHERE kind = ? AND item = ?`, kind, item).Scan(&due, &created, &d.EscalateTo, &d.Stage)
	if errors.Is(err, sql.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("deadline: %w", err)
	}
	d.Due, d.CreatedAt = fromMS(due), fromMS(created)
	return d, nil
}

// DueDeadlines implements store.Deadlines.
func (s *DB) DueDeadlines(ctx context.Context, kind string, before time.Time, limit int) ([]store.DecisionDeadline, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, `SELECT kind, item, due_at, created_at, escalate_to, stage FROM decision_deadlines
		WHERE (? = '' OR kind = ?) AND due_at <= ? ORDER BY due_at, kind, item LIMIT ?`, kind, kind, ms(before), limit)
	if err != nil {
		return nil, fmt.Errorf("due deadlines: %w", err)
	}
	defer rows.Close()
	var out []store.DecisionDeadline
	for rows.Next() {
		var d store.DecisionDeadline
		var due, created int64
		if err := rows.Scan(&d.Kind, &d.Item, &due, &created, &d.EscalateTo, &d.Stage); err != nil {
			return nil, fmt.Errorf("due deadlines: %w", err)
		}
		d.Due, d.CreatedAt = fromMS(due), fromMS(created)
		out = append(out, d)
	}
	return out, rows.Err()
}

// AdvanceDeadline implements store.Deadlines.
func (s *DB) AdvanceDeadline(ctx context.Context, kind, item string, stage int, due time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE decision_deadlines SET stage = stage + 1, due_at = ? WHERE kind = ? AND item = ? AND stage = ?`,
		ms(due), kind, item, stage)
	if err != nil {
		return fmt.Errorf("advance deadline: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("advance deadline: %w", err)
	} else if n == 1 {
		return nil
	}
	if _, err := s.Deadline(ctx, kind, item); err != nil {
		return err
	}
	return fmt.Errorf("%w: deadline of %s %s is past stage %d", store.ErrConflict, kind, item, stage)
}

// DeleteDeadline implements store.Deadlines.
func (s *DB) DeleteDeadline(ctx context.Context, kind, item string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM decision_deadlines WHERE kind = ? AND item = ?`, kind, item); err != nil {
		return fmt.Errorf("delete deadline: %w", err)
	}
	return nil
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/store"
)

// notifyMigrations holds the outbox of notifications and the outgoing
// webhooks. A message is due when it is pending, next_at has passed and
// no node holds an unexpired lease on it.
var notifyMigrations = []migration{{1, `
CREATE TABLE notify_outbox (
	id TEXT PRIMARY KEY,
	channel TEXT NOT NULL,
	item TEXT NOT NULL DEFAULT '',
	payload TEXT NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('pending','delivered','dead')),
	attempts INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	next_at INTEGER NOT NULL,
	delivered_at INTEGER,
	lease_node TEXT NOT NULL DEFAULT '',
	lease_until INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX notify_outbox_due ON notify_outbox(status, next_at);
CREATE TABLE notify_webhooks (
	id TEXT PRIMARY KEY,
	url TEXT NOT NULL,
	secret TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
`}}

// Notify implements store.Store.
func (s *DB) Notify() store.Notify { return s }

// EnqueueMessages implements store.Notify.
func (s *DB) EnqueueMessages(ctx context.Context, msgs []store.OutboxMessage) (int, error) {
	for _, m := range msgs {
		if err := m.Check(); err != nil {
			return 0, err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("enqueue messages: %w", err)
	}
	defer tx.Rollback()
	n := 0
	for _, m := range msgs {
		res, err := tx.ExecContext(ctx, `INSERT INTO notify_outbox (id, channel, item, payload, status, created_at, next_at)
			VALUES (?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (id) DO NOTHING`,
			m.ID, m.Channel, m.Item, string(m.Payload), ms(m.CreatedAt), ms(m.NextAt))
		if err != nil {
			return 0, fmt.Errorf("enqueue message %s: %w", m.ID, err)
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("enqueue messages: %w", err)
	}
	return n, nil
}

const outboxCols = `id, channel, item, payload, status, attempts, last_error, created_at, next_at, delivered_at`

func scanMessages(rows *sql.Rows) ([]store.OutboxMessage, error) {
	defer rows.Close()
	var out []store.OutboxMessage
	for rows.Next() {
		var m store.OutboxMessage
		var payload string
		var created, next int64
		var delivered sql.NullInt64
		if err := rows.Scan(&m.ID, &m.Channel, &m.Item, &payload, &m.Status, &m.Attempts, &m.LastError, &created, &next, &delivered); err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		m.Payload, m.CreatedAt, m.NextAt = []byte(payload), fromMS(created), fromMS(next)
		if delivered.Valid {
			m.DeliveredAt = fromMS(delivered.Int64)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return out, nil
}

// ClaimMessages implements store.Notify. One writer at a time (SQLite's
// lock) makes the claim exclusive.
func (s *DB) ClaimMessages(ctx context.Context, node string, now time.Time, lease time.Duration, limit int) ([]store.OutboxMessage, error) {
	if limit <= 0 {
		limit = 1
	}
	// Most polls find nothing due: look before taking the write lock.
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM notify_outbox WHERE status = 'pending' AND next_at <= ? AND lease_until <= ? LIMIT 1`, ms(now), ms(now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `UPDATE notify_outbox SET lease_node = ?, lease_until = ?, attempts = attempts + 1
		WHERE id IN (SELECT id FROM notify_outbox WHERE status = 'pending' AND next_at <= ? AND lease_until <= ?
			ORDER BY next_at, id LIMIT ?)
		RETURNING `+outboxCols, node, ms(now.Add(lease)), ms(now), ms(now), limit)
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	return scanMessages(rows)
}

// FinishAttempt implements store.Notify.
func (s *DB) FinishAttempt(ctx context.Context, a store.Attempt) error {
	var res sql.Result
	var err error
	switch {
	case a.Delivered:
		res, err = s.db.ExecContext(ctx, `UPDATE notify_outbox SET status = 'delivered', delivered_at = ?, last_error = ?, lease_node = '', lease_until = 0
			WHERE id = ? AND status = 'pending' AND lease_node = ?`, ms(a.At), a.Error, a.ID, a.Node)
	case a.Retry.IsZero():
		res, err = s.db.ExecContext(ctx, `UPDATE notify_outbox SET status = 'dead', last_error = ?, lease_node = '', lease_until = 0
			WHERE id = ? AND status = 'pending' AND lease_node = ?`, a.Error, a.ID, a.Node)
	default:
		res, err = s.db.ExecContext(ctx, `UPDATE notify_outbox SET next_at = ?, last_error = ?, lease_node = '', lease_until = 0
			WHERE id = ? AND status = 'pending' AND lease_node = ?`, ms(a.Retry), a.Error, a.ID, a.Node)
	}
	if err != nil {
		return fmt.Errorf("finish attempt %s: %w", a.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	return s.outboxMiss(ctx, a.ID)
}

// outboxMiss tells a message that does not exist from one in another state.
func (s *DB) outboxMiss(ctx context.Context, id string) error {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM notify_outbox WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("outbox %s: %w", id, err)
	}
	return store.ErrConflict
}

// ReleaseMessages implements store.Notify.
func (s *DB) ReleaseMessages(ctx context.Context, node string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE notify_outbox SET lease_node = '', lease_until = 0 WHERE lease_node = ? AND status = 'pending'`, node); err != nil {
		return fmt.Errorf("release messages: %w", err)
	}
	return nil
}

// ListMessages implements store.Notify.
func (s *DB) ListMessages(ctx context.Context, status string, limit int) ([]store.OutboxMessage, error) {
	if limit <= 0 || limit > store.OutboxListMax {
		limit = store.OutboxListMax
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+outboxCols+` FROM notify_outbox WHERE (? = '' OR status = ?)
		ORDER BY created_at DESC, id DESC LIMIT ?`, status, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return scanMessages(rows)
}

// ReplayMessage implements store.Notify.
func (s *DB) ReplayMessage(ctx context.Context, id string, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE notify_outbox SET status = 'pending', attempts = 0, next_at = ?, lease_node = '', lease_until = 0
		WHERE id = ? AND status = 'dead'`, ms(now), id)
	if err != nil {
		return fmt.Errorf("replay message %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	return s.outboxMiss(ctx, id)
}

// AddWebhook implements store.Notify.
func (s *DB) AddWebhook(ctx context.Context, w store.Webhook) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO notify_webhooks (id, url, secret, created_at) VALUES (?, ?, ?, ?)`, w.ID, w.URL, w.Secret, ms(w.CreatedAt))
	if isUnique(err) {
		return store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("add webhook: %w", err)
	}
	return nil
}

// Webhooks implements store.Notify.
func (s *DB) Webhooks(ctx context.Context) ([]store.Webhook, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, url, secret, created_at FROM notify_webhooks ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	defer rows.Close()
	var out []store.Webhook
	for rows.Next() {
		var w store.Webhook
		var created int64
		if err := rows.Scan(&w.ID, &w.URL, &w.Secret, &created); err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		w.CreatedAt = fromMS(created)
		out = append(out, w)
	}
	return out, rows.Err()
}

// RemoveWebhook implements store.Notify.
func (s *DB) RemoveWebhook(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM notify_webhooks WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("remove webhook: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

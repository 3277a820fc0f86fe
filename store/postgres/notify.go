package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/store"
)

// notifyMigrations holds the outbox of notifications and the outgoing
// webhooks. A message is due when it is pending, next_at has passed and
// no node holds an unexpired lease on it; nodes claim with FOR UPDATE SKIP
// LOCKED, so two never take the same message.
var notifyMigrations = []migration{{1, `
CREATE TABLE notify_outbox (
	id TEXT COLLATE "C" PRIMARY KEY,
	channel TEXT NOT NULL,
	item TEXT NOT NULL DEFAULT '',
	payload TEXT NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('pending','delivered','dead')),
	attempts INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	created_at TIMESTAMPTZ NOT NULL,
	next_at TIMESTAMPTZ NOT NULL,
	delivered_at TIMESTAMPTZ,
	lease_node TEXT NOT NULL DEFAULT '',
	lease_until TIMESTAMPTZ NOT NULL DEFAULT 'epoch'
);
CREATE INDEX notify_outbox_due ON notify_outbox(status, next_at);
CREATE TABLE notify_webhooks (
	id TEXT COLLATE "C" PRIMARY KEY,
	url TEXT NOT NULL,
	secret TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
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
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, m := range msgs {
			tag, err := tx.Exec(ctx, `INSERT INTO notify_outbox (id, channel, item, payload, status, created_at, next_at)
				VALUES ($1, $2, $3, $4, 'pending', $5, $6) ON CONFLICT (id) DO NOTHING`,
				m.ID, m.Channel, m.Item, string(m.Payload), m.CreatedAt, m.NextAt)
			if err != nil {
				return fmt.Errorf("enqueue message %s: %w", m.ID, err)
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

const outboxCols = `id, channel, item, payload, status, attempts, last_error, created_at, next_at, delivered_at`

func scanMessages(rows pgx.Rows) ([]store.OutboxMessage, error) {
	defer rows.Close()
	var out []store.OutboxMessage
	for rows.Next() {
		var m store.OutboxMessage
		var payload string
		var delivered *time.Time
		if err := rows.Scan(&m.ID, &m.Channel, &m.Item, &payload, &m.Status, &m.Attempts, &m.LastError, &m.CreatedAt, &m.NextAt, &delivered); err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		m.Payload, m.CreatedAt, m.NextAt = []byte(payload), utc(m.CreatedAt), utc(m.NextAt)
		if delivered != nil {
			m.DeliveredAt = utc(*delivered)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return out, nil
}

// ClaimMessages implements store.Notify. The rows are locked with SKIP
// LOCKED, so concurrent claims on several nodes take disjoint messages.
func (s *DB) ClaimMessages(ctx context.Context, node string, now time.Time, lease time.Duration, limit int) ([]store.OutboxMessage, error) {
	if limit <= 0 {
		limit = 1
	}
	rows, err := s.pool.Query(ctx, `UPDATE notify_outbox SET lease_node = $1, lease_until = $2, attempts = attempts + 1
		WHERE id IN (SELECT id FROM notify_outbox WHERE status = 'pending' AND next_at <= $3 AND lease_until <= $3
			ORDER BY next_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING `+outboxCols, node, now.Add(lease), now, limit)
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	return scanMessages(rows)
}

// FinishAttempt implements store.Notify.
func (s *DB) FinishAttempt(ctx context.Context, a store.Attempt) error {
	var q string
	var args []any
	switch {
	case a.Delivered:
		q, args = `UPDATE notify_outbox SET status = 'delivered', delivered_at = $3, last_error = $4, lease_node = '', lease_until = 'epoch'
			WHERE id = $1 AND status = 'pending' AND lease_node = $2`, []any{a.ID, a.Node, a.At, a.Error}
	case a.Retry.IsZero():
		q, args = `UPDATE notify_outbox SET status = 'dead', last_error = $3, lease_node = '', lease_until = 'epoch'
			WHERE id = $1 AND status = 'pending' AND lease_node = $2`, []any{a.ID, a.Node, a.Error}
	default:
		q, args = `UPDATE notify_outbox SET next_at = $3, last_error = $4, lease_node = '', lease_until = 'epoch'
			WHERE id = $1 AND status = 'pending' AND lease_node = $2`, []any{a.ID, a.Node, a.Retry, a.Error}
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("finish attempt %s: %w", a.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.outboxMiss(ctx, a.ID)
}

// outboxMiss tells a message that does not exist from one in another state.
func (s *DB) outboxMiss(ctx context.Context, id string) error {
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1 FROM notify_outbox WHERE id = $1`, id).Scan(&one); err != nil {
		return rowErr(err, "outbox "+id)
	}
	return store.ErrConflict
}

// ReleaseMessages implements store.Notify.
func (s *DB) ReleaseMessages(ctx context.Context, node string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE notify_outbox SET lease_node = '', lease_until = 'epoch' WHERE lease_node = $1 AND status = 'pending'`, node); err != nil {
		return fmt.Errorf("release messages: %w", err)
	}
	return nil
}

// ListMessages implements store.Notify.
func (s *DB) ListMessages(ctx context.Context, status string, limit int) ([]store.OutboxMessage, error) {
	if limit <= 0 || limit > store.OutboxListMax {
		limit = store.OutboxListMax
	}
	rows, err := s.pool.Query(ctx, `SELECT `+outboxCols+` FROM notify_outbox WHERE ($1 = '' OR status = $1)
		ORDER BY created_at DESC, id DESC LIMIT $2`, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return scanMessages(rows)
}

// ReplayMessage implements store.Notify.
func (s *DB) ReplayMessage(ctx context.Context, id string, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE notify_outbox SET status = 'pending', attempts = 0, next_at = $2, lease_node = '', lease_until = 'epoch'
		WHERE id = $1 AND status = 'dead'`, id, now)
	if err != nil {
		return fmt.Errorf("replay message %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.outboxMiss(ctx, id)
}

// AddWebhook implements store.Notify.
func (s *DB) AddWebhook(ctx context.Context, w store.Webhook) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO notify_webhooks (id, url, secret, created_at) VALUES ($1, $2, $3, $4)`, w.ID, w.URL, w.Secret, w.CreatedAt)
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
	rows, err := s.pool.Query(ctx, `SELECT id, url, secret, created_at FROM notify_webhooks ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	defer rows.Close()
	var out []store.Webhook
	for rows.Next() {
		var w store.Webhook
		if err := rows.Scan(&w.ID, &w.URL, &w.Secret, &w.CreatedAt); err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		w.CreatedAt = utc(w.CreatedAt)
		out = append(out, w)
	}
	return out, rows.Err()
}

// RemoveWebhook implements store.Notify.
func (s *DB) RemoveWebhook(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM notify_webhooks WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("remove webhook: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

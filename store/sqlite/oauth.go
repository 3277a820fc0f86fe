package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/store"
)

// oauthMigrations holds the clients and grants of the OAuth authorization
// server. Grants are keyed by the hash of their secret.
var oauthMigrations = []migration{{1, `
CREATE TABLE oauth_clients (
	id TEXT PRIMARY KEY,
	metadata TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE oauth_grants (
	hash BLOB PRIMARY KEY,
	kind TEXT NOT NULL CHECK (kind IN ('code','access','refresh')),
	client_id TEXT NOT NULL,
	principal_id TEXT NOT NULL REFERENCES principals(id),
	data TEXT NOT NULL DEFAULT '{}',
	expires_at INTEGER NOT NULL,
	used_at INTEGER
);
CREATE INDEX oauth_grants_principal ON oauth_grants(principal_id);
`}}

// OAuth implements store.Store.
func (s *DB) OAuth() store.OAuth { return s }

// CreateOAuthClient implements store.OAuth.
func (s *DB) CreateOAuthClient(ctx context.Context, c store.OAuthClient) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO oauth_clients (id, metadata, created_at) VALUES (?, ?, ?)`, c.ID, string(c.Metadata), ms(c.CreatedAt))
	if isUnique(err) {
		return store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("create oauth client: %w", err)
	}
	return nil
}

// OAuthClient implements store.OAuth.
func (s *DB) OAuthClient(ctx context.Context, id string) (store.OAuthClient, error) {
	c := store.OAuthClient{ID: id}
	var meta string
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT metadata, created_at FROM oauth_clients WHERE id = ?`, id).Scan(&meta, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("oauth client: %w", err)
	}
	c.Metadata, c.CreatedAt = []byte(meta), fromMS(created)
	return c, nil
}

// CreateOAuthGrant implements store.OAuth.
func (s *DB) CreateOAuthGrant(ctx context.Context, hash []byte, g store.OAuthGrant) error {
	data := string(g.Data)
	if data == "" {
		data = "{}"
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO oauth_grants (hash, kind, client_id, principal_id, data, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		hash, g.Kind, g.ClientID, g.PrincipalID, data, ms(g.ExpiresAt))
	if err != nil {
		return fmt.Errorf("create oauth grant: %w", err)
	}
	return nil
}

const oauthGrantCols = `g.kind, g.client_id, g.principal_id, g.data, g.expires_at`

func scanOAuthGrant(row interface{ Scan(...any) error }) (store.OAuthGrant, error) {
	var g store.OAuthGrant
	var data string
	var exp int64
	if err := row.Scan(&g.Kind, &g.ClientID, &g.PrincipalID, &data, &exp); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return g, store.ErrNotFound
		}
		return g, fmt.Errorf("oauth grant: %w", err)
	}
	g.Data, g.ExpiresAt = []byte(data), fromMS(exp)
	return g, nil
}

// OAuthGrant implements store.OAuth.
func (s *DB) OAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time) (store.OAuthGrant, error) {
	return scanOAuthGrant(s.db.QueryRowContext(ctx, `SELECT `+oauthGrantCols+` FROM oauth_grants g JOIN principals p ON p.id = g.principal_id
		WHERE g.hash = ? AND g.kind = ? AND g.used_at IS NULL AND g.expires_at > ? AND p.revoked_at IS NULL`, hash, kind, ms(now)))
}

// UseOAuthGrant implements store.OAuth. The conditional update makes the
// first of concurrent uses the only one.
func (s *DB) UseOAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time) (store.OAuthGrant, error) {
	g, err := scanOAuthGrant(s.db.QueryRowContext(ctx, `UPDATE oauth_grants SET used_at = ?
		WHERE hash = ? AND kind = ? AND used_at IS NULL AND expires_at > ?
		  AND principal_id IN (SELECT id FROM principals WHERE revoked_at IS NULL)
		RETURNING kind, client_id, principal_id, data, expires_at`, ms(now), hash, kind, ms(now)))
	if !errors.Is(err, store.ErrNotFound) {
		return g, err
	}
	used, err := scanOAuthGrant(s.db.QueryRowContext(ctx, `SELECT `+oauthGrantCols+` FROM oauth_grants g
		WHERE g.hash = ? AND g.kind = ? AND g.used_at IS NOT NULL`, hash, kind))
	if err != nil {
		return store.OAuthGrant{}, err
	}
	return used, store.ErrConflict
}

// ExchangeOAuthGrant implements store.OAuth.
func (s *DB) ExchangeOAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time, next []store.NewOAuthGrant) (store.OAuthGrant, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("exchange oauth grant: %w", err)
	}
	defer tx.Rollback()
	g, err := scanOAuthGrant(tx.QueryRowContext(ctx, `UPDATE oauth_grants SET used_at = ?
		WHERE hash = ? AND kind = ? AND used_at IS NULL AND expires_at > ?
		  AND principal_id IN (SELECT id FROM principals WHERE revoked_at IS NULL)
		RETURNING kind, client_id, principal_id, data, expires_at`, ms(now), hash, kind, ms(now)))
	if errors.Is(err, store.ErrNotFound) {
		used, err := scanOAuthGrant(tx.QueryRowContext(ctx, `SELECT `+oauthGrantCols+` FROM oauth_grants g
			WHERE g.hash = ? AND g.kind = ? AND g.used_at IS NOT NULL`, hash, kind))
		if err != nil {
			return store.OAuthGrant{}, err
		}
		return used, store.ErrConflict
	}
	if err != nil {
		return g, err
	}
	for _, n := range next {
		data := string(n.Grant.Data)
		if data == "" {
			data = "{}"
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_grants (hash, kind, client_id, principal_id, data, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			n.Hash, n.Grant.Kind, n.Grant.ClientID, n.Grant.PrincipalID, data, ms(n.Grant.ExpiresAt)); err != nil {
			return store.OAuthGrant{}, fmt.Errorf("exchange oauth grant: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return store.OAuthGrant{}, fmt.Errorf("exchange oauth grant: %w", err)
	}
	return g, nil
}

// PruneOAuth implements store.OAuth.
func (s *DB) PruneOAuth(ctx context.Context, now, stale time.Time) ([]string, error) {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM oauth_clients WHERE created_at < ? AND id NOT IN (SELECT client_id FROM oauth_grants)`, ms(stale)); err != nil {
		return nil, fmt.Errorf("prune oauth clients: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT g.principal_id FROM oauth_grants g JOIN principals p ON p.id = g.principal_id
		WHERE p.revoked_at IS NULL GROUP BY g.principal_id
		HAVING SUM(CASE WHEN g.kind = 'code' AND g.used_at IS NULL AND g.expires_at <= ? THEN 0 ELSE 1 END) = 0
		ORDER BY g.principal_id LIMIT 100`, ms(now))
	if err != nil {
		return nil, fmt.Errorf("prune oauth grants: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("prune oauth grants: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("prune oauth grants: %w", err)
	}
	return ids, nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/store"
)

// oauthMigrations holds the clients and grants of the OAuth authorization
// server. Grants are keyed by the hash of their secret.
var oauthMigrations = []migration{{1, `
CREATE TABLE oauth_clients (
	id TEXT COLLATE "C" PRIMARY KEY,
	metadata TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE oauth_grants (
	hash BYTEA PRIMARY KEY,
	kind TEXT NOT NULL CHECK (kind IN ('code','access','refresh')),
	client_id TEXT NOT NULL,
	principal_id TEXT NOT NULL REFERENCES principals(id),
	data TEXT NOT NULL DEFAULT '{}',
	expires_at TIMESTAMPTZ NOT NULL,
	used_at TIMESTAMPTZ
);
CREATE INDEX oauth_grants_principal ON oauth_grants(principal_id);
`}}

// OAuth implements store.Store.
func (s *DB) OAuth() store.OAuth { return s }

// CreateOAuthClient implements store.OAuth.
func (s *DB) CreateOAuthClient(ctx context.Context, c store.OAuthClient) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO oauth_clients (id, metadata, created_at) VALUES ($1, $2, $3)`, c.ID, string(c.Metadata), c.CreatedAt)
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
	err := s.pool.QueryRow(ctx, `SELECT metadata, created_at FROM oauth_clients WHERE id = $1`, id).Scan(&meta, &c.CreatedAt)
	if err != nil {
		return c, rowErr(err, "oauth client")
	}
	c.Metadata, c.CreatedAt = []byte(meta), utc(c.CreatedAt)
	return c, nil
}

// CreateOAuthGrant implements store.OAuth.
func (s *DB) CreateOAuthGrant(ctx context.Context, hash []byte, g store.OAuthGrant) error {
	data := string(g.Data)
	if data == "" {
		data = "{}"
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO oauth_grants (hash, kind, client_id, principal_id, data, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		hash, g.Kind, g.ClientID, g.PrincipalID, data, g.ExpiresAt)
	if err != nil {
		return fmt.Errorf("create oauth grant: %w", err)
	}
	return nil
}

const oauthGrantCols = `kind, client_id, principal_id, data, expires_at`

func scanOAuthGrant(row pgx.Row) (store.OAuthGrant, error) {
	var g store.OAuthGrant
	var data string
	if err := row.Scan(&g.Kind, &g.ClientID, &g.PrincipalID, &data, &g.ExpiresAt); err != nil {
		return g, rowErr(err, "oauth grant")
	}
	g.Data, g.ExpiresAt = []byte(data), utc(g.ExpiresAt)
	return g, nil
}

// OAuthGrant implements store.OAuth.
func (s *DB) OAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time) (store.OAuthGrant, error) {
	return scanOAuthGrant(s.pool.QueryRow(ctx, `SELECT `+oauthGrantCols+` FROM oauth_grants
		WHERE hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3
		  AND principal_id IN (SELECT id FROM principals WHERE revoked_at IS NULL)`, hash, kind, now))
}

// UseOAuthGrant implements store.OAuth. The update is conditional: of
// concurrent uses, the first to lock the row wins and the others find it
// used when they re-check the condition.
func (s *DB) UseOAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time) (store.OAuthGrant, error) {
	g, err := scanOAuthGrant(s.pool.QueryRow(ctx, `UPDATE oauth_grants SET used_at = $1
		WHERE hash = $2 AND kind = $3 AND used_at IS NULL AND expires_at > $1
		  AND principal_id IN (SELECT id FROM principals WHERE revoked_at IS NULL)
		RETURNING `+oauthGrantCols, now, hash, kind))
	if !errors.Is(err, store.ErrNotFound) {
		return g, err
	}
	used, err := scanOAuthGrant(s.pool.QueryRow(ctx, `SELECT `+oauthGrantCols+` FROM oauth_grants
		WHERE hash = $1 AND kind = $2 AND used_at IS NOT NULL`, hash, kind))
	if err != nil {
		return store.OAuthGrant{}, err
	}
	return used, store.ErrConflict
}

// ExchangeOAuthGrant implements store.OAuth.
func (s *DB) ExchangeOAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time, next []store.NewOAuthGrant) (store.OAuthGrant, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("exchange oauth grant: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	g, err := scanOAuthGrant(tx.QueryRow(ctx, `UPDATE oauth_grants SET used_at = $1
		WHERE hash = $2 AND kind = $3 AND used_at IS NULL AND expires_at > $1
		  AND principal_id IN (SELECT id FROM principals WHERE revoked_at IS NULL)
		RETURNING `+oauthGrantCols, now, hash, kind))
	if errors.Is(err, store.ErrNotFound) {
		used, err := scanOAuthGrant(tx.QueryRow(ctx, `SELECT `+oauthGrantCols+` FROM oauth_grants
			WHERE hash = $1 AND kind = $2 AND used_at IS NOT NULL`, hash, kind))
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
		if _, err := tx.Exec(ctx, `INSERT INTO oauth_grants (hash, kind, client_id, principal_id, data, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			n.Hash, n.Grant.Kind, n.Grant.ClientID, n.Grant.PrincipalID, data, n.Grant.ExpiresAt); err != nil {
			return store.OAuthGrant{}, fmt.Errorf("exchange oauth grant: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return store.OAuthGrant{}, fmt.Errorf("exchange oauth grant: %w", err)
	}
	return g, nil
}

// PruneOAuth implements store.OAuth.
func (s *DB) PruneOAuth(ctx context.Context, now, stale time.Time) ([]string, error) {
	if _, err := s.pool.Exec(ctx, `DELETE FROM oauth_clients WHERE created_at < $1 AND id NOT IN (SELECT client_id FROM oauth_grants)`, stale); err != nil {
		return nil, fmt.Errorf("prune oauth clients: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT g.principal_id FROM oauth_grants g JOIN principals p ON p.id = g.principal_id
		WHERE p.revoked_at IS NULL GROUP BY g.principal_id
		HAVING SUM(CASE WHEN g.kind = 'code' AND g.used_at IS NULL AND g.expires_at <= $1 THEN 0 ELSE 1 END) = 0
		ORDER BY g.principal_id LIMIT 100`, now)
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

package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/store"
)

// coreMigrations holds the schema of principals, tokens, sign-in links, web
// sessions, settings and the audit log. Times are TIMESTAMPTZ; a time that
// is not set is NULL. Secrets are stored as hashes (BYTEA).
var coreMigrations = []migration{{1, `
CREATE TABLE principals (
	id TEXT COLLATE "C" PRIMARY KEY,
	kind TEXT NOT NULL CHECK (kind IN ('human','agent','service')),
	name TEXT NOT NULL,
	grants TEXT[] NOT NULL DEFAULT '{}',
	created_at TIMESTAMPTZ NOT NULL,
	revoked_at TIMESTAMPTZ
);
CREATE TABLE tokens (
	hash BYTEA PRIMARY KEY,
	principal_id TEXT NOT NULL REFERENCES principals(id)
);
CREATE INDEX tokens_principal ON tokens(principal_id);
CREATE TABLE signin_links (
	hash BYTEA PRIMARY KEY,
	principal_id TEXT NOT NULL REFERENCES principals(id),
	expires_at TIMESTAMPTZ NOT NULL,
	used_at TIMESTAMPTZ
);
CREATE INDEX signin_links_principal ON signin_links(principal_id);
CREATE TABLE sessions (
	hash BYTEA PRIMARY KEY,
	principal_id TEXT NOT NULL REFERENCES principals(id),
	csrf TEXT NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX sessions_principal ON sessions(principal_id);
CREATE TABLE settings (
	name TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE audit (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	ts TIMESTAMPTZ NOT NULL,
	principal_id TEXT NOT NULL,
	source TEXT NOT NULL,
	form_id TEXT NOT NULL DEFAULT '',
	control_id TEXT NOT NULL DEFAULT '',
	subject TEXT NOT NULL DEFAULT '',
	action TEXT NOT NULL,
	ok BOOLEAN NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_form ON audit(form_id, seq);
`}, {2, `
ALTER TABLE principals ADD COLUMN supervisors TEXT[] NOT NULL DEFAULT '{}';
`}}

// utc returns t in UTC: pgx reads TIMESTAMPTZ in the local zone.
func utc(t time.Time) time.Time { return t.UTC() }

// optTime is a time argument that is NULL when t is zero.
func optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// fromOpt returns the time of a nullable column, zero for NULL.
func fromOpt(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// CreatePrincipal implements store.Principals.
func (s *DB) CreatePrincipal(ctx context.Context, p store.Principal, tokenHash []byte) error {
	if err := p.Check(); err != nil {
		return err
	}
	return s.write(ctx, "create principal", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO principals (id, kind, name, grants, supervisors, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			p.ID, p.Kind, p.Name, nonNil(p.Grants), nonNil(p.Supervisors), p.CreatedAt); err != nil {
			if isUnique(err) {
				return store.ErrConflict
			}
			return fmt.Errorf("create principal: %w", err)
		}
		if tokenHash != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO tokens (hash, principal_id) VALUES ($1, $2)`, tokenHash, p.ID); err != nil {
				return fmt.Errorf("create principal: %w", err)
			}
		}
		return nil
	})
}

const principalCols = `p.id, p.kind, p.name, p.grants, p.supervisors, p.created_at, p.revoked_at`

func scanPrincipal(row pgx.Row) (store.Principal, error) {
	var (
		p       store.Principal
		revoked *time.Time
	)
	if err := row.Scan(&p.ID, &p.Kind, &p.Name, &p.Grants, &p.Supervisors, &p.CreatedAt, &revoked); err != nil {
		return store.Principal{}, rowErr(err, "principal")
	}
	if len(p.Supervisors) == 0 {
		p.Supervisors = nil
	}
	if p.Grants == nil {
		p.Grants = []string{}
	}
	p.CreatedAt = utc(p.CreatedAt)
	p.Revoked = revoked != nil
	return p, nil
}

// PrincipalByToken implements store.Principals.
func (s *DB) PrincipalByToken(ctx context.Context, tokenHash []byte) (store.Principal, error) {
	return scanPrincipal(s.pool.QueryRow(ctx, `SELECT `+principalCols+` FROM tokens t JOIN principals p ON p.id = t.principal_id
		WHERE t.hash = $1 AND p.revoked_at IS NULL`, tokenHash))
}

// Principal implements store.Principals.
func (s *DB) Principal(ctx context.Context, id string) (store.Principal, error) {
	return scanPrincipal(s.pool.QueryRow(ctx, `SELECT `+principalCols+` FROM principals p WHERE p.id = $1`, id))
}

// ListPrincipals implements store.Principals.
func (s *DB) ListPrincipals(ctx context.Context) ([]store.Principal, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+principalCols+` FROM principals p ORDER BY p.created_at, p.id`)
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	defer rows.Close()
	var out []store.Principal
	for rows.Next() {
		p, err := scanPrincipal(rows)
		if err != nil {
			return nil, fmt.Errorf("list principals: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// RevokePrincipal implements store.Principals.
func (s *DB) RevokePrincipal(ctx context.Context, id string) error {
	return s.write(ctx, "revoke "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE principals SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, time.Now(), id)
		if err != nil {
			return fmt.Errorf("revoke %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		for _, q := range []string{`DELETE FROM sessions WHERE principal_id = $1`, `DELETE FROM signin_links WHERE principal_id = $1`} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("revoke %s: %w", id, err)
			}
		}
		return nil
	})
}

// CreateSignInLink implements store.Sessions.
func (s *DB) CreateSignInLink(ctx context.Context, linkHash []byte, principalID string, expires time.Time) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO signin_links (hash, principal_id, expires_at) VALUES ($1, $2, $3)`, linkHash, principalID, expires); err != nil {
		return fmt.Errorf("create sign-in link: %w", err)
	}
	return nil
}

// ConsumeSignInLink implements store.Sessions. The update is conditional:
// of concurrent uses, the first to lock the row wins and the others find it
// used when they re-check the condition.
func (s *DB) ConsumeSignInLink(ctx context.Context, linkHash []byte, now time.Time) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `UPDATE signin_links SET used_at = $1
		WHERE hash = $2 AND used_at IS NULL AND expires_at > $1
		  AND principal_id IN (SELECT id FROM principals WHERE revoked_at IS NULL)
		RETURNING principal_id`, now, linkHash).Scan(&id)
	if err != nil {
		return "", rowErr(err, "consume sign-in link")
	}
	return id, nil
}

// CreateSession implements store.Sessions.
func (s *DB) CreateSession(ctx context.Context, cookieHash []byte, sess store.Session) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO sessions (hash, principal_id, csrf, expires_at) VALUES ($1, $2, $3, $4)`,
		cookieHash, sess.PrincipalID, sess.CSRF, sess.ExpiresAt); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// Session implements store.Sessions.
func (s *DB) Session(ctx context.Context, cookieHash []byte, now time.Time) (store.Session, error) {
	var sess store.Session
	err := s.pool.QueryRow(ctx, `SELECT s.principal_id, s.csrf, s.expires_at FROM sessions s
		JOIN principals p ON p.id = s.principal_id
		WHERE s.hash = $1 AND s.expires_at > $2 AND p.revoked_at IS NULL`, cookieHash, now).Scan(&sess.PrincipalID, &sess.CSRF, &sess.ExpiresAt)
	if err != nil {
		return store.Session{}, rowErr(err, "session")
	}
	sess.ExpiresAt = utc(sess.ExpiresAt)
	return sess, nil
}

// DeleteSession implements store.Sessions.
func (s *DB) DeleteSession(ctx context.Context, cookieHash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE hash = $1`, cookieHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// Setting implements store.Settings.
func (s *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, name).Scan(&v)
	if err != nil {
		return "", rowErr(err, "setting "+name)
	}
	return v, nil
}

// SetSetting implements store.Settings.
func (s *DB) SetSetting(ctx context.Context, name, value string) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value); err != nil {
		return fmt.Errorf("set setting %s: %w", name, err)
	}
	return nil
}

// AppendAudit implements store.Audit. The statement takes the audit lock
// for its transaction before drawing the sequence number, so records
// commit in sequence order: a reader paging with AfterSeq never passes a
// number whose record is still to appear.
func (s *DB) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	return appendAudit(ctx, s.pool, r)
}

// queryRower runs a query that returns one row: the pool, a connection or
// a transaction.
type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// appendAudit appends r through q and returns its sequence number. In a
// transaction, the audit lock it takes is held until the commit.
// appendAuditSQL takes the audit lock and inserts one record, returning
// its sequence number.
const appendAuditSQL = `WITH l AS (SELECT pg_advisory_xact_lock($1))
		INSERT INTO audit (ts, principal_id, source, form_id, control_id, subject, action, ok, reason, detail)
		SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM l RETURNING seq`

func auditArgs(r store.AuditRecord) []any {
	return []any{lockAudit, r.Time, r.PrincipalID, r.Source, r.FormID, r.ControlID, r.Subject, r.Action, r.OK, r.Reason, r.Detail}
}

// queueAudit queues appendAudit's statement in b; its row is the record's
// sequence number.
func queueAudit(b *pgx.Batch, r store.AuditRecord) {
	b.Queue(appendAuditSQL, auditArgs(r)...)
}

func appendAudit(ctx context.Context, q queryRower, r store.AuditRecord) (int64, error) {
	var seq int64
	err := q.QueryRow(ctx, appendAuditSQL, auditArgs(r)...).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("append audit: %w", err)
	}
	return seq, nil
}

// ListAudit implements store.Audit.
func (s *DB) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditRecord, error) {
	where := []string{"seq > $1"}
	args := []any{f.AfterSeq}
	if f.FormID != "" {
		args = append(args, f.FormID)
		where = append(where, fmt.Sprintf("form_id = $%d", len(args)))
	}
	if f.PrincipalID != "" {
		args = append(args, f.PrincipalID)
		where = append(where, fmt.Sprintf("principal_id = $%d", len(args)))
	}
	args = append(args, f.Max())
	rows, err := s.pool.Query(ctx, `SELECT seq, ts, principal_id, source, form_id, control_id, subject, action, ok, reason, detail
		FROM audit WHERE `+strings.Join(where, " AND ")+fmt.Sprintf(` ORDER BY seq LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []store.AuditRecord
	for rows.Next() {
		var r store.AuditRecord
		if err := rows.Scan(&r.Seq, &r.Time, &r.PrincipalID, &r.Source, &r.FormID, &r.ControlID, &r.Subject, &r.Action, &r.OK, &r.Reason, &r.Detail); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		r.Time = utc(r.Time)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

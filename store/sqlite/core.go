package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/assent-run/assent/store"
)

var coreMigrations = []migration{{1, `
CREATE TABLE principals (
	id TEXT PRIMARY KEY,
	kind TEXT NOT NULL CHECK (kind IN ('human','agent','service')),
	name TEXT NOT NULL,
	grants TEXT NOT NULL DEFAULT '[]',
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);
CREATE TABLE tokens (
	hash BLOB PRIMARY KEY,
	principal_id TEXT NOT NULL REFERENCES principals(id)
);
CREATE TABLE signin_links (
	hash BLOB PRIMARY KEY,
	principal_id TEXT NOT NULL REFERENCES principals(id),
	expires_at INTEGER NOT NULL,
	used_at INTEGER
);
CREATE TABLE sessions (
	hash BLOB PRIMARY KEY,
	principal_id TEXT NOT NULL REFERENCES principals(id),
	csrf TEXT NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE TABLE settings (
	name TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE audit (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	ts INTEGER NOT NULL,
	principal_id TEXT NOT NULL,
	source TEXT NOT NULL,
	form_id TEXT NOT NULL DEFAULT '',
	control_id TEXT NOT NULL DEFAULT '',
	subject TEXT NOT NULL DEFAULT '',
	action TEXT NOT NULL,
	ok INTEGER NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_form ON audit(form_id, seq);
`}, {2, `
ALTER TABLE principals ADD COLUMN supervisors TEXT NOT NULL DEFAULT '[]';
`}, {3, `
-- The audit log never deletes a row, so its rowid alone numbers records
-- without reuse; AUTOINCREMENT cost every append a write to sqlite_sequence.
CREATE TABLE audit_v3 (
	seq INTEGER PRIMARY KEY,
	ts INTEGER NOT NULL,
	principal_id TEXT NOT NULL,
	source TEXT NOT NULL,
	form_id TEXT NOT NULL DEFAULT '',
	control_id TEXT NOT NULL DEFAULT '',
	subject TEXT NOT NULL DEFAULT '',
	action TEXT NOT NULL,
	ok INTEGER NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	detail TEXT NOT NULL DEFAULT ''
);
INSERT INTO audit_v3 (seq, ts, principal_id, source, form_id, control_id, subject, action, ok, reason, detail)
	SELECT seq, ts, principal_id, source, form_id, control_id, subject, action, ok, reason, detail FROM audit;
DROP TABLE audit;
ALTER TABLE audit_v3 RENAME TO audit;
CREATE INDEX audit_form ON audit(form_id, seq);
DELETE FROM sqlite_sequence WHERE name = 'audit';
`}}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// CreatePrincipal implements store.Principals.
func (s *DB) CreatePrincipal(ctx context.Context, p store.Principal, tokenHash []byte) error {
	if err := p.Check(); err != nil {
		return err
	}
	grants, err := json.Marshal(nonNil(p.Grants))
	if err != nil {
		return err
	}
	sup, err := json.Marshal(nonNil(p.Supervisors))
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create principal: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO principals (id, kind, name, grants, supervisors, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		p.ID, p.Kind, p.Name, string(grants), string(sup), ms(p.CreatedAt)); err != nil {
		if isUnique(err) {
			return store.ErrConflict
		}
		return fmt.Errorf("create principal: %w", err)
	}
	if tokenHash != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tokens (hash, principal_id) VALUES (?, ?)`, tokenHash, p.ID); err != nil {
			return fmt.Errorf("create principal: %w", err)
		}
	}
	return tx.Commit()
}

const principalCols = `p.id, p.kind, p.name, p.grants, p.supervisors, p.created_at, p.revoked_at`

func scanPrincipal(row interface{ Scan(...any) error }) (store.Principal, error) {
	var (
		p       store.Principal
		grants  string
		sup     string
		created int64
		revoked sql.NullInt64
	)
	if err := row.Scan(&p.ID, &p.Kind, &p.Name, &grants, &sup, &created, &revoked); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return p, store.ErrNotFound
		}
		return p, err
	}
	if err := json.Unmarshal([]byte(grants), &p.Grants); err != nil {
		return p, fmt.Errorf("principal %s: corrupt grants: %w", p.ID, err)
	}
	if err := json.Unmarshal([]byte(sup), &p.Supervisors); err != nil {
		return p, fmt.Errorf("principal %s: corrupt supervisors: %w", p.ID, err)
	}
	if len(p.Supervisors) == 0 {
		p.Supervisors = nil
	}
	p.CreatedAt = fromMS(created)
	p.Revoked = revoked.Valid
	return p, nil
}

// PrincipalByToken implements store.Principals.
func (s *DB) PrincipalByToken(ctx context.Context, tokenHash []byte) (store.Principal, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+principalCols+` FROM tokens t JOIN principals p ON p.id = t.principal_id
		WHERE t.hash = ? AND p.revoked_at IS NULL`, tokenHash)
	return scanPrincipal(row)
}

// Principal implements store.Principals.
func (s *DB) Principal(ctx context.Context, id string) (store.Principal, error) {
	return scanPrincipal(s.stmts.queryRow(ctx, `SELECT `+principalCols+` FROM principals p WHERE p.id = ?`, id))
}

// ListPrincipals implements store.Principals.
func (s *DB) ListPrincipals(ctx context.Context) ([]store.Principal, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+principalCols+` FROM principals p ORDER BY p.created_at, p.id`)
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	defer rows.Close()
	var out []store.Principal
	for rows.Next() {
		p, err := scanPrincipal(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// RevokePrincipal implements store.Principals.
func (s *DB) RevokePrincipal(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("revoke %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE principals SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, ms(time.Now()), id)
	if err != nil {
		return fmt.Errorf("revoke %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	for _, q := range []string{`DELETE FROM sessions WHERE principal_id = ?`, `DELETE FROM signin_links WHERE principal_id = ?`} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("revoke %s: %w", id, err)
		}
	}
	return tx.Commit()
}

// CreateSignInLink implements store.Sessions.
func (s *DB) CreateSignInLink(ctx context.Context, linkHash []byte, principalID string, expires time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO signin_links (hash, principal_id, expires_at) VALUES (?, ?, ?)`, linkHash, principalID, ms(expires))
	if err != nil {
		return fmt.Errorf("create sign-in link: %w", err)
	}
	return nil
}

// ConsumeSignInLink implements store.Sessions. The update is conditional, so
// of two concurrent uses exactly one succeeds.
func (s *DB) ConsumeSignInLink(ctx context.Context, linkHash []byte, now time.Time) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `UPDATE signin_links SET used_at = ?
		WHERE hash = ? AND used_at IS NULL AND expires_at > ?
		  AND principal_id IN (SELECT id FROM principals WHERE revoked_at IS NULL)
		RETURNING principal_id`, ms(now), linkHash, ms(now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("consume sign-in link: %w", err)
	}
	return id, nil
}

// CreateSession implements store.Sessions.
func (s *DB) CreateSession(ctx context.Context, cookieHash []byte, sess store.Session) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (hash, principal_id, csrf, expires_at) VALUES (?, ?, ?, ?)`,
		cookieHash, sess.PrincipalID, sess.CSRF, ms(sess.ExpiresAt))
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// Session implements store.Sessions.
func (s *DB) Session(ctx context.Context, cookieHash []byte, now time.Time) (store.Session, error) {
	var (
		sess    store.Session
		expires int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT s.principal_id, s.csrf, s.expires_at FROM sessions s
		JOIN principals p ON p.id = s.principal_id
		WHERE s.hash = ? AND s.expires_at > ? AND p.revoked_at IS NULL`, cookieHash, ms(now)).Scan(&sess.PrincipalID, &sess.CSRF, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return sess, store.ErrNotFound
	}
	if err != nil {
		return sess, fmt.Errorf("session: %w", err)
	}
	sess.ExpiresAt = fromMS(expires)
	return sess, nil
}

// DeleteSession implements store.Sessions.
func (s *DB) DeleteSession(ctx context.Context, cookieHash []byte) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, cookieHash)
	return err
}

// Setting implements store.Settings.
func (s *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	return v, err
}

// SetSetting implements store.Settings.
func (s *DB) SetSetting(ctx context.Context, name, value string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
		ON CONFLICT(name) DO UPDATE SET value = excluded.value`, name, value)
	return err
}

// AppendAudit implements store.Audit.
func (s *DB) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	return appendAudit(ctx, s.stmts, nil, r)
}

// insertAudit is the statement that appends an audit record.
const insertAudit = `INSERT INTO audit (ts, principal_id, source, form_id, control_id, subject, action, ok, reason, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// appendAudit appends r inside tx, or on its own when tx is nil, and
// returns its sequence number.
func appendAudit(ctx context.Context, stmts *stmtCache, tx *sql.Tx, r store.AuditRecord) (int64, error) {
	args := []any{ms(r.Time), r.PrincipalID, r.Source, r.FormID, r.ControlID, r.Subject, r.Action, r.OK, r.Reason, r.Detail}
	var (
		res sql.Result
		err error
	)
	if tx == nil {
		res, err = stmts.exec(ctx, insertAudit, args...)
	} else {
		res, err = stmts.execTx(ctx, tx, insertAudit, args...)
	}
	if err != nil {
		return 0, fmt.Errorf("append audit: %w", err)
	}
	return res.LastInsertId()
}

// ListAudit implements store.Audit.
func (s *DB) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditRecord, error) {
	var (
		where []string
		args  []any
	)
	where = append(where, "seq > ?")
	args = append(args, f.AfterSeq)
	if f.FormID != "" {
		where = append(where, "form_id = ?")
		args = append(args, f.FormID)
	}
	if f.PrincipalID != "" {
		where = append(where, "principal_id = ?")
		args = append(args, f.PrincipalID)
	}
	args = append(args, f.Max())
	rows, err := s.db.QueryContext(ctx, `SELECT seq, ts, principal_id, source, form_id, control_id, subject, action, ok, reason, detail
		FROM audit WHERE `+strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []store.AuditRecord
	for rows.Next() {
		var (
			r  store.AuditRecord
			ts int64
		)
		if err := rows.Scan(&r.Seq, &ts, &r.PrincipalID, &r.Source, &r.FormID, &r.ControlID, &r.Subject, &r.Action, &r.OK, &r.Reason, &r.Detail); err != nil {
			return nil, err
		}
		r.Time = fromMS(ts)
		out = append(out, r)
	}
	return out, rows.Err()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

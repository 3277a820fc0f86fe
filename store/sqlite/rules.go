package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/assent-run/assent/store"
)

// ruleMigrations holds the standing rules. A rule's bounds are one JSON
// document; revoked_at is 0 while the rule stands.
var ruleMigrations = []migration{{1, `
CREATE TABLE rules (
	id TEXT PRIMARY KEY,
	created_by TEXT NOT NULL,
	agent_id TEXT NOT NULL,
	form_id TEXT NOT NULL,
	control_id TEXT NOT NULL,
	subject_type TEXT NOT NULL DEFAULT '',
	subject_id TEXT NOT NULL DEFAULT '',
	bounds TEXT NOT NULL,
	until_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER NOT NULL DEFAULT 0,
	revoked_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX rules_agent ON rules(agent_id, form_id, control_id);
CREATE INDEX rules_creator ON rules(created_by);
`}}

// Rules implements store.Store.
func (s *DB) Rules() store.Rules { return s }

// CreateRule implements store.Rules.
func (s *DB) CreateRule(ctx context.Context, r store.Rule, rec store.AuditRecord) error {
	if err := r.Check(); err != nil {
		return err
	}
	doc, err := r.RuleDocument()
	if err != nil {
		return fmt.Errorf("create rule %s: %w", r.ID, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create rule %s: %w", r.ID, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO rules (id, created_by, agent_id, form_id, control_id, subject_type, subject_id, bounds, until_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.CreatedBy, r.AgentID, r.FormID, r.ControlID, r.SubjectType, r.SubjectID, string(doc), ms(r.Until), ms(r.CreatedAt)); err != nil {
		if isUnique(err) {
			return store.ErrConflict
		}
		return fmt.Errorf("create rule %s: %w", r.ID, err)
	}
	if _, err := appendAudit(ctx, s.stmts, tx, rec); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create rule %s: %w", r.ID, err)
	}
	return nil
}

const ruleCols = `id, created_by, agent_id, form_id, control_id, subject_type, subject_id, bounds, until_at, created_at, revoked_at, revoked_by`

func scanRule(sc interface{ Scan(...any) error }) (store.Rule, error) {
	var r store.Rule
	var doc string
	var until, created, revoked int64
	if err := sc.Scan(&r.ID, &r.CreatedBy, &r.AgentID, &r.FormID, &r.ControlID, &r.SubjectType, &r.SubjectID, &doc, &until, &created, &revoked, &r.RevokedBy); err != nil {
		return store.Rule{}, err
	}
	r.Until, r.CreatedAt = fromMS(until), fromMS(created)
	if revoked != 0 {
		r.RevokedAt = fromMS(revoked)
	}
	return r, r.SetRuleDocument([]byte(doc))
}

// Rule implements store.Rules.
func (s *DB) Rule(ctx context.Context, id string) (store.Rule, error) {
	r, err := scanRule(s.db.QueryRowContext(ctx, `SELECT `+ruleCols+` FROM rules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Rule{}, store.ErrNotFound
	}
	if err != nil {
		return store.Rule{}, fmt.Errorf("rule %s: %w", id, err)
	}
	return r, nil
}

// ListRules implements store.Rules.
func (s *DB) ListRules(ctx context.Context, f store.RuleFilter) ([]store.Rule, error) {
	where := []string{"1 = 1"}
	var args []any
	if f.CreatedBy != "" {
		where = append(where, "created_by = ?")
		args = append(args, f.CreatedBy)
	}
	if f.AgentID != "" {
		where = append(where, "agent_id = ?")
		args = append(args, f.AgentID)
	}
	if !f.LiveAt.IsZero() {
		where = append(where, "revoked_at = 0 AND until_at > ?")
		args = append(args, ms(f.LiveAt))
	}
	rows, err := s.stmts.query(ctx, `SELECT `+ruleCols+` FROM rules WHERE `+strings.Join(where, " AND ")+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	defer rows.Close()
	var out []store.Rule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, fmt.Errorf("list rules: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	return out, nil
}

// RevokeRule implements store.Rules.
func (s *DB) RevokeRule(ctx context.Context, id, by string, at time.Time, rec store.AuditRecord) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("revoke rule %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE rules SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at = 0`, max(ms(at), 1), by, id)
	if err != nil {
		return fmt.Errorf("revoke rule %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM rules WHERE id = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("revoke rule %s: %w", id, err)
		}
		return store.ErrConflict
	}
	if _, err := appendAudit(ctx, s.stmts, tx, rec); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("revoke rule %s: %w", id, err)
	}
	return nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/store"
)

// ruleMigrations holds the standing rules. A rule's bounds are one JSON
// document; revoked_at is NULL while the rule stands.
var ruleMigrations = []migration{{1, `
CREATE TABLE rules (
	id TEXT COLLATE "C" PRIMARY KEY,
	created_by TEXT NOT NULL,
	agent_id TEXT NOT NULL,
	form_id TEXT NOT NULL,
	control_id TEXT NOT NULL,
	subject_type TEXT NOT NULL DEFAULT '',
	subject_id TEXT NOT NULL DEFAULT '',
	bounds TEXT NOT NULL,
	until_at TIMESTAMPTZ NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	revoked_at TIMESTAMPTZ,
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
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO rules (id, created_by, agent_id, form_id, control_id, subject_type, subject_id, bounds, until_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			r.ID, r.CreatedBy, r.AgentID, r.FormID, r.ControlID, r.SubjectType, r.SubjectID, string(doc), r.Until, r.CreatedAt); err != nil {
			if isUnique(err) {
				return store.ErrConflict
			}
			return fmt.Errorf("create rule %s: %w", r.ID, err)
		}
		_, err := appendAudit(ctx, tx, rec)
		return err
	})
}

const ruleCols = `id, created_by, agent_id, form_id, control_id, subject_type, subject_id, bounds, until_at, created_at, revoked_at, revoked_by`

func scanRule(sc interface{ Scan(...any) error }) (store.Rule, error) {
	var r store.Rule
	var doc string
	var revoked *time.Time
	if err := sc.Scan(&r.ID, &r.CreatedBy, &r.AgentID, &r.FormID, &r.ControlID, &r.SubjectType, &r.SubjectID, &doc, &r.Until, &r.CreatedAt, &revoked, &r.RevokedBy); err != nil {
		return store.Rule{}, err
	}
	r.Until, r.CreatedAt = r.Until.UTC(), r.CreatedAt.UTC()
	if revoked != nil {
		r.RevokedAt = revoked.UTC()
	}
	return r, r.SetRuleDocument([]byte(doc))
}

// Rule implements store.Rules.
func (s *DB) Rule(ctx context.Context, id string) (store.Rule, error) {
	r, err := scanRule(s.pool.QueryRow(ctx, `SELECT `+ruleCols+` FROM rules WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Rule{}, store.ErrNotFound
	}
	if err != nil {
		return store.Rule{}, fmt.Errorf("rule %s: %w", id, err)
	}
	return r, nil
}

// ListRules implements store.Rules.
func (s *DB) ListRules(ctx context.Context, f store.RuleFilter) ([]store.Rule, error) {
	where := []string{"true"}
	var args []any
	if f.CreatedBy != "" {
		args = append(args, f.CreatedBy)
		where = append(where, fmt.Sprintf("created_by = $%d", len(args)))
	}
	if f.AgentID != "" {
		args = append(args, f.AgentID)
		where = append(where, fmt.Sprintf("agent_id = $%d", len(args)))
	}
	if !f.LiveAt.IsZero() {
		args = append(args, f.LiveAt)
		where = append(where, fmt.Sprintf("revoked_at IS NULL AND until_at > $%d", len(args)))
	}
	rows, err := s.pool.Query(ctx, `SELECT `+ruleCols+` FROM rules WHERE `+strings.Join(where, " AND ")+` ORDER BY created_at, id`, args...)
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
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE rules SET revoked_at = $1, revoked_by = $2 WHERE id = $3 AND revoked_at IS NULL`, at, by, id)
		if err != nil {
			return fmt.Errorf("revoke rule %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM rules WHERE id = $1`, id).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrNotFound
			}
			if err != nil {
				return fmt.Errorf("revoke rule %s: %w", id, err)
			}
			return store.ErrConflict
		}
		_, err = appendAudit(ctx, tx, rec)
		return err
	})
}

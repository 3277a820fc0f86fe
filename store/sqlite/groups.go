package sqlite

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/store"
)

// groupMigrations holds the people's groups: one row per membership.
var groupMigrations = []migration{{1, `
CREATE TABLE person_groups (
	grp TEXT NOT NULL,
	principal_id TEXT NOT NULL,
	added_at INTEGER NOT NULL,
	PRIMARY KEY (grp, principal_id)
);
CREATE INDEX person_groups_principal ON person_groups(principal_id);
`}}

// Groups implements store.Store.
func (s *DB) Groups() store.Groups { return s }

// AddGroupMember implements store.Groups.
func (s *DB) AddGroupMember(ctx context.Context, m store.GroupMember) error {
	if err := store.CheckGroupName(m.Group); err != nil {
		return err
	}
	if m.PrincipalID == "" {
		return fmt.Errorf("%w: a group member needs a principal id", store.ErrInvalid)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO person_groups (grp, principal_id, added_at) VALUES (?, ?, ?)
		ON CONFLICT (grp, principal_id) DO NOTHING`, m.Group, m.PrincipalID, ms(m.AddedAt)); err != nil {
		return fmt.Errorf("add group member: %w", err)
	}
	return nil
}

// RemoveGroupMember implements store.Groups.
func (s *DB) RemoveGroupMember(ctx context.Context, group, principalID string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM person_groups WHERE grp = ? AND principal_id = ?`, group, principalID)
	if err != nil {
		return fmt.Errorf("remove group member: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// GroupMembers implements store.Groups.
func (s *DB) GroupMembers(ctx context.Context, group string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT principal_id FROM person_groups WHERE grp = ? ORDER BY added_at, principal_id`, group)
	if err != nil {
		return nil, fmt.Errorf("group members: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("group members: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// ListGroupMembers implements store.Groups.
func (s *DB) ListGroupMembers(ctx context.Context) ([]store.GroupMember, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT grp, principal_id, added_at FROM person_groups ORDER BY grp, added_at, principal_id`)
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	defer rows.Close()
	var out []store.GroupMember
	for rows.Next() {
		var m store.GroupMember
		var added int64
		if err := rows.Scan(&m.Group, &m.PrincipalID, &added); err != nil {
			return nil, fmt.Errorf("groups: %w", err)
		}
		m.AddedAt = fromMS(added)
		out = append(out, m)
	}
	return out, rows.Err()
}

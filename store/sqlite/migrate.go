package sqlite

import (
	"context"
	"fmt"
)

// migration is one schema step of a component. Versions of a component start
// at 1 and never change once released: a new schema is a new step.
type migration struct {
	version int
	sql     string
}

// components lists every component's migrations in the order they apply.
func components() []struct {
	name  string
	steps []migration
} {
	return []struct {
		name  string
		steps []migration
	}{
		{"core", coreMigrations},
		{"runs", runMigrations},
		{"flows", flowMigrations},
		{"proposals", proposalMigrations},
		{"controls", controlMigrations},
		{"screens", screenMigrations},
		{"cluster", clusterMigrations},
		{"oauth", oauthMigrations},
		{"notify", notifyMigrations},
		{"rules", ruleMigrations},
		{"asks", askMigrations},
		{"groups", groupMigrations},
		{"deadlines", deadlineMigrations},
	}
}

func (s *DB) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT NOT NULL,
		version INTEGER NOT NULL,
		PRIMARY KEY (component, version))`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, c := range components() {
		for _, m := range c.steps {
			if err := s.apply(ctx, c.name, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *DB) apply(ctx context.Context, component string, m migration) error {
	// Most opens find every step applied: check without the write lock so
	// many processes can open at once.
	var applied int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE component = ? AND version = ?`, component, m.version).Scan(&applied); err != nil {
		return fmt.Errorf("migrate %s %d: %w", component, m.version, err)
	}
	if applied > 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s %d: %w", component, m.version, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE component = ? AND version = ?`, component, m.version).Scan(&n); err != nil {
		return fmt.Errorf("migrate %s %d: %w", component, m.version, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migrate %s %d: %w", component, m.version, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (component, version) VALUES (?, ?)`, component, m.version); err != nil {
		return fmt.Errorf("migrate %s %d: %w", component, m.version, err)
	}
	return tx.Commit()
}

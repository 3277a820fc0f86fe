package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migration is one schema step of a component. Versions of a component start
// at 1 and never change once released: a new schema is a new step. The
// components and their versions are those of store/sqlite, step for step,
// so one version number means one schema on either backend.
type migration struct {
	version int
	sql     string
}

type component struct {
	name  string
	steps []migration
}

// components lists every component's migrations in the order they apply.
func components() []component {
	return []component{
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

// Keys of the advisory locks this package takes. Advisory locks are held
// per database, so stores in two schemas of one database share them; they
// only serialize short sections.
const (
	lockMigrate int64 = 0x6173_7365_6e74_0001 // "assent" · 1
	lockAudit   int64 = 0x6173_7365_6e74_0002 // "assent" · 2
)

// migrate applies the missing steps. Most opens find every step applied
// and take no lock; otherwise each step is applied in its own transaction
// holding the migration lock, after checking again that no other node has
// applied it meanwhile.
func (s *DB) migrate(ctx context.Context) error {
	applied, err := s.appliedSteps(ctx)
	if err != nil {
		return err
	}
	missing := false
	for _, c := range components() {
		for _, m := range c.steps {
			if !applied[stepKey{c.name, m.version}] {
				missing = true
			}
		}
	}
	if !missing {
		return nil
	}
	err = s.inTx(ctx, "migrate", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockMigrate); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			component TEXT NOT NULL,
			version INTEGER NOT NULL,
			applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
			PRIMARY KEY (component, version))`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, c := range components() {
		for _, m := range c.steps {
			if applied[stepKey{c.name, m.version}] {
				continue
			}
			if err := s.apply(ctx, c.name, m); err != nil {
				return err
			}
		}
	}
	return nil
}

type stepKey struct {
	component string
	version   int
}

// appliedSteps returns the steps recorded in schema_migrations, none when
// the table does not exist yet.
func (s *DB) appliedSteps(ctx context.Context) (map[stepKey]bool, error) {
	out := map[stepKey]bool{}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if !exists {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT component, version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k stepKey
		if err := rows.Scan(&k.component, &k.version); err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		out[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return out, nil
}

func (s *DB) apply(ctx context.Context, component string, m migration) error {
	what := fmt.Sprintf("migrate %s %d", component, m.version)
	return s.inTx(ctx, what, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockMigrate); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE component = $1 AND version = $2)`,
			component, m.version).Scan(&done); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (component, version) VALUES ($1, $2)`, component, m.version); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// Package sqlite is the embedded default store: one SQLite file under the
// data directory, in WAL mode, created and migrated when it is opened.
//
// Migrations are versioned per component (core, runs, flows, …) and applied
// in one transaction each, so a crash during an upgrade leaves the database at
// the previous version.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is a store.Store backed by SQLite.
type DB struct {
	db *sql.DB
}

// Open opens (creating if needed) the database file at path and brings its
// schema up to date.
func Open(ctx context.Context, path string) (*DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	// Characters that end or escape the path part of an SQLite URI are
	// percent-encoded, so any file name opens the file it names.
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	dsn := "file:" + escaped + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.SetMaxIdleConns(8)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &DB{db: db}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Kind reports "sqlite".
func (s *DB) Kind() string { return "sqlite" }

// SQL returns the underlying database handle, for packages that keep their
// own tables in this file.
func (s *DB) SQL() *sql.DB { return s.db }

// Close checkpoints the write-ahead log and closes the database.
func (s *DB) Close() error {
	_, _ = s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	return s.db.Close()
}

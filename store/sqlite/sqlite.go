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
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is a store.Store backed by SQLite.
type DB struct {
	db *sql.DB
}

// Open opens (creating if needed) the database file at path and brings its
// schema up to date. The file and its -wal and -shm companions are readable
// by the owner only (mode 0600).
func Open(ctx context.Context, path string) (*DB, error) {
	if err := restrictFile(path, true); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
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
	// SQLite gives new -wal and -shm files the database file's mode; these
	// may predate it.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := restrictFile(path+suffix, false); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	return s, nil
}

// restrictFile makes path readable and writable by its owner only,
// creating it empty first when create is set and it does not exist.
func restrictFile(path string, create bool) error {
	if create {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	err := os.Chmod(path, 0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return nil
	case errors.Is(err, fs.ErrPermission):
		// Another user's file (a CLI run by that user's peer): its mode
		// is its owner's to set.
		return nil
	}
	return err
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

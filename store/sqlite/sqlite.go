// Package sqlite is the embedded default store: one SQLite file under the
// data directory, in WAL mode, created and migrated when it is opened.
//
// A DB implements every part of store.Store on itself, so its accessors
// return the DB (Flows returns a view of the same file). The rules the
// parts share with other backends (bounds, legal moves) live in package
// store and are checked here inside the transaction that writes.
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

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is a store.Store backed by SQLite. It is safe for concurrent use.
type DB struct {
	db     *sql.DB
	events eventSignal // wakes followers of the event log
	stmts  *stmtCache  // statements of the queries run on every request
	ckpt   *checkpointer
}

var _ store.Store = (*DB)(nil)

// Principals returns s, which keeps principals and their tokens.
func (s *DB) Principals() store.Principals { return s }

// Sessions returns s, which keeps sign-in links and web sessions.
func (s *DB) Sessions() store.Sessions { return s }

// Settings returns s, which keeps named settings.
func (s *DB) Settings() store.Settings { return s }

// Audit returns s, which keeps the audit log.
func (s *DB) Audit() store.Audit { return s }

// Proposals returns s, which keeps command proposals.
func (s *DB) Proposals() store.Proposals { return s }

// Runs returns s, which keeps Runs, their Control journals, Traces and
// registered tools.
func (s *DB) Runs() store.Runs { return s }

// Flows returns the Flow kernel's store on this database.
func (s *DB) Flows() flow.Store { return flowStore{db: s.db, stmts: s.stmts} }

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
	// Commits never copy the log back into the database file: the
	// checkpointer does, off the path of every write (see checkpointer).
	q.Add("_pragma", "wal_autocheckpoint(0)")
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
	s := &DB{db: db, stmts: newStmtCache(db)}
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
	s.ckpt = startCheckpointer(db, checkpointEvery)
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

// Shared reports false: one node owns a SQLite database.
func (s *DB) Shared() bool { return false }

// SQL returns the underlying database handle, for packages that keep their
// own tables in this file.
func (s *DB) SQL() *sql.DB { return s.db }

// Close stops the checkpointer and closes the database. It does not wait
// for anyone: another process may still use the file (the server beside a
// CLI command), and a checkpoint that truncates the log would wait for that
// process's readers while holding its writers out. The last connection to
// the file to close, in any process, copies the log back and removes it.
func (s *DB) Close() error {
	s.ckpt.stop()
	return s.db.Close()
}

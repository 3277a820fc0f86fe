// Package postgres is the store.Store of assent on PostgreSQL, for
// deployments that want a database server or several assent nodes sharing
// one database. The embedded default remains store/sqlite; both keep the
// same schema semantics and pass the same conformance suite
// (store/storetest).
//
// A DB implements every part of store.Store on itself, on one pgxpool.Pool.
// The rules the parts share with other backends (bounds, legal moves) live
// in package store, run/journal and flow, and are checked here inside the
// transaction that writes:
//
//   - Writes to one Run (Control admissions and transitions, Trace appends)
//     first lock the Run's row with SELECT … FOR UPDATE, so concurrent
//     writers on any node are serialized per Run and the bounds hold
//     exactly. A batch touching several Runs locks them in id order.
//   - The Flow kernel's Update runs at the SERIALIZABLE isolation level.
//   - Audit appends take a transaction-scoped advisory lock, so sequence
//     numbers become visible in order and paging with AfterSeq never skips
//     a record.
//
// A transaction that fails with a serialization failure (SQLSTATE 40001)
// or a deadlock (40P01) is rolled back and run again from the start, a
// bounded number of times with jittered backoff: a function passed to the
// Flow store's Update may therefore run more than once, and must keep its
// effects to the transaction it is given.
//
// Migrations are versioned per component (core, runs, flows, proposals),
// with the component names and versions of store/sqlite. Each step is
// applied in its own transaction under an advisory lock, so nodes starting
// at once apply every step exactly once. Statements are prepared once per
// connection and reused (pgx's statement cache). Every transaction sends
// its BEGIN with its first statement, not in a round trip of its own. A
// control write, the
// transaction of every staged, applied or undone control, sends its BEGIN
// with its first batch and its COMMIT with its last: two round trips in
// all, and its lock is released one round trip after it is taken.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
)

// DB is a store.Store backed by PostgreSQL. It is safe for concurrent use.
type DB struct {
	pool *pgxpool.Pool
}

var _ store.Store = (*DB)(nil)

// Error codes of a store that cannot be opened. They are stable: scripts
// and operators may match them.
const (
	// CodeURLInvalid: the connection URL cannot be read.
	CodeURLInvalid = "store_url_invalid"
	// CodeUnreachable: no connection could be made to the server.
	CodeUnreachable = "store_unreachable"
	// CodeAuthFailed: the server refused the user or password.
	CodeAuthFailed = "store_auth_failed"
	// CodeDatabaseMissing: the database named in the URL does not exist.
	CodeDatabaseMissing = "store_database_missing"
	// CodeMigrationFailed: the schema could not be brought up to date.
	CodeMigrationFailed = "store_migration_failed"
)

// OpenError is a failure to open a PostgreSQL store. Its message starts
// with Code and never contains the password of the connection URL.
type OpenError struct {
	Code string
	// Message says what failed and what to do.
	Message string
	// Err is the underlying error; its text may name the password, so
	// Error does not include it verbatim.
	Err error
}

func (e *OpenError) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the underlying error.
func (e *OpenError) Unwrap() error { return e.Err }

// IsURL reports whether s is a PostgreSQL connection URL (postgres:// or
// postgresql://), the form Open takes.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the PostgreSQL database that rawURL names
// (postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=…; pgx's parameters,
// such as pool_max_conns and search_path, are accepted) and brings its
// schema up to date. Unless the URL says otherwise, the pool keeps up to
// DefaultPoolConns connections, at least DefaultPoolMinConns of them open,
// and runs statements in pgx's cached-statement mode. Errors are
// *OpenError.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	if !IsURL(rawURL) {
		return nil, &OpenError{Code: CodeURLInvalid,
			Message: fmt.Sprintf("%q is not a PostgreSQL URL; write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE", Redact(rawURL))}
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		var pe *pgconn.ParseConfigError
		detail := "it is malformed"
		if errors.As(err, &pe) && errors.Unwrap(pe) != nil {
			detail = scrub(errors.Unwrap(pe).Error(), rawURL)
		}
		return nil, &OpenError{Code: CodeURLInvalid, Err: err,
			Message: fmt.Sprintf("cannot read the PostgreSQL URL %s (%s); write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE", Redact(rawURL), detail)}
	}
	applyPoolDefaults(cfg, rawURL)
	return OpenConfig(ctx, cfg)
}

// DefaultPoolConns is the most connections a store opened by Open keeps
// when its URL has no pool_max_conns: four per CPU, and at least 16. pgx's
// own default (the number of CPUs, at least 4) leaves requests queueing
// for a connection while each waits on a commit; with more connections in
// flight PostgreSQL flushes the commits of several in one WAL write. Each
// node of a cluster counts its pool, plus one connection for its event
// follower, against the server's max_connections.
var DefaultPoolConns = max(16, 4*runtime.GOMAXPROCS(0))

// DefaultPoolMinConns is how many connections a store opened by Open keeps
// open when idle, unless its URL has pool_min_conns, so that the first
// requests after a quiet spell do not pay for a connection.
const DefaultPoolMinConns = 2

// applyPoolDefaults sets the pool's size and the statement mode where the
// URL leaves them to pgx.
func applyPoolDefaults(cfg *pgxpool.Config, rawURL string) {
	var q url.Values
	if u, err := url.Parse(rawURL); err == nil {
		q = u.Query()
	}
	if !q.Has("pool_max_conns") {
		cfg.MaxConns = int32(DefaultPoolConns)
	}
	if !q.Has("pool_min_conns") {
		cfg.MinConns = min(DefaultPoolMinConns, cfg.MaxConns)
	}
	if !q.Has("default_query_exec_mode") {
		// Each statement is prepared once per connection, then run by
		// name: one round trip, with no parse or plan on the server.
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	}
}

// OpenConfig is Open with a parsed pool configuration. A zero connect
// timeout becomes 10 seconds, so an unreachable server is reported rather
// than waited for.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config) (*DB, error) {
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	where := describe(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(err, where, cfg.ConnConfig.Password)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectError(err, where, cfg.ConnConfig.Password)
	}
	s := &DB{pool: pool}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, &OpenError{Code: CodeMigrationFailed, Err: err,
			Message: fmt.Sprintf("cannot bring the schema of %s up to date: %s; the user needs the right to create tables in the database", where, scrubPassword(err.Error(), cfg.ConnConfig.Password))}
	}
	return s, nil
}

// describe names the database a configuration reaches, without password.
func describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("database %q on %s:%d as user %q", c.Database, c.Host, c.Port, c.User)
}

func connectError(err error, where, password string) error {
	detail := scrubPassword(connectDetail(err), password)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return &OpenError{Code: CodeAuthFailed, Err: err,
				Message: fmt.Sprintf("PostgreSQL refused the user or password for %s; check the URL's user and password (or the server's pg_hba.conf)", where)}
		case "3D000": // invalid_catalog_name
			return &OpenError{Code: CodeDatabaseMissing, Err: err,
				Message: fmt.Sprintf("the %s does not exist; create it (createdb) or name another in the URL", where)}
		}
	}
	return &OpenError{Code: CodeUnreachable, Err: err,
		Message: fmt.Sprintf("cannot connect to %s: %s; check that PostgreSQL runs there and accepts connections", where, detail)}
}

// connectDetail is the reason of a failed connection on one line: pgx
// names the user and database on a first line (the message says them
// already) and gives one line per address tried, often the same twice
// (with and without TLS).
func connectDetail(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err.Error()
	}
	var lines []string
	for i, l := range strings.Split(ce.Error(), "\n") {
		l = strings.TrimSpace(l)
		if i == 0 {
			_, l, _ = strings.Cut(l, "`:")
			l = strings.TrimSpace(l)
		}
		if l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// Redact returns rawURL with its password replaced by "xxxxx", also when
// the URL does not parse.
func Redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	} else if err == nil {
		return rawURL
	}
	return scrub(rawURL, rawURL)
}

// scrub removes from msg the password of rawURL, found by hand so that a
// URL that does not parse is still redacted.
func scrub(msg, rawURL string) string {
	rest, ok := strings.CutPrefix(rawURL, "postgres://")
	if !ok {
		rest, _ = strings.CutPrefix(rawURL, "postgresql://")
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return msg
	}
	_, pw, ok := strings.Cut(rest[:at], ":")
	if !ok || pw == "" {
		return msg
	}
	msg = scrubPassword(msg, pw)
	if dec, err := url.PathUnescape(pw); err == nil {
		msg = scrubPassword(msg, dec)
	}
	return msg
}

func scrubPassword(msg, pw string) string {
	if pw == "" {
		return msg
	}
	return strings.ReplaceAll(msg, pw, "xxxxx")
}

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
func (s *DB) Flows() flow.Store { return flowStore{s} }

// Kind reports "postgres".
func (s *DB) Kind() string { return "postgres" }

// Shared reports true: several nodes may serve from one PostgreSQL
// database.
func (s *DB) Shared() bool { return true }

// Pool returns the connection pool, for packages that keep their own tables
// in this database.
func (s *DB) Pool() *pgxpool.Pool { return s.pool }

// Close closes every connection of the pool.
func (s *DB) Close() error {
	s.pool.Close()
	return nil
}

// Retries of a transaction that failed to serialize.
const (
	maxAttempts = 10
	backoffBase = 2 * time.Millisecond
	backoffMax  = 100 * time.Millisecond
)

// retryable reports whether err is a serialization failure or a deadlock,
// after which the whole transaction may be run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// backoff returns the pause before attempt (from 1): full jitter over an
// exponentially growing window, capped at backoffMax.
func backoff(attempt int) time.Duration {
	window := backoffBase << min(attempt, 10)
	if window > backoffMax || window <= 0 {
		window = backoffMax
	}
	return rand.N(window) + time.Millisecond
}

// inTx runs fn in a transaction with opts and commits it. When fn or the
// commit fails with a serialization failure or a deadlock, the
// transaction is rolled back and fn runs again, up to maxAttempts times.
// Any other error of fn is returned as it is, after rollback; errors of
// beginning and committing are wrapped with what, the operation's name.
func (s *DB) inTx(ctx context.Context, what string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.try(ctx, what, opts, fn)
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return err
		}
		t := time.NewTimer(backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// try runs fn once in a transaction whose BEGIN goes with its first
// statement (see lazyTx).
func (s *DB) try(ctx context.Context, what string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// A connection left inside a transaction is closed by Release
	// rather than reused.
	defer conn.Release()
	tx := &lazyTx{ctx: ctx, conn: conn, opts: opts}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// write runs fn in a READ COMMITTED transaction, with retries.
func (s *DB) write(ctx context.Context, what string, fn func(pgx.Tx) error) error {
	return s.inTx(ctx, what, pgx.TxOptions{}, fn)
}

// isUnique reports whether err is a unique violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// rowErr maps pgx.ErrNoRows to store.ErrNotFound and wraps any other
// error with what; nil stays nil.
func rowErr(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return fmt.Errorf("%s: %w", what, err)
}

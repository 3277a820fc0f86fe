package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps one prepared statement per query text for the life of
// the database, so that a query run on every request is compiled once per
// connection instead of once per run. Only queries written in the source
// (a bounded set) go through it.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

// stmt returns the prepared statement of query, preparing it the first
// time.
func (c *stmtCache) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

// exec runs query with args on the database.
func (c *stmtCache) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// execTx runs query with args inside tx. database/sql keeps the statement
// prepared on each connection it has run on.
func (c *stmtCache) execTx(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

// queryRow runs query, a constant text, with args on the database through
// its cached statement. A statement that cannot be prepared is run
// directly, so its error reaches the caller through the row.
func (c *stmtCache) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return c.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// query is queryRow for a query of several rows; the callers' query texts
// are few (built from a fixed set of conditions), so each is kept.
func (c *stmtCache) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

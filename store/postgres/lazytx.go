package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a pgx.Tx whose BEGIN is sent in one round trip with its first
// statement or batch (pgx's Batch.BeginTx), not in a round trip of its
// own: a transaction of n statements costs n+1 round trips with its
// COMMIT. A transaction that sends nothing costs none.
//
// Until the first statement's results are read to the end (the row
// scanned, the rows or the batch closed), the transaction is not begun on
// the client's side; every method first finishes them.
type lazyTx struct {
	ctx  context.Context
	conn *pgxpool.Conn
	opts pgx.TxOptions
	tx   pgx.Tx
	// first are the results of the batch that began the transaction,
	// while they are open.
	first pgx.BatchResults
	err   error
	// committed is set once commitWith committed the transaction.
	committed bool
}

var _ pgx.Tx = (*lazyTx)(nil)

// start sends b's statements after BEGIN, reads BEGIN's result and
// returns the batch's results; finish must run before anything else is
// sent.
func (l *lazyTx) start(ctx context.Context, queued []*pgx.QueuedQuery) pgx.BatchResults {
	b := &pgx.Batch{}
	b.BeginTx(l.opts)
	b.QueuedQueries = append(b.QueuedQueries, queued...)
	br := l.conn.SendBatch(ctx, b)
	l.first = br
	if _, err := br.Exec(); err != nil {
		l.finish()
		l.err = err
		return nil
	}
	return br
}

// finish closes the first batch's results, once, and takes the
// transaction they began.
func (l *lazyTx) finish() error {
	if l.first == nil {
		return l.err
	}
	br := l.first
	l.first = nil
	err := br.Close()
	if tx := br.Tx(); tx != nil {
		l.tx = tx
	}
	if err != nil && l.err == nil {
		l.err = err
	}
	return err
}

// begun returns the transaction, begun by a round trip of its own when
// no statement has begun it yet.
func (l *lazyTx) begun(ctx context.Context) (pgx.Tx, error) {
	l.finish()
	if l.tx != nil {
		return l.tx, nil
	}
	if l.err != nil {
		return nil, l.err
	}
	tx, err := l.conn.BeginTx(ctx, l.opts)
	if err != nil {
		l.err = err
		return nil, err
	}
	l.tx = tx
	return tx, nil
}

// fresh reports whether nothing has been sent yet, so the next statement
// carries BEGIN.
func (l *lazyTx) fresh() bool {
	return l.tx == nil && l.first == nil && l.err == nil
}

func (l *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if l.fresh() {
		br := l.start(ctx, []*pgx.QueuedQuery{{SQL: sql, Arguments: args}})
		if br == nil {
			return pgconn.CommandTag{}, l.err
		}
		tag, err := br.Exec()
		if ferr := l.finish(); err == nil {
			err = ferr
		}
		return tag, err
	}
	tx, err := l.begun(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

func (l *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if l.fresh() {
		br := l.start(ctx, []*pgx.QueuedQuery{{SQL: sql, Arguments: args}})
		if br == nil {
			return nil, l.err
		}
		rows, err := br.Query()
		if err != nil {
			l.finish()
			return nil, err
		}
		return &firstRows{Rows: rows, l: l}, nil
	}
	tx, err := l.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}

func (l *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if l.fresh() {
		br := l.start(ctx, []*pgx.QueuedQuery{{SQL: sql, Arguments: args}})
		if br == nil {
			return errRow{l.err}
		}
		return &firstRow{row: br.QueryRow(), l: l}
	}
	tx, err := l.begun(ctx)
	if err != nil {
		return errRow{err}
	}
	return tx.QueryRow(ctx, sql, args...)
}

func (l *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if l.fresh() && b.Len() > 0 {
		br := l.start(ctx, b.QueuedQueries)
		if br == nil {
			return errResults{l.err}
		}
		return &firstBatch{BatchResults: br, l: l}
	}
	tx, err := l.begun(ctx)
	if err != nil {
		return errResults{err}
	}
	return tx.SendBatch(ctx, b)
}

// Commit commits the transaction; one that sent nothing, or that
// commitWith committed, has nothing to commit.
func (l *lazyTx) Commit(ctx context.Context) error {
	if l.committed {
		return nil
	}
	if err := l.finish(); err != nil {
		return err
	}
	if l.tx == nil {
		return l.err
	}
	return l.tx.Commit(ctx)
}

// Rollback rolls the transaction back, when it was begun and not
// committed.
func (l *lazyTx) Rollback(ctx context.Context) error {
	if l.committed {
		return pgx.ErrTxClosed
	}
	l.finish()
	if l.tx == nil {
		return pgx.ErrTxClosed
	}
	return l.tx.Rollback(ctx)
}

// commitWith sends the statements of b followed by COMMIT in one round
// trip, after BEGIN when nothing was sent yet, and reads their results.
// A statement that fails aborts the transaction on the server, which
// skips the rest of the batch, COMMIT included; the transaction is then
// rolled back and the statement's error returned.
func (l *lazyTx) commitWith(ctx context.Context, b *pgx.Batch) error {
	if err := l.finish(); err != nil {
		return err
	}
	if l.err != nil {
		return l.err
	}
	fresh := l.tx == nil
	if fresh && b.Len() == 0 {
		l.committed = true
		return nil
	}
	full := &pgx.Batch{}
	if fresh {
		full.Queue(beginSQL(l.opts))
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	full.Queue(`COMMIT`)
	var br pgx.BatchResults
	if fresh {
		br = l.conn.SendBatch(ctx, full)
	} else {
		br = l.tx.SendBatch(ctx, full)
	}
	if err := execAll(br, full.Len()); err != nil {
		if fresh && l.conn.Conn().PgConn().TxStatus() != 'I' {
			// pgx did not begin this transaction and does not end it.
			_, _ = l.conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
		}
		return err
	}
	// pgx's transaction, when it began one, is over on the server: the
	// connection is idle again and goes back to the pool as it is.
	l.committed = true
	return nil
}

// execAll reads the results of a batch of n statements that return no
// rows and closes it, returning the first error.
func execAll(br pgx.BatchResults, n int) error {
	var err error
	for range n {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// beginSQL is the BEGIN statement of a transaction with options o.
func beginSQL(o pgx.TxOptions) string {
	sql := "BEGIN"
	if o.IsoLevel != "" {
		sql += " ISOLATION LEVEL " + string(o.IsoLevel)
	}
	if o.AccessMode != "" {
		sql += " " + string(o.AccessMode)
	}
	if o.DeferrableMode != "" {
		sql += " " + string(o.DeferrableMode)
	}
	return sql
}

func (l *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := l.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (l *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := l.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, cols, src)
}

func (l *lazyTx) LargeObjects() pgx.LargeObjects {
	tx, err := l.begun(l.ctx)
	if err != nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

func (l *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := l.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

func (l *lazyTx) Conn() *pgx.Conn { return l.conn.Conn() }

// firstRow is the row of the statement that began a lazyTx.
type firstRow struct {
	row pgx.Row
	l   *lazyTx
}

func (r *firstRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if ferr := r.l.finish(); err == nil {
		err = ferr
	}
	return err
}

// firstRows are the rows of the statement that began a lazyTx.
type firstRows struct {
	pgx.Rows
	l *lazyTx
}

func (r *firstRows) Close() {
	r.Rows.Close()
	r.l.finish()
}

func (r *firstRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	// pgx closes rows read to the end.
	r.l.finish()
	return false
}

func (r *firstRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	if r.l.first == nil && r.l.err != nil {
		return r.l.err
	}
	return nil
}

// firstBatch are the results of the batch that began a lazyTx.
type firstBatch struct {
	pgx.BatchResults
	l *lazyTx
}

func (b *firstBatch) Close() error {
	return b.l.finish()
}

// Tx returns nil: the lazyTx keeps the transaction.
func (b *firstBatch) Tx() pgx.Tx { return nil }

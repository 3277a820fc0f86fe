package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batchSender sends a batch of statements: a pgx.Tx or a pipe.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pipe is a READ COMMITTED transaction whose BEGIN travels in the same
// round trip as its first batch and whose COMMIT travels with its last:
// a transaction of two batches costs two round trips, not four, and the
// locks it takes are released one round trip sooner.
//
// A statement that fails aborts the transaction on the server, which then
// skips the statements after it in the same batch, COMMIT included; the
// transaction is rolled back when pipeWrite sees it still open.
type pipe struct {
	conn    *pgxpool.Conn
	begun   bool
	commit  bool // a batch carrying COMMIT was sent
	settled bool // that COMMIT was read and committed
}

// SendBatch sends b, after BEGIN when it is the transaction's first batch.
func (p *pipe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return p.send(ctx, b, false)
}

// SendFinal sends b followed by COMMIT, after BEGIN when it is the first
// batch. The caller reads b's results as from SendBatch; Close of the
// returned results reads the COMMIT. Nothing may be sent after it.
func (p *pipe) SendFinal(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return p.send(ctx, b, true)
}

func (p *pipe) send(ctx context.Context, b *pgx.Batch, final bool) pgx.BatchResults {
	if p.commit {
		return errResults{errors.New("pipelined transaction: a batch after COMMIT")}
	}
	n := b.Len()
	out := &pipeResults{p: p, n: n, final: final}
	full := &pgx.Batch{}
	if !p.begun {
		full.Queue(`BEGIN`)
		out.begin = true
		p.begun = true
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	if final {
		full.Queue(`COMMIT`)
		p.commit = true
	}
	out.br = p.conn.SendBatch(ctx, full)
	return out
}

// pipeResults are the results of one batch of a pipe: BEGIN's result, when
// it leads, is read before the caller's first, and COMMIT's, when it ends
// the batch, on Close, after the caller's results it left unread.
type pipeResults struct {
	p     *pipe
	br    pgx.BatchResults
	n     int // the caller's statements
	read  int
	begin bool
	final bool
	err   error
}

func (r *pipeResults) begun() error {
	if r.begin {
		r.begin = false
		if _, err := r.br.Exec(); err != nil {
			r.err = err
		}
	}
	return r.err
}

func (r *pipeResults) Exec() (pgconn.CommandTag, error) {
	if err := r.begun(); err != nil {
		return pgconn.CommandTag{}, err
	}
	r.read++
	return r.br.Exec()
}

func (r *pipeResults) Query() (pgx.Rows, error) {
	if err := r.begun(); err != nil {
		return nil, err
	}
	r.read++
	return r.br.Query()
}

func (r *pipeResults) QueryRow() pgx.Row {
	if err := r.begun(); err != nil {
		return errRow{err}
	}
	r.read++
	return r.br.QueryRow()
}

// Tx returns nil: the pipe, not pgx, keeps the transaction.
func (r *pipeResults) Tx() pgx.Tx { return nil }

func (r *pipeResults) Close() error {
	if r.br == nil {
		return r.err
	}
	defer func() { r.br = nil }()
	if err := r.begun(); err != nil {
		r.br.Close()
		return err
	}
	if r.final {
		// Read what the caller left unread, then COMMIT's result.
		for ; r.read < r.n; r.read++ {
			if _, err := r.br.Exec(); err != nil {
				r.br.Close()
				return err
			}
		}
		tag, err := r.br.Exec()
		if cerr := r.br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if tag.String() != "COMMIT" {
			// The server answers ROLLBACK to the COMMIT of an
			// aborted transaction.
			return errors.New("pipelined transaction: rolled back at commit")
		}
		r.p.settled = true
		return nil
	}
	return r.br.Close()
}

// errResults are the results of a batch that was not sent.
type errResults struct{ err error }

func (e errResults) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errResults) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errResults) QueryRow() pgx.Row                { return errRow(e) }
func (e errResults) Close() error                     { return e.err }
func (e errResults) Tx() pgx.Tx                       { return nil }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

// pipeWrite runs fn in a pipelined READ COMMITTED transaction and commits
// it, with the retries of inTx. fn sends its batches through the pipe; its
// last should go by SendFinal, or the commit takes a round trip of its
// own. When fn fails, or its COMMIT did not commit, the transaction is
// rolled back.
func (s *DB) pipeWrite(ctx context.Context, what string, fn func(*pipe) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tryPipe(ctx, what, fn)
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

func (s *DB) tryPipe(ctx context.Context, what string, fn func(*pipe) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// A connection left inside a transaction is closed by Release
	// rather than reused.
	defer conn.Release()
	p := &pipe{conn: conn}
	err = fn(p)
	if err == nil && p.begun && !p.commit {
		if _, cerr := conn.Exec(ctx, `COMMIT`); cerr != nil {
			err = fmt.Errorf("%s: %w", what, cerr)
		} else {
			p.settled = true
		}
	}
	if err == nil && p.begun && !p.settled {
		err = fmt.Errorf("%s: the transaction was not committed", what)
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		conn.Exec(rctx, `ROLLBACK`)
		cancel()
	}
	return err
}

// txQuerier runs statements one at a time or in batches: a pgx.Tx or a
// pipe.
type txQuerier interface {
	batchSender
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Query runs one statement in the pipe, as a batch of one.
func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := p.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs one statement in the pipe, as a batch of one.
func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := p.SendBatch(ctx, b)
	return &batchRow{row: br.QueryRow(), br: br}
}

// batchRows are the rows of a batch of one; closing them, or reading them
// to the end, closes the batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) closeBatch() {
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.closeBatch()
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.closeBatch()
	return false
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// batchRow is the row of a batch of one; scanning it closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

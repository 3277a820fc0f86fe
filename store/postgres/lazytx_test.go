package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/assent-run/assent/store/postgres/pgtest"
)

// TestLazyTx: a transaction sends BEGIN with its first statement, however
// that statement is sent, keeps what it wrote when it commits and nothing
// when it fails, and costs its statements plus one COMMIT in round trips
// (none when it sends nothing). The pool has one connection, so every case
// reuses it and would see a transaction an earlier one left open. It
// holds in each statement mode a URL may choose.
func TestLazyTx(t *testing.T) {
	u, _ := pgtest.URL(t)
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) { testLazyTx(t, u+"&default_query_exec_mode="+mode) })
	}
}

func testLazyTx(t *testing.T, u string) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	applyPoolDefaults(cfg, u)
	cfg.MaxConns, cfg.MinConns = 1, 1
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := &DB{pool: pool}
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS lazy_t`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE lazy_t (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	errStop := errors.New("stop")
	count := func(tx pgx.Tx) (int, error) {
		var n int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM lazy_t`).Scan(&n)
		return n, err
	}
	tests := []struct {
		name    string
		opts    pgx.TxOptions
		fn      func(tx pgx.Tx) error
		wantErr bool
		trips   int64
		rows    int // in lazy_t afterwards
	}{
		{"nothing sent", pgx.TxOptions{}, func(pgx.Tx) error { return nil }, false, 0, 0},
		{"one row read", pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			_, err := count(tx)
			return err
		}, false, 2, 0},
		{"exec first, then a read", pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO lazy_t VALUES (1)`); err != nil {
				return err
			}
			if n, err := count(tx); err != nil || n != 1 {
				return errors.Join(err, errors.New("the insert is not seen"))
			}
			return nil
		}, false, 3, 1},
		{"rows first, read to the end", pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT k FROM lazy_t`)
			if err != nil {
				return err
			}
			var ks []int
			for rows.Next() {
				var k int
				if err := rows.Scan(&k); err != nil {
					return err
				}
				ks = append(ks, k)
			}
			if err := rows.Err(); err != nil || len(ks) != 1 {
				return errors.Join(err, errors.New("want one row"))
			}
			_, err = tx.Exec(ctx, `INSERT INTO lazy_t VALUES (2)`)
			return err
		}, false, 3, 2},
		{"rows first, closed early", pgx.TxOptions{}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT k FROM lazy_t`)
			if err != nil {
				return err
			}
			rows.Close()
			_, err = tx.Exec(ctx, `INSERT INTO lazy_t VALUES (3)`)
			return err
		}, false, 3, 3},
		{"batch first", pgx.TxOptions{}, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO lazy_t VALUES (4)`)
			b.Queue(`INSERT INTO lazy_t VALUES (5)`)
			return tx.SendBatch(ctx, b).Close()
		}, false, 2, 5},
		{"failed first statement", pgx.TxOptions{}, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO lazy_t VALUES (1)`)
			return err
		}, true, 2, 5},
		{"failed batch rolls back its first rows", pgx.TxOptions{}, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO lazy_t VALUES (6)`)
			b.Queue(`INSERT INTO lazy_t VALUES (1)`)
			return tx.SendBatch(ctx, b).Close()
		}, true, 2, 5},
		{"function fails after a write", pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO lazy_t VALUES (7)`); err != nil {
				return err
			}
			return errStop
		}, true, 2, 5},
		{"row never scanned", pgx.TxOptions{}, func(tx pgx.Tx) error {
			tx.QueryRow(ctx, `INSERT INTO lazy_t VALUES (8) RETURNING k`)
			return nil
		}, false, 2, 6},
		{"commitWith, nothing sent before", pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO lazy_t VALUES (9)`)
			b.Queue(`INSERT INTO lazy_t VALUES (10)`)
			return tx.(*lazyTx).commitWith(ctx, b)
		}, false, 1, 8},
		{"commitWith after a read", pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
			if n, err := count(tx); err != nil || n != 8 {
				return errors.Join(err, errors.New("want 8 rows"))
			}
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO lazy_t VALUES (11)`)
			return tx.(*lazyTx).commitWith(ctx, b)
		}, false, 2, 9},
		{"commitWith nothing", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return tx.(*lazyTx).commitWith(ctx, &pgx.Batch{})
		}, false, 0, 9},
		{"commitWith a failing batch, nothing sent before", pgx.TxOptions{}, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO lazy_t VALUES (12)`)
			b.Queue(`INSERT INTO lazy_t VALUES (1)`)
			return tx.(*lazyTx).commitWith(ctx, b)
		}, true, 1, 9},
		{"commitWith a failing batch after a read", pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := count(tx); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO lazy_t VALUES (13)`)
			b.Queue(`INSERT INTO lazy_t VALUES (1)`)
			return tx.(*lazyTx).commitWith(ctx, b)
		}, true, 2, 9},
	}
	conns := pool.Stat().NewConnsCount()
	for _, tc := range tests {
		rt.n.Store(0)
		err := s.inTx(ctx, "lazy test", tc.opts, tc.fn)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
		}
		// A rollback is one more round trip, not counted.
		if n := rt.n.Load(); n != tc.trips && !(tc.wantErr && n == tc.trips+1) {
			t.Errorf("%s: %d round trips, want %d", tc.name, n, tc.trips)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM lazy_t`).Scan(&n); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n != tc.rows {
			t.Errorf("%s: %d rows, want %d", tc.name, n, tc.rows)
		}
	}
	// Every transaction, committed or not, left its connection outside
	// any transaction, so the pool kept it.
	if n := pool.Stat().NewConnsCount(); n != conns {
		t.Errorf("the pool opened %d connections more", n-conns)
	}
}

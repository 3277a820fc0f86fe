package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"wrapped", fmt.Errorf("flow store: %w", &pgconn.PgError{Code: "40001"}), true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"other error", errors.New("boom"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBackoffBounded(t *testing.T) {
	for attempt := 1; attempt <= 64; attempt++ {
		for range 50 {
			if d := backoff(attempt); d <= 0 || d > backoffMax+backoffBase {
				t.Fatalf("backoff(%d) = %v, want in (0, %v]", attempt, d, backoffMax+backoffBase)
			}
		}
	}
}

func TestScrub(t *testing.T) {
	tests := []struct{ msg, url, want string }{
		{"bad p@ss here", "postgres://u:p@ss@h/db", "bad xxxxx here"},
		{"bad p@ss here", "postgres://u:p%40ss@h/db", "bad xxxxx here"},
		{"nothing", "postgres://u@h/db", "nothing"},
		{"nothing", "postgres://h/db", "nothing"},
	}
	for _, tc := range tests {
		if got := scrub(tc.msg, tc.url); got != tc.want {
			t.Errorf("scrub(%q, %q) = %q, want %q", tc.msg, tc.url, got, tc.want)
		}
	}
}

func TestPoolDefaults(t *testing.T) {
	const base = "postgres://u:p@127.0.0.1:5432/db"
	tests := []struct {
		name     string
		url      string
		max, min int32
		mode     pgx.QueryExecMode
	}{
		{"defaults", base, int32(DefaultPoolConns), DefaultPoolMinConns, pgx.QueryExecModeCacheStatement},
		{"max from the URL", base + "?pool_max_conns=3", 3, DefaultPoolMinConns, pgx.QueryExecModeCacheStatement},
		{"max below the default min", base + "?pool_max_conns=1", 1, 1, pgx.QueryExecModeCacheStatement},
		{"min from the URL", base + "?pool_min_conns=5", int32(DefaultPoolConns), 5, pgx.QueryExecModeCacheStatement},
		{"mode from the URL", base + "?default_query_exec_mode=exec", int32(DefaultPoolConns), DefaultPoolMinConns, pgx.QueryExecModeExec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			applyPoolDefaults(cfg, tc.url)
			if cfg.MaxConns != tc.max || cfg.MinConns != tc.min || cfg.ConnConfig.DefaultQueryExecMode != tc.mode {
				t.Errorf("max %d, min %d, mode %v; want %d, %d, %v", cfg.MaxConns, cfg.MinConns, cfg.ConnConfig.DefaultQueryExecMode, tc.max, tc.min, tc.mode)
			}
		})
	}
	if DefaultPoolConns < 16 {
		t.Errorf("DefaultPoolConns %d, want at least 16", DefaultPoolConns)
	}
}

package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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

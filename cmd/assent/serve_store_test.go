package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/assent-run/assent/store/postgres/pgtest"
)

func TestStoreURLPrecedence(t *testing.T) {
	tests := []struct {
		name, flag, env, want string
	}{
		{"neither: SQLite", "", "", ""},
		{"environment", "", "postgres://e/db", "postgres://e/db"},
		{"flag wins", "postgres://f/db", "postgres://e/db", "postgres://f/db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ASSENT_STORE", tc.env)
			if got := storeURL(tc.flag); got != tc.want {
				t.Errorf("storeURL(%q) with ASSENT_STORE=%q = %q, want %q", tc.flag, tc.env, got, tc.want)
			}
		})
	}
}

// TestServeStoreRefused: a --store that is not a PostgreSQL URL, or a
// database that cannot be reached, stops serve with exit 1 and a coded
// message that does not show the password.
func TestServeStoreRefused(t *testing.T) {
	const secret = "hunter2-secret"
	tests := []struct {
		name, store, code string
	}{
		{"not PostgreSQL", "mysql://u:" + secret + "@127.0.0.1/db", "store_url_invalid"},
		{"malformed", "postgres://u:" + secret + "@127.0.0.1:port/db", "store_url_invalid"},
		{"unreachable", "postgres://u:" + secret + "@127.0.0.1:1/db", "store_unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ASSENT_STORE", "")
			var out, errw strings.Builder
			code := executeContext(context.Background(), []string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--store", tc.store},
				strings.NewReader(""), &out, &errw)
			if code != exitRefused || !strings.Contains(errw.String(), tc.code+": ") {
				t.Errorf("exit %d, stderr %q; want %d and %s", code, errw.String(), exitRefused, tc.code)
			}
			if strings.Contains(errw.String()+out.String(), secret) {
				t.Errorf("the password was printed: %q", errw.String())
			}
		})
	}
}

// TestServePostgres serves on PostgreSQL twice, each time with a new data
// directory: the second start finds the owner and agent the first made, so
// the state is in the database, not in the data directory.
func TestServePostgres(t *testing.T) {
	u, _ := pgtest.URL(t)
	t.Setenv("ASSENT_STORE", "")
	first := serveInProcess(t, "--data", t.TempDir(), "--store", u)
	if !strings.Contains(first.out.String(), "store: postgres") || first.token == "" {
		t.Fatalf("first start:\n%s", first.out.String())
	}
	resp, err := http.Get(first.base + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || h["store"] != "postgres" {
		t.Errorf("health = %v, %v; want store postgres", h, err)
	}
	if code := first.stop(); code != 0 {
		t.Fatalf("first serve exited %d", code)
	}
	// The environment variable alone selects PostgreSQL.
	t.Setenv("ASSENT_STORE", u)
	second := serveInProcess(t, "--data", t.TempDir())
	if second.token != "" || !strings.Contains(second.out.String(), "store: postgres") {
		t.Errorf("second start on the same database showed a new agent token or another store:\n%s", second.out.String())
	}
}

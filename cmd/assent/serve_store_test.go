package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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

// TestTokenCommandsOnPostgres: the token commands work on the store a
// PostgreSQL server uses, with no data directory on this machine.
func TestTokenCommandsOnPostgres(t *testing.T) {
	u, _ := pgtest.URL(t)
	t.Setenv("ASSENT_STORE", "")
	run := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := executeContext(context.Background(), args, strings.NewReader(""), &out, &errw)
		return code, out.String(), errw.String()
	}
	missing := filepath.Join(t.TempDir(), "never-made")
	if code, out, errOut := run("token", "create", "--data", missing, "--store", u, "--kind", "human", "--name", "alice"); code != 0 || !strings.Contains(out, "/signin/") {
		t.Fatalf("token create on PostgreSQL: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("ASSENT_STORE", u)
	code, out, errOut := run("token", "list", "--data", missing, "--json")
	if code != 0 || !strings.Contains(out, `"alice"`) {
		t.Fatalf("token list through ASSENT_STORE: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("token", "link", "alice", "--data", missing); code != 0 || !strings.Contains(out, "/signin/") {
		t.Fatalf("token link: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("the token commands made a data directory though the store is PostgreSQL")
	}
	// A --store that is not a PostgreSQL URL is refused with its code.
	t.Setenv("ASSENT_STORE", "")
	if code, _, errOut := run("token", "list", "--store", "mysql://x"); code == 0 || !strings.Contains(errOut, "store_url_invalid") {
		t.Fatalf("token list with a bad --store: exit %d, %s", code, errOut)
	}
}

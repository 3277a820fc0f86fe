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
	file := filepath.Join(t.TempDir(), "store-url")
	if err := os.WriteFile(file, []byte("postgres://u:pw@file/db\n# comment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, flag, file, env, want string
	}{
		{"neither: SQLite", "", "", "", ""},
		{"environment", "", "", "postgres://e/db", "postgres://e/db"},
		{"flag wins", "postgres://f/db", "", "postgres://e/db", "postgres://f/db"},
		{"file wins over the environment", "", file, "postgres://e/db", "postgres://u:pw@file/db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ASSENT_STORE", tc.env)
			got, err := storeFlags{url: tc.flag, file: tc.file}.resolve()
			if err != nil || got != tc.want {
				t.Errorf("resolve(--store %q --store-file %q) with ASSENT_STORE=%q = %q, %v; want %q", tc.flag, tc.file, tc.env, got, err, tc.want)
			}
		})
	}
}

// TestStorePasswordOnCommandLineRefused: every command that takes --store
// refuses a URL carrying a password, since any process on the machine can
// read a command line, and names the ways that keep it off the line. The
// password is not echoed.
func TestStorePasswordOnCommandLineRefused(t *testing.T) {
	const secret = "hunter2-secret"
	urls := []string{
		"postgres://u:" + secret + "@127.0.0.1:5432/db",
		"postgresql://u:" + secret + "@127.0.0.1/db?sslmode=disable",
		"postgres://u@127.0.0.1/db?password=" + secret,
		"postgres://u:" + secret + "@127.0.0.1:port/db",
	}
	commands := [][]string{
		{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"},
		{"token", "list", "--data", t.TempDir()},
		{"token", "create", "--data", t.TempDir(), "--kind", "agent", "--name", "a"},
		{"token", "revoke", "x", "--data", t.TempDir()},
		{"token", "link", "owner", "--data", t.TempDir()},
		{"mcp", "--data", t.TempDir()},
		{"bench", "--only", "nothing"},
	}
	t.Setenv("ASSENT_STORE", "")
	for _, u := range urls {
		for _, args := range commands {
			var out, errw strings.Builder
			code := executeContext(context.Background(), append(append([]string{}, args...), "--store", u), strings.NewReader(""), &out, &errw)
			msg := errw.String()
			if code != exitUsage || !strings.Contains(msg, "secret_on_command_line") {
				t.Errorf("%v --store %s: exit %d, stderr %q; want %d secret_on_command_line", args, u, code, msg, exitUsage)
			}
			for _, want := range []string{"ASSENT_STORE", "PGPASSFILE", "--store-file"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%v: the refusal does not name %s: %q", args, want, msg)
				}
			}
			if strings.Contains(msg+out.String(), secret) {
				t.Errorf("%v: the password was printed", args)
			}
		}
	}
	// Without a password the URL is taken (a PGPASSFILE supplies it).
	if got, err := (storeFlags{url: "postgres://u@127.0.0.1/db"}).resolve(); err != nil || got == "" {
		t.Errorf("a URL without a password: %q, %v", got, err)
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
			t.Setenv("ASSENT_STORE", tc.store)
			var out, errw strings.Builder
			code := executeContext(context.Background(), []string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"},
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
	file := filepath.Join(t.TempDir(), "store-url")
	if err := os.WriteFile(file, []byte(u+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := serveInProcess(t, "--data", t.TempDir(), "--store-file", file)
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
	file := filepath.Join(t.TempDir(), "store-url")
	if err := os.WriteFile(file, []byte(u+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("token", "create", "--data", missing, "--store-file", file, "--kind", "human", "--name", "alice"); code != 0 || !strings.Contains(out, "/signin/") {
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

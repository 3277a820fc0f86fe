package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assent-run/assent/notify"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store/sqlite"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errw strings.Builder
	code := executeContext(context.Background(), args, strings.NewReader(""), &out, &errw)
	return code, out.String(), errw.String()
}

func TestWebhookAddListRemove(t *testing.T) {
	t.Setenv("ASSENT_STORE", "")
	dir := t.TempDir()
	secret := notify.NewSecret()
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, "webhook", "add", "--data", dir, "--url", "https://hooks.example.com/a", "--secret-file", file); code != 0 || !strings.Contains(out, "Added webhook wh_") {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	code, out, _ := runCLI(t, "webhook", "list", "--data", dir, "--json")
	var ws []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &ws) != nil || len(ws) != 1 || ws[0]["url"] != "https://hooks.example.com/a" {
		t.Fatalf("list: %d %s", code, out)
	}
	if strings.Contains(out, secret) {
		t.Error("list printed the secret")
	}
	for name, args := range map[string][]string{
		"bad secret":      {"--url", "https://h.example/a", "--secret-file", os.DevNull},
		"no secret":       {"--url", "https://h.example/a"},
		"bad url":         {"--url", "ftp://h.example/a", "--secret-file", file},
		"password in url": {"--url", "https://u:pw@h.example/a", "--secret-file", file},
		"missing file":    {"--url", "https://h.example/a", "--secret-file", filepath.Join(dir, "nope")},
	} {
		if code, _, errs := runCLI(t, append([]string{"webhook", "add", "--data", dir}, args...)...); code == 0 {
			t.Errorf("%s: accepted (%q)", name, errs)
		}
	}
	id, _ := ws[0]["id"].(string)
	if code, _, errs := runCLI(t, "webhook", "remove", id, "--data", dir); code != 0 {
		t.Fatalf("remove: %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "webhook", "remove", id, "--data", dir); code == 0 || !strings.Contains(errs, "not_found") {
		t.Errorf("second remove: %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "webhook", "replay", "msg_nope", "--data", dir); code == 0 || !strings.Contains(errs, "not_found") {
		t.Errorf("replay unknown: %d %q", code, errs)
	}
}

func TestTokenCreateEmail(t *testing.T) {
	t.Setenv("ASSENT_STORE", "")
	dir := t.TempDir()
	code, out, errs := runCLI(t, "token", "create", "--data", dir, "--kind", "human", "--name", "ada", "--email", "ada@example.com", "--json")
	if code != 0 {
		t.Fatalf("create: %d %q", code, errs)
	}
	var v struct{ Principal struct{ ID string } }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if addr, err := notifypart.Email(context.Background(), db.Settings(), v.Principal.ID); err != nil || addr != "ada@example.com" {
		t.Errorf("stored address = %q, %v", addr, err)
	}
	for _, args := range [][]string{
		{"--kind", "human", "--name", "bob", "--email", "not an address"},
		{"--kind", "agent", "--name", "bot", "--email", "bot@example.com"},
	} {
		if code, _, _ := runCLI(t, append([]string{"token", "create", "--data", dir}, args...)...); code == 0 {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestServeSMTPPasswordRefused(t *testing.T) {
	const secret = "hunter2-secret"
	code, out, errs := runCLI(t, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--smtp", "smtp://u:"+secret+"@127.0.0.1:25", "--mail-from", "a@example.com")
	if code != exitUsage || !strings.Contains(errs, "secret_on_command_line") || !strings.Contains(errs, "ASSENT_SMTP_PASSWORD") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if strings.Contains(out+errs, secret) {
		t.Error("the password was printed")
	}
	if code, _, errs := runCLI(t, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--smtp", "smtp://127.0.0.1:25"); code == 0 || !strings.Contains(errs, "--mail-from") {
		t.Errorf("--smtp without --mail-from: %d %q", code, errs)
	}
}

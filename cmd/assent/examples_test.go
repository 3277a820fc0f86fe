package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/store"
)

// exampleSkips are the example lines that cannot run as one command
// against a server, and why. Every other "assent …" line of every --help
// must run.
var exampleSkips = map[string]string{
	"assent serve":               "starts a server of its own; the test runs against serve --demo",
	"assent mcp":                 "serves MCP on stdin until it closes (TestMCPStdio* cover it)",
	"assent bench":               "a whole-system benchmark that runs for tens of seconds",
	"assent run control claim":   "runs inside a Run, with that Run's own token",
	"assent run control handled": "runs inside a Run, with that Run's own token",
	"assent run control failed":  "runs inside a Run, with that Run's own token",
	"assent trace emit --kind":   "runs inside a Run: the Run and token come from its environment",
}

// exampleLines walks the command tree and returns every Example line that
// starts with "assent ", in the order a reader meets them (a command before
// its subcommands).
func exampleLines(cmd *cobra.Command) []string {
	var out []string
	for _, line := range strings.Split(cmd.Example, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "   #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if i := strings.Index(line, " | "); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasPrefix(line, "assent ") {
			out = append(out, line)
		}
	}
	for _, sub := range cmd.Commands() {
		out = append(out, exampleLines(sub)...)
	}
	return out
}

// shellWords splits a line as a POSIX shell would for simple quoting:
// single quotes, double quotes with backslash escapes, and spaces.
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch {
			case r == '"':
				quote = 0
			case r == '\\' && i+1 < len(rs) && strings.ContainsRune(`"\$`, rs[i+1]):
				i++
				cur.WriteRune(rs[i])
			default:
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`assent a b`, []string{"assent", "a", "b"}},
		{`x --value '"pro"'`, []string{"x", "--value", `"pro"`}},
		{`x --summary "3 of 10" --data '{"completed":3}'`, []string{"x", "--summary", "3 of 10", "--data", `{"completed":3}`}},
		{`x "a \"b\""  ''`, []string{"x", `a "b"`, ""}},
	} {
		got, err := shellWords(tc.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := shellWords(`x 'open`); err == nil {
		t.Error("an unclosed quote was accepted")
	}
}

// TestHelpExamplesRun runs every "assent …" line of every command's --help
// against a fresh "assent serve --demo", as a newcomer would paste it: the
// fixture adds only --url, --token and --data, and fills in the ids an
// example marks as elided with "…".
func TestHelpExamplesRun(t *testing.T) {
	t.Chdir("../..") // the examples name files relative to the repository
	cwd, _ := os.Getwd()
	dataDir := t.TempDir()
	s := serveInProcess(t, "--demo", "--data", dataDir)
	// Runs outlive the server that started them: stop them first, on
	// failure too.
	t.Cleanup(func() {
		for _, id := range []string{demoPlayerRun, "deploy-staging"} {
			execute([]string{"run", "kill", id, "--url", s.base, "--token-file", s.tokenFile}, strings.NewReader(""), new(bytes.Buffer), new(bytes.Buffer))
		}
	})

	// Values for the ids the examples elide.
	fills := map[string]func() string{
		"asnt_…": func() string { return s.token },
		"apr-…": func() string {
			out := runOK(t, s, "flow", "prescribe", demoExpense, "--json")
			return regexp.MustCompile(`apr-[0-9a-f]+`).FindString(out)
		},
		"sha256:611240d8…": func() string {
			p, err := flow.Load(mustRead(t, "examples/flows/deployment.json"), flow.NewInventory("0.1.0"))
			if err != nil {
				t.Fatal(err)
			}
			return p.Fingerprint()
		},
		"prx-3f1c…": func() string {
			runOK(t, s, "flow", "start", "expense-approval", "--phase", "draft", "--id", "exp-prx", "--fact", "expense.amount=120.00 EUR", "--objective", "expense-paid")
			out := runOK(t, s, "flow", "prescribe", "exp-prx")
			return regexp.MustCompile(`prx-[0-9a-f]+`).FindString(out)
		},
		"p_0123456789abcdef0123": func() string {
			db := openTestStore(t, s.dir)
			_, p, err := auth.IssueToken(context.Background(), db, store.KindAgent, "old-planner", nil, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return p.ID
		},
		"/etc/assent/webhook-secret": func() string {
			file := filepath.Join(t.TempDir(), "webhook-secret")
			if err := os.WriteFile(file, []byte(notify.NewSecret()+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return file
		},
		"wh_0123456789abcdef0123": func() string {
			db := openTestStore(t, s.dir)
			w := store.Webhook{ID: auth.NewID("wh_"), URL: "https://hooks.example.com/old", Secret: notify.NewSecret(), CreatedAt: time.Now()}
			if err := db.Notify().AddWebhook(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			return w.ID
		},
		"msg_0123456789abcdef01234567": func() string {
			// A dead letter: the server finds the message's webhook gone.
			db, ctx, now := openTestStore(t, s.dir), context.Background(), time.Now()
			m := store.OutboxMessage{ID: auth.NewID("msg_"), Channel: "webhook:wh_gone", Payload: []byte(`{}`), CreatedAt: now, NextAt: now}
			if _, err := db.Notify().EnqueueMessages(ctx, []store.OutboxMessage{m}); err != nil {
				t.Fatal(err)
			}
			testwait.Eventually(t, 10*time.Second, func() bool {
				dead, err := db.Notify().ListMessages(ctx, store.MessageDead, 0)
				return err == nil && slices.ContainsFunc(dead, func(d store.OutboxMessage) bool { return d.ID == m.ID })
			}, "a dead letter")
			return m.ID
		},
	}
	// Values already made, except principals, webhooks and dead letters:
	// each revoke, remove or replay example needs its own.
	fresh := map[string]bool{"p_0123456789abcdef0123": true, "wh_0123456789abcdef0123": true, "msg_0123456789abcdef01234567": true}
	filled := map[string]string{}

	root := newRootCmd(&cli{in: strings.NewReader(""), out: new(bytes.Buffer), err: new(bytes.Buffer)})
	lines := exampleLines(root)
	if len(lines) < 40 {
		t.Fatalf("only %d example lines found", len(lines))
	}
	ran := 0
	for _, line := range lines {
		if reason := skipReason(line); reason != "" {
			t.Logf("skip %s: %s", line, reason)
			continue
		}
		for ph, fill := range fills {
			if strings.Contains(line, ph) {
				if _, ok := filled[ph]; !ok || fresh[ph] {
					filled[ph] = fill()
				}
				line = strings.ReplaceAll(line, ph, filled[ph])
			}
		}
		if strings.Contains(line, "…") {
			t.Errorf("%s: an elided value the test cannot fill", line)
			continue
		}
		line = strings.ReplaceAll(line, "http://127.0.0.1:7410", s.base)
		words, err := shellWords(line)
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		args := withFixtureFlags(root, words[1:], s)
		// The scripted agent would wait for a person; nobody decides here.
		if len(args) > 1 && args[0] == "demo" && args[1] == "agent" {
			args = append(args, "--no-wait")
		}
		code, out, errs := runExample(args)
		for retry := time.Now().Add(15 * time.Second); code != 0 && transient(errs) && time.Now().Before(retry); {
			time.Sleep(100 * time.Millisecond)
			code, out, errs = runExample(args)
		}
		ran++
		if code != 0 {
			t.Errorf("%s\n  exit %d\n  stdout: %s\n  stderr: %s", line, code, clip(out, 600), errs)
		}
	}
	t.Logf("%d example lines ran from %s", ran, cwd)
}

// skipReason returns why line is not run, or "".
func skipReason(line string) string {
	best := ""
	for prefix := range exampleSkips {
		if (line == prefix || strings.HasPrefix(line, prefix+" ")) && len(prefix) > len(best) {
			best = prefix
		}
	}
	return exampleSkips[best]
}

// transient reports a refusal that only asks to try again shortly: a Run
// that is still starting or still finishing.
func transient(stderr string) bool {
	return strings.Contains(stderr, "endpoint_not_ready") || strings.Contains(stderr, "not_terminal")
}

// withFixtureFlags adds --url and --token, or --data, to a command that has
// those flags and was not given them.
func withFixtureFlags(root *cobra.Command, args []string, s *served) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		return args
	}
	has := func(flag string) bool {
		for _, a := range args {
			if a == "--"+flag || strings.HasPrefix(a, "--"+flag+"=") {
				return true
			}
		}
		return false
	}
	out := append([]string{}, args...)
	if cmd.Flags().Lookup("data") != nil && cmd.Flags().Lookup("url") == nil && !has("data") {
		out = append(out, "--data", s.dir)
	}
	if cmd.Flags().Lookup("url") != nil && !has("url") && !has("data") {
		out = append(out, "--url", s.base)
	}
	if cmd.Flags().Lookup("token") != nil && !has("token") && !has("data") {
		out = append(out, "--token-file", s.tokenFile)
	}
	return out
}

func runExample(args []string) (int, string, string) {
	var out, errw bytes.Buffer
	code := executeContext(context.Background(), args, strings.NewReader(""), &out, &errw)
	return code, out.String(), errw.String()
}

// runOK runs a command against s and fails the test unless it succeeds.
func runOK(t *testing.T, s *served, args ...string) string {
	t.Helper()
	code, out, errs := runExample(append(args, "--url", s.base, "--token-file", s.tokenFile))
	if code != 0 {
		t.Fatalf("%v: exit %d: %s %s", args, code, out, errs)
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openTestStore opens the store of a data directory a server is using.
func openTestStore(t *testing.T, dir string) store.Store {
	t.Helper()
	db, err := openStore(context.Background(), dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

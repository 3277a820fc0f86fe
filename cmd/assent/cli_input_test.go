package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/store"
)

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"pro", "pro"},
		{`"pro"`, "pro"},
		{`"42"`, "42"},
		{"42", 42.0},
		{"-1.5", -1.5},
		{"true", true},
		{"null", nil},
		{`{"a":1}`, map[string]any{"a": 1.0}},
		{`["a"]`, []any{"a"}},
		{"Ada King", "Ada King"},
		{"", ""},
		{`say "hi"`, `say "hi"`},
	} {
		got, err := parseValue(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseValue(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"{not json", "[1,", " {\"a\":}"} {
		_, err := parseValue(bad)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(ee.msg, "invalid_value") {
			t.Errorf("parseValue(%q) = %v; want a usage error with invalid_value", bad, err)
		}
	}
}

func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"pro", `"pro"`, "42", "null", `{"a":[1,2]}`, "[", "{", " ", "\x00", `"unterminated`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseValue(s)
		if err != nil {
			if tr := strings.TrimSpace(s); !strings.HasPrefix(tr, "{") && !strings.HasPrefix(tr, "[") {
				t.Fatalf("parseValue(%q) refused text that does not start like JSON: %v", s, err)
			}
			return
		}
		if !json.Valid([]byte(s)) && v != s {
			t.Fatalf("parseValue(%q) = %#v; text that is not JSON must stay itself", s, v)
		}
	})
}

func TestServerURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:7410", "http://127.0.0.1:7410"},
		{"http://127.0.0.1:7410/", "http://127.0.0.1:7410"},
		{"https://assent.example.com", "https://assent.example.com"},
		{"https://example.com/assent/", "https://example.com/assent"},
		{" localhost:8080 ", "http://localhost:8080"},
		{"[::1]:7410", "http://[::1]:7410"},
	} {
		got, err := serverURL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("serverURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "ftp://host", "http://", "http://[::1", "http://user:pw@host", "host:99999", "host:port", "http://h/?q=1", "://x"} {
		_, err := serverURL(bad)
		var ee *exitError
		if !errors.As(err, &ee) || !strings.HasPrefix(ee.msg, "bad_url: ") {
			t.Errorf("serverURL(%q) = %v; want bad_url", bad, err)
		}
	}
}

func FuzzServerURL(f *testing.F) {
	for _, s := range []string{"127.0.0.1:7410", "http://h", "https://h:1/p", "[::1", "%zz", "http://a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := serverURL(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			t.Fatalf("serverURL(%q) = %q", s, u)
		}
		if again, err := serverURL(u); err != nil || again != u {
			t.Fatalf("serverURL is not stable on %q: %q, %v", u, again, err)
		}
	})
}

// TestSelfInvocation: the printed command names something that exists: a
// stable binary by its absolute path, a go run binary as go run in the
// module.
func TestSelfInvocation(t *testing.T) {
	root, _ := filepath.Abs("../..")
	cache := t.TempDir()
	t.Setenv("GOCACHE", cache)
	tmpExe := filepath.Join(os.TempDir(), "go-build123456", "b001", "exe", "assent")
	cachedExe := filepath.Join(cache, "0a", "0a1b-d", "assent")
	other := t.TempDir()
	goBin := goCommand()
	for _, tc := range []struct {
		name, exe, wd string
		wantName      string
		wantArgs      []string
		wantShort     string
	}{
		{"installed binary", "/usr/local/bin/assent-test-absent", root, "/usr/local/bin/assent-test-absent", nil, "/usr/local/bin/assent-test-absent"},
		{"go run in the module", tmpExe, root, goBin, []string{"-C", root, "run", "./cmd/assent"}, "go run ./cmd/assent"},
		{"go run from a subdirectory", tmpExe, filepath.Join(root, "cmd", "assent"), goBin, []string{"-C", root, "run", "./cmd/assent"}, "go -C " + shellWord(root) + " run ./cmd/assent"},
		{"go run cached", cachedExe, root, goBin, []string{"-C", root, "run", "./cmd/assent"}, "go run ./cmd/assent"},
		{"go run outside the module", tmpExe, other, tmpExe, nil, shellWord(tmpExe)},
	} {
		inv := self(tc.exe, tc.wd)
		name, args := inv.command()
		if name != tc.wantName || !reflect.DeepEqual(args, append([]string{}, tc.wantArgs...)) || inv.short != tc.wantShort {
			t.Errorf("%s: %q %q short %q; want %q %q short %q", tc.name, name, args, inv.short, tc.wantName, tc.wantArgs, tc.wantShort)
		}
	}
	inv := self(tmpExe, root)
	if name, args := inv.command("mcp", "--url", "http://h"); name != goBin || strings.Join(args, " ") != "-C "+root+" run ./cmd/assent mcp --url http://h" {
		t.Errorf("command = %q %q", name, args)
	}
	if got := inv.shell("demo", "agent", "--token", "a b"); got != "go run ./cmd/assent demo agent --token 'a b'" {
		t.Errorf("shell = %q", got)
	}
}

// TestWelcomeSecondStart: with no token known, the configuration holds a
// clear placeholder, never an HTML-escaped fake token, and says how to make
// a token.
func TestWelcomeSecondStart(t *testing.T) {
	var b bytes.Buffer
	boot := auth.Bootstrap{Owner: store.Principal{Name: "owner"}, Agent: store.Principal{Name: "agent"}}
	printWelcome(&b, welcome{base: "http://127.0.0.1:7410", dir: "/srv/assent", storeKind: "sqlite", link: "http://127.0.0.1:7410/signin/x",
		boot: boot, demo: true, self: invocation{name: "/opt/assent", short: "/opt/assent"}})
	out := b.String()
	for _, want := range []string{
		"/opt/assent token create --kind agent --name NAME --grant state.write,tool.invoke --data /srv/assent",
		"ASSENT_TOKEN=asnt_… /opt/assent demo agent --url http://127.0.0.1:7410",
		`"Authorization": "Bearer asnt_…"`,
		`"ASSENT_TOKEN": "asnt_…"`,
		`"command": "/opt/assent"`,
		"Replace asnt_… with an agent token",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("welcome lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{`\u003c`, "<agent token>", "Your inbox has"} {
		if strings.Contains(out, bad) {
			t.Errorf("welcome holds %q:\n%s", bad, out)
		}
	}
}

func TestPrintHuman(t *testing.T) {
	var b bytes.Buffer
	printHuman(&b, map[string]any{
		"run":    "demo-player",
		"status": "running",
		"pid":    1234567.0,
		"items": []any{
			map[string]any{"ts": "2026-01-01T00:00:00Z", "kind": "player.tick", "summary": "tick\n1", "detail": map[string]any{"n": 1.0}},
			map[string]any{"ts": "2026-01-01T00:00:01Z", "kind": "player.paused", "summary": "Paused"},
		},
		"control": []any{"pause", "resume"},
		"summary": map[string]any{"retained_events": 2.0},
		"empty":   map[string]any{},
	})
	want := `control: pause, resume
empty: {}
pid: 1234567
run: demo-player
status: running
items: 2
  TS                    KIND           SUMMARY  DETAIL
  2026-01-01T00:00:00Z  player.tick    tick 1   {"n":1}
  2026-01-01T00:00:01Z  player.paused  Paused   
summary:
  retained_events: 2
`
	if b.String() != want {
		t.Errorf("printHuman:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestSeedLine(t *testing.T) {
	for _, tc := range []struct {
		seed *demo.Seeded
		want string
	}{
		{nil, ""},
		{&demo.Seeded{Proposal: "profile/plan", Screen: "scr_1", Approval: "apr-1", ApprovalStatus: "pending"},
			"Your inbox has a proposed profile change and an expense waiting for your approval. The payment screen is open under Screens."},
		{&demo.Seeded{Proposal: "profile/plan", Screen: "scr_1", Approval: "apr-1", ApprovalStatus: "declined"},
			"Your inbox has a proposed profile change. The payment screen is open under Screens."},
		{&demo.Seeded{Screen: "scr_1"}, "The payment screen is open under Screens."},
	} {
		if got := seedLine(tc.seed); got != tc.want {
			t.Errorf("seedLine(%+v) = %q, want %q", tc.seed, got, tc.want)
		}
	}
}

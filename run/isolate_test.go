//go:build linux

package run

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// needIsolation skips t where this machine cannot start Runs in
// namespaces of their own.
func needIsolation(t *testing.T, m *Manager) {
	t.Helper()
	if ok, why := m.Isolated(); !ok {
		t.Skipf("Runs are not isolated here: %s", why)
	}
}

// A Run sees only its own processes in /proc: not the server's, whose
// command line may carry a credential, nor another Run's; the data
// directory holds nothing but its own Run directory (the database is not
// there to read), /tmp is its own, and its own directory stays writable
// and reachable by the server at the same path.
func TestRunSeesOnlyItsOwnWorld(t *testing.T) {
	f := newFixture(t)
	needIsolation(t, f.m)
	if err := os.WriteFile(filepath.Join(os.TempDir(), "assent-outside-marker"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(os.TempDir(), "assent-outside-marker")) })
	other := f.spawn("bob", "other", "exec sleep 60")
	t.Cleanup(func() {
		f.m.Kill(context.Background(), "bob", "other")
		f.waitEnded("other")
	})
	server := strconv.Itoa(os.Getpid())
	db := filepath.Join(f.dir, "assent.db")
	script := strings.Join([]string{
		`cd /proc && for p in [0-9]*; do echo "$p"; done > "$ASSENT_STATE_DIR/pids.txt"`,
		`cat /proc/` + server + `/cmdline > "$ASSENT_STATE_DIR/cmdline.txt" 2>/dev/null; echo $? > "$ASSENT_STATE_DIR/cmdline.rc"`,
		`cat /proc/` + strconv.Itoa(other.PID) + `/environ > /dev/null 2>&1; echo $? > "$ASSENT_STATE_DIR/other.rc"`,
		`head -c 16 ` + db + ` > "$ASSENT_STATE_DIR/db.txt" 2>/dev/null; echo $? > "$ASSENT_STATE_DIR/db.rc"`,
		`ls -a ` + f.dir + ` > "$ASSENT_STATE_DIR/data.txt"`,
		`ls -a ` + filepath.Join(f.dir, "runs") + ` > "$ASSENT_STATE_DIR/runs.txt"`,
		`test -e ` + filepath.Join(os.TempDir(), "assent-outside-marker") + `; echo $? > "$ASSENT_STATE_DIR/tmp.rc"`,
		`echo $$ > "$ASSENT_STATE_DIR/me.txt"`,
	}, "\n")
	r := f.spawn("alice", "probe", script)
	f.waitEnded("probe")
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(r.StateDir, name))
		return strings.TrimSpace(string(b))
	}
	pids := strings.Fields(read("pids.txt"))
	if len(pids) == 0 {
		t.Fatal("the Run listed no process at all")
	}
	// Its init, its shell and the shell's one child at most.
	if len(pids) > 3 || slices.Contains(pids, server) || slices.Contains(pids, strconv.Itoa(other.PID)) {
		t.Errorf("the Run sees the processes %v; it should see only the few of its own namespace", pids)
	}
	if !slices.Contains(pids, "1") {
		t.Errorf("the Run's init is not pid 1 in its /proc: %v", pids)
	}
	if read("cmdline.rc") == "0" && read("cmdline.txt") != "" {
		t.Errorf("the Run read the server's command line through /proc/%s/cmdline: %q", server, read("cmdline.txt"))
	}
	if read("other.rc") == "0" {
		t.Error("the Run read another Run's environment")
	}
	if read("db.rc") == "0" || read("db.txt") != "" {
		t.Errorf("the Run read the database file %s: %q", db, read("db.txt"))
	}
	if got := strings.Fields(read("data.txt")); !slices.Equal(got, []string{".", "..", "runs"}) {
		t.Errorf("the data directory seen from the Run lists %v, want only runs", got)
	}
	if got := strings.Fields(read("runs.txt")); !slices.Equal(got, []string{".", "..", "probe"}) {
		t.Errorf("the runs directory seen from the Run lists %v, want only its own", got)
	}
	if read("tmp.rc") == "0" {
		t.Error("the Run sees the server's /tmp")
	}
	// The server's files are still where they were.
	if _, err := os.Stat(db); err != nil {
		t.Errorf("the database is gone for the server: %v", err)
	}
}

// Kill ends every process of an isolated Run, including one that left its
// process group, and a restarted Manager adopts a live isolated Run and
// kills it.
func TestIsolatedRunKilledAfterRestart(t *testing.T) {
	f := newFixture(t)
	needIsolation(t, f.m)
	r := f.spawn("alice", "escape", `setsid sh -c 'echo $$ > "$ASSENT_STATE_DIR/escaped.pid"; exec sleep 60' & exec sleep 60`)
	_ = waitFile(t, filepath.Join(r.StateDir, "escaped.pid"))
	f.m.Close()
	f.m = f.open()
	if got := f.status("alice", "escape"); got != StatusRunning {
		t.Fatalf("after a restart the Run is %s, want running", got)
	}
	if _, err := f.m.Kill(context.Background(), "alice", "escape"); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("escape")
	// Nothing of the Run is left: its namespace ended with its init.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "escaped.pid") {
			t.Errorf("process %s outlived the Run: %q", e.Name(), b)
		}
	}
}

// What a Run writes reaches its logs, and every view built on them, with
// the values of its secret arguments, its run token and bearer tokens
// masked, also when a secret is written in pieces, across writes and
// lines.
func TestRunOutputMasksSecrets(t *testing.T) {
	f := newFixture(t)
	f.m.Close()
	f.m = f.openWith(Config{Tokens: &fakeTokens{}})
	needIsolation(t, f.m)
	const pin = "pin-4711-0815"
	def := []byte(`{"args":["pin:string!secret","who:string"],"template":[` +
		`"echo pin={pin} who={who}",` +
		`"printf '%s' {pin} | head -c 6; sleep 0.2; printf '%s\\n' {pin} | tail -c +7",` +
		`"printf 'token %s\\n' \"$ASSENT_RUN_TOKEN\"",` +
		`"echo 'Authorization: Bearer abc.DEF-123' >&2",` +
		`"set -x; : {pin}"]}`)
	r, err := DecodeRecipe(def)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]json.RawMessage{"pin": json.RawMessage(strconv.Quote(pin)), "who": json.RawMessage(`"ann"`)}
	if _, err := f.m.Spawn(context.Background(), "alice", SpawnRequest{Definition: r, RunID: "masked", Values: vals}); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("masked")
	out, _ := f.m.Logs(context.Background(), "alice", "masked", "stdout", 0)
	errOut, _ := f.m.Logs(context.Background(), "alice", "masked", "stderr", 0)
	all := out + errOut
	for _, leak := range []string{pin, "secret-masked", "abc.DEF-123"} {
		if strings.Contains(all, leak) {
			t.Errorf("the logs show %q:\n%s", leak, all)
		}
	}
	if !strings.Contains(out, "who=ann") || !strings.Contains(out, "pin=[REDACTED]") {
		t.Errorf("stdout = %q; want the plain value and the secret masked", out)
	}
	// The split value was written in two pieces 200ms apart; the pieces
	// alone are not the secret, so only the whole is masked.
	if !strings.Contains(out, "[REDACTED]\n") {
		t.Errorf("the value written in two pieces is not masked: %q", out)
	}
	v, err := f.m.Inspect(context.Background(), "alice", InspectRequest{Target: "run:masked", View: "trace"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), pin) {
		t.Error("the Trace view shows the secret")
	}
}

// A program under /tmp or the data directory is hidden from an isolated
// Run, so it is not one a Run can execute; <data>/bin is bound in.
func TestHiddenPathsNotExecutable(t *testing.T) {
	f := newFixture(t)
	needIsolation(t, f.m)
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/tmp/go-build1/exe/assent", false},
		{filepath.Join(f.dir, "assent"), false},
		{filepath.Join(f.dir, "bin", "assent"), true},
		{"/bin/sh", true},
	} {
		if got := !f.m.hiddenFromRuns(tt.path); got != tt.want {
			t.Errorf("visible(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
	if f.m.RunUserCanExecute("/tmp/x/assent") {
		t.Error("a binary under /tmp counts as executable by an isolated Run")
	}
}

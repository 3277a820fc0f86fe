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
	"syscall"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/tool"
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

// needRootIsolation skips t unless it runs as root (as CI does) on a
// machine where Runs get namespaces of their own.
func needRootIsolation(t *testing.T, m *Manager) {
	t.Helper()
	needRoot(t)
	needIsolation(t, m)
}

// Run and tool processes start with no_new_privs set, so a setuid
// program they execute cannot raise their privileges: in namespaces of
// their own and, where those cannot be made, without them. As root they
// still drop to a uid of their own.
func TestProcessesHaveNoNewPrivs(t *testing.T) {
	for _, isolated := range []bool{true, false} {
		name := map[bool]string{true: "isolated", false: "fallback"}[isolated]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			needRootIsolation(t, f.m)
			if !isolated {
				f.m.iso = nil // as when namespaces cannot be made
			}
			const probe = `grep '^NoNewPrivs:' /proc/self/status; id -u`
			check := func(what, out string) {
				t.Helper()
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NoNewPrivs: 1" {
					t.Errorf("%s: /proc/self/status and id -u say %q, want NoNewPrivs: 1 and a uid", what, out)
					return
				}
				if lines[1] == "0" {
					t.Errorf("%s runs as root", what)
				}
			}
			r := f.spawn("alice", "nnp", "{ "+probe+`; } > "$ASSENT_STATE_DIR/nnp.txt"`)
			f.waitEnded("nnp")
			b, err := os.ReadFile(filepath.Join(r.StateDir, "nnp.txt"))
			if err != nil {
				t.Fatal(err)
			}
			check("a Run", string(b))
			ts := mustToolSet(t, f.db, f.m, tool.NewRegistry())
			dir, err := os.MkdirTemp("", "assent-tool-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			res, err := ts.runInline(context.Background(), probe, dir, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			check("a tool process", res.Structured.(map[string]any)["stdout"].(string))
		})
	}
}

// Each Run has an IPC namespace of its own: it is not the server's nor
// another Run's, and a System V message queue the server made is not
// listed in the Run.
func TestRunHasItsOwnIPCNamespace(t *testing.T) {
	f := newFixture(t)
	needRootIsolation(t, f.m)
	server, err := os.Readlink("/proc/self/ns/ipc")
	if err != nil {
		t.Skipf("no IPC namespace to compare: %v", err)
	}
	// A queue of the server's (IPC_PRIVATE, IPC_CREAT|0600), removed at
	// the end (IPC_RMID).
	const ipcPrivate, ipcCreat, ipcRmid = 0, 0o1000, 0
	qid, _, errno := syscall.Syscall(syscall.SYS_MSGGET, ipcPrivate, ipcCreat|0o600, 0)
	if errno != 0 {
		t.Fatalf("msgget: %v", errno)
	}
	t.Cleanup(func() { syscall.Syscall(syscall.SYS_MSGCTL, qid, ipcRmid, 0) })
	// Each Run stays up until both have read their namespace: the kernel
	// gives a freed namespace's number to the next one, so two Runs that
	// never overlap may show the same number.
	script := `awk 'NR > 1 { print $2 }' /proc/sysvipc/msg > "$ASSENT_STATE_DIR/msg.txt"
readlink /proc/self/ns/ipc > "$ASSENT_STATE_DIR/ns.tmp" && mv "$ASSENT_STATE_DIR/ns.tmp" "$ASSENT_STATE_DIR/ns.txt"
exec sleep 300`
	a := f.spawn("alice", "ipc-a", script)
	b := f.spawn("bob", "ipc-b", script)
	testwait.Eventually(t, 20*time.Second, func() bool {
		_, errA := os.Stat(filepath.Join(a.StateDir, "ns.txt"))
		_, errB := os.Stat(filepath.Join(b.StateDir, "ns.txt"))
		return errA == nil && errB == nil
	}, "both Runs' namespaces")
	defer func() {
		for _, r := range []struct{ owner, id string }{{"alice", "ipc-a"}, {"bob", "ipc-b"}} {
			f.m.Kill(context.Background(), r.owner, r.id)
			f.waitEnded(r.id)
		}
	}()
	read := func(r *Run, name string) string {
		b, err := os.ReadFile(filepath.Join(r.StateDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	nsA, nsB := read(a, "ns.txt"), read(b, "ns.txt")
	if !strings.HasPrefix(nsA, "ipc:[") || nsA == server || nsB == server || nsA == nsB {
		t.Errorf("IPC namespaces: server %s, Run a %s, Run b %s; want three different ones", server, nsA, nsB)
	}
	if ids := strings.Fields(read(a, "msg.txt")); slices.Contains(ids, strconv.Itoa(int(qid))) {
		t.Errorf("the Run lists the server's message queue %d: %v", qid, ids)
	}
}

// /dev/shm and /run/lock are a fresh tmpfs in each Run: what one Run
// leaves there is seen neither by the server nor by the next Run, and the
// server's files there are not seen by a Run.
func TestRunHasPrivateShmAndLock(t *testing.T) {
	f := newFixture(t)
	needRootIsolation(t, f.m)
	var dirs []string
	for _, d := range []string{"/dev/shm", "/run/lock"} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Skip("neither /dev/shm nor /run/lock exists here")
	}
	name := "assent-test-" + strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		p := filepath.Join(d, name+"-server")
		if err := os.WriteFile(p, []byte("server"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
		t.Cleanup(func() { os.Remove(filepath.Join(d, name+"-run")) })
	}
	var write, look []string
	for _, d := range dirs {
		write = append(write, `echo run > `+filepath.Join(d, name+"-run"))
		look = append(look,
			`test -e `+filepath.Join(d, name+"-run")+` && echo "`+d+` run" >> "$ASSENT_STATE_DIR/seen.txt"`,
			`test -e `+filepath.Join(d, name+"-server")+` && echo "`+d+` server" >> "$ASSENT_STATE_DIR/seen.txt"`)
	}
	w := f.spawn("alice", "writer", strings.Join(write, "\n")+`
echo done > "$ASSENT_STATE_DIR/wrote.txt"`)
	f.waitEnded("writer")
	if b, _ := os.ReadFile(filepath.Join(w.StateDir, "wrote.txt")); strings.TrimSpace(string(b)) != "done" {
		t.Fatalf("the writing Run could not write to %v", dirs)
	}
	r := f.spawn("bob", "reader", strings.Join(look, "\n")+`
: > "$ASSENT_STATE_DIR/checked.txt"`)
	f.waitEnded("reader")
	if _, err := os.Stat(filepath.Join(r.StateDir, "checked.txt")); err != nil {
		t.Fatalf("the reading Run did not finish its checks: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.StateDir, "seen.txt")); len(b) > 0 {
		t.Errorf("a Run sees files it did not write:\n%s", b)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, name+"-run")); err == nil {
			t.Errorf("the server sees the file a Run wrote to %s", d)
		}
	}
}

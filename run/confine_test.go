package run

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// needRoot skips t unless the test runs as root, the only case in which
// Run processes change user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: Run processes drop to other uids only when the server is root")
	}
}

// waitFile waits until path holds something and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	var got string
	testwait.Eventually(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(path)
		got = string(b)
		return err == nil && strings.HasSuffix(got, "\n")
	}, path+" written")
	return strings.TrimSpace(got)
}

// ownerOf returns the uid owning path (not following a link) and its mode.
func ownerOf(t *testing.T, path string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode().Perm()
}

// Two agents' Runs run as two different uids: the attacker's Run cannot
// read the victim's environment in /proc (and with it its run token),
// open the victim's Run directory, write to its control FIFO or signal
// it. This holds for a Run the Manager adopted after a restart too, and
// once the victim ends, its directory is the server's again, out of reach
// of any later process given its uid.
func TestRunsRunAsSeparateUIDs(t *testing.T) {
	needRoot(t)
	f := newFixture(t)
	first, last, ok := f.m.RunUIDs()
	if !ok {
		t.Error("the server is root but Runs get no uid range")
		first, last = 1, 1<<32-2
	}
	victim := f.spawn("alice", "victim", "id -u > me.txt; exec sleep 60")
	t.Cleanup(func() {
		f.m.Kill(context.Background(), "alice", "victim")
		f.waitEnded("victim")
	})
	vdir := victim.StateDir
	vuid, err := strconv.Atoi(waitFile(t, filepath.Join(vdir, "me.txt")))
	if err != nil || vuid < first || vuid > last {
		t.Fatalf("victim runs as %d (%v), want a uid in %d-%d", vuid, err, first, last)
	}

	// A restarted server adopts the victim and still keeps the Runs apart.
	f.m.Close()
	f.m = f.open()

	vfifo := decodeDoc(f.waitRecord("victim")).FIFO
	probe := strings.Join([]string{
		"id -u > me.txt",
		"tr '\\000' '\\n' < /proc/" + strconv.Itoa(victim.PID) + "/environ > environ.txt 2>/dev/null; echo environ=$?",
		"ls " + ShellQuote(vdir) + " >/dev/null 2>&1; echo list=$?",
		"cat " + ShellQuote(filepath.Join(vdir, "me.txt")) + " >/dev/null 2>&1; echo read=$?",
		"(printf x > " + ShellQuote(filepath.Join(vdir, "planted")) + ") 2>/dev/null; echo write=$?",
		"(printf '{}\\n' > " + ShellQuote(vfifo) + ") 2>/dev/null; echo fifo=$?",
		"kill -0 " + strconv.Itoa(victim.PID) + " 2>/dev/null; echo kill=$?",
	}, "\n")
	f.spawn("mallory", "attacker", probe)
	f.waitEnded("attacker")
	out, err := f.m.Logs(context.Background(), "mallory", "attacker", "stdout", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, refused := range []string{"environ", "list", "read", "write", "fifo", "kill"} {
		if !strings.Contains(out, refused+"=") || strings.Contains(out, refused+"=0\n") {
			t.Errorf("the attacker's Run was not refused %s:\n%s", refused, out)
		}
	}
	adir := filepath.Join(f.m.DataDir(), "runs", "attacker")
	if b, _ := os.ReadFile(filepath.Join(adir, "environ.txt")); strings.Contains(string(b), "ASSENT_RUN_ID=victim") {
		t.Errorf("the attacker's Run read the victim's environment:\n%s", b)
	}
	auid, err := strconv.Atoi(strings.TrimSpace(readOrEmpty(filepath.Join(adir, "me.txt"))))
	if err != nil || auid == vuid || auid < first || auid > last {
		t.Fatalf("attacker runs as %d (%v), victim as %d; want two different uids in %d-%d", auid, err, vuid, first, last)
	}
	if s := f.status("alice", "victim"); s != StatusRunning {
		t.Fatalf("victim is %s, want running", s)
	}

	// The attacker's directory went back to the server when it ended.
	if uid, mode := ownerOf(t, adir); uid != uint32(os.Geteuid()) || mode != 0o700 {
		t.Errorf("ended Run's directory is uid %d mode %v, want the server's, 0700", uid, mode)
	}
	if uid, _ := ownerOf(t, filepath.Join(adir, "me.txt")); uid != uint32(os.Geteuid()) {
		t.Errorf("ended Run's file is uid %d, want the server's", uid)
	}
	// And a later process given the attacker's uid cannot enter it.
	ls := exec.Command("/bin/ls", adir)
	ls.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(auid), Gid: uint32(auid), Groups: []uint32{}}}
	if b, err := ls.CombinedOutput(); err == nil {
		t.Errorf("uid %d still lists the ended Run's directory:\n%s", auid, b)
	}

	// The adopted victim's directory goes back to the server when it ends.
	if _, err := f.m.Kill(context.Background(), "alice", "victim"); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("victim")
	if uid, mode := ownerOf(t, vdir); uid != uint32(os.Geteuid()) || mode != 0o700 {
		t.Errorf("adopted Run's directory is uid %d mode %v after it ended, want the server's, 0700", uid, mode)
	}
}

// waitRecord returns the stored record of Run id.
func (f *fixture) waitRecord(id string) store.RunRecord {
	f.t.Helper()
	r, err := f.db.Run(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func readOrEmpty(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// Each generation of a Run gets a uid of its own and the files earlier
// generations left, and what a generation planted as links stays as it
// was: giving the directory over follows no link out of it.
func TestGenerationsGetTheirOwnUIDAndTheirFiles(t *testing.T) {
	needRoot(t)
	f := newFixture(t)
	f.m = f.openWith(Config{StartGrace: time.Minute})
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plant := "id -u >> uids.txt; mkdir -p keep/sub; echo kept > keep/sub/file; ln -sf " + ShellQuote(target) + " filelink; ln -sfn " + ShellQuote(outside) + " dirlink"
	f.spawn("alice", "gens", plant)
	f.spawn("alice", "gens", "id -u >> uids.txt; echo more >> keep/sub/file")
	dir := filepath.Join(f.m.DataDir(), "runs", "gens")
	if r := f.waitEnded("gens"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("second generation could not use the first one's files: %s", readOrEmpty(filepath.Join(dir, "stderr.log")))
	}
	uids := strings.Fields(readOrEmpty(filepath.Join(dir, "uids.txt")))
	if len(uids) != 2 || uids[0] == uids[1] {
		t.Fatalf("generations ran as %v, want two different uids", uids)
	}
	if got := readOrEmpty(filepath.Join(dir, "keep", "sub", "file")); got != "kept\nmore\n" {
		t.Fatalf("file across generations = %q", got)
	}
	for _, p := range []string{target, outside} {
		if uid, _ := ownerOf(t, p); uid != uint32(os.Geteuid()) {
			t.Errorf("%s, linked from the Run, was given to uid %d", p, uid)
		}
	}
}

// A tool process gets a uid of its own as well, not that of a live Run.
func TestToolProcessGetsItsOwnUID(t *testing.T) {
	needRoot(t)
	f := newFixture(t)
	first, last, _ := f.m.RunUIDs()
	v := f.spawn("alice", "live", "id -u > me.txt; exec sleep 60")
	t.Cleanup(func() {
		f.m.Kill(context.Background(), "alice", "live")
		f.waitEnded("live")
	})
	runUID := waitFile(t, filepath.Join(v.StateDir, "me.txt"))
	ts := mustToolSet(t, f.db, f.m, tool.NewRegistry())
	dir, err := os.MkdirTemp("", "assent-tool-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	res, err := ts.runInline(context.Background(), "id -u; id -G", dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Fields(res.Structured.(map[string]any)["stdout"].(string))
	uid, _ := strconv.Atoi(out[0])
	if len(out) != 2 || uid < first || uid > last || out[0] == runUID || out[1] != out[0] {
		t.Fatalf("tool ran as uid and groups %v (the live Run as %s); want its own uid in %d-%d, its gid the same, no other group", out, runUID, first, last)
	}
	if uid, mode := ownerOf(t, dir); uid != uint32(os.Geteuid()) || mode != 0o700 {
		t.Errorf("the tool's directory is uid %d mode %v after it ended, want the server's, 0700", uid, mode)
	}
}

// A Run that replaces its logs, exit file or artifact by a symbolic link
// to a file it cannot read, a hard link or a FIFO gets nothing of that file
// from any view, and no view blocks on the FIFO. A log replaced so reads
// as empty.
func TestRunFilesReplacedByLinksReadNothing(t *testing.T) {
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("top-secret-7731\n0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, script string }{
		{"symlink", "ln -s " + ShellQuote(secret) + " stdout.log; ln -s " + ShellQuote(secret) + " stderr.log; ln -s " + ShellQuote(secret) + " art.txt"},
		{"hardlink", "ln " + ShellQuote(secret) + " stdout.log; ln " + ShellQuote(secret) + " stderr.log; ln " + ShellQuote(secret) + " art.txt"},
		{"fifo", "mkfifo stdout.log stderr.log art.txt"},
		{"directory link", "mkdir d; ln -s " + ShellQuote(secretDir) + " sub"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m := f.openWith(Config{StartGrace: time.Minute})
			id := "planter" + strconv.Itoa(i)
			def, _ := json.Marshal(map[string]any{
				"template":  "echo visible; echo oops >&2; rm -f stdout.log stderr.log; " + tc.script + "; exit 3",
				"artifacts": map[string]string{"art": "art.txt", "deep": "sub/secret"},
			})
			done := make(chan struct{})
			var views []any
			go func() {
				defer close(done)
				if _, err := spawnRecipe(t, m, "alice", id, string(def), nil); err != nil {
					t.Error(err)
					return
				}
				f.waitEnded(id)
				for _, stream := range []string{"stdout", "stderr"} {
					s, err := m.Logs(context.Background(), "alice", id, stream, 0)
					if err != nil || s != "" {
						t.Errorf("Logs %s = %q, %v; want empty", stream, s, err)
					}
					views = append(views, s)
				}
				v, err := m.Status(context.Background(), "alice", id)
				if err != nil {
					t.Error(err)
					return
				}
				for name, a := range v.Artifacts {
					if a.Exists {
						t.Errorf("artifact %s through a %s exists: %+v", name, tc.name, a)
					}
				}
				views = append(views, v)
				for _, view := range []string{"trace", "recipe"} {
					iv, err := m.Inspect(context.Background(), "alice", InspectRequest{Target: "run:" + id, View: view})
					if err != nil {
						t.Error(err)
					}
					views = append(views, iv)
				}
				res, err := m.Prune(context.Background(), "alice", id, true)
				if err != nil {
					t.Error(err)
				} else if len(res.PreservedArtifacts) != 0 {
					t.Errorf("preserved through a %s: %v", tc.name, res.PreservedArtifacts)
				}
			}()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("reading the Run's files hung")
			}
			all, _ := json.Marshal(views)
			if strings.Contains(string(all), "top-secret-7731") {
				t.Fatalf("a view shows the linked file: %s", all)
			}
		})
	}
}

// The exit file is read without following a link: a Run that points it
// at a file holding "0" does not turn its failure into success.
func TestExitFileLinkNotFollowed(t *testing.T) {
	f := newFixture(t)
	zero := filepath.Join(t.TempDir(), "zero")
	if err := os.WriteFile(zero, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.m.DataDir(), "runs", "liar")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(zero, filepath.Join(dir, "exit")); err != nil {
		t.Fatal(err)
	}
	if got := f.m.exitFile("liar"); got != nil {
		t.Fatalf("exit code through a link = %d, want none", *got)
	}
}

func TestParseRunUIDs(t *testing.T) {
	tests := []struct {
		in          string
		first, last uint32
		ok          bool
	}{
		{DefaultRunUIDs, 2000000000, 2000999999, true},
		{"100000-100000", 100000, 100000, true},
		{" 5000-6000 ", 5000, 6000, true},
		{"0-100", 0, 0, false},
		{"999-2000", 0, 0, false},
		{"6000-5000", 0, 0, false},
		{"2000000000-4294967294", 0, 0, false},
		{"2000-", 0, 0, false},
		{"-2000", 0, 0, false},
		{"a-b", 0, 0, false},
		{"2000", 0, 0, false},
	}
	for _, tc := range tests {
		first, last, err := ParseRunUIDs(tc.in)
		if tc.ok != (err == nil) || first != tc.first || last != tc.last {
			t.Errorf("ParseRunUIDs(%q) = %d, %d, %v", tc.in, first, last, err)
		}
		if err != nil && codeOf(err) != CodeInvalidRequest {
			t.Errorf("ParseRunUIDs(%q): code %q", tc.in, codeOf(err))
		}
	}
}

// The pool never gives a uid that is held, named in passwd or group, or
// that runs a process, and says so when none is left.
func TestUIDPoolSkipsUsedIDs(t *testing.T) {
	const base = 3000000000
	p := newUIDPool(base, base+3)
	p.reserved[base+1] = true
	p.hold(base + 2)
	if os.Geteuid() == 0 {
		sleeper := exec.Command("/bin/sleep", "60")
		sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: base, Gid: base, Groups: []uint32{}}}
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sleeper.Process.Kill()
			sleeper.Wait()
		})
	} else {
		p.reserved[base] = true
	}
	got, err := p.take()
	if err != nil || got != base+3 {
		t.Fatalf("take = %d, %v; want %d, the only uid neither running a process, reserved nor held", got, err, base+3)
	}
	if got, err := p.take(); err == nil {
		t.Fatalf("take from an exhausted pool = %d", got)
	}
	p.release(base + 2)
	if got, err := p.take(); err != nil || got != base+2 {
		t.Fatalf("take after release = %d, %v; want %d", got, err, base+2)
	}
}

func TestIsUIDRange(t *testing.T) {
	for spec, want := range map[string]bool{"1000-2000": true, "2000000000-2000999999": true, "www-data": false,
		"1000:1000": false, "nobody": false, "1-x": false, "-": false, "": false} {
		if got := isUIDRange(spec); got != want {
			t.Errorf("isUIDRange(%q) = %v", spec, got)
		}
	}
}

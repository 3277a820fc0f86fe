package run

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/assent-run/assent/store/sqlite"
)

// nonRootChildEnv makes TestNonRootServerWarns the child that opens a
// Manager as a user other than root.
const nonRootChildEnv = "ASSENT_TEST_NONROOT_CHILD"

// A server that is not root cannot give Runs a uid of their own: it says
// at start that Run and tool processes then share its user. The test runs
// its own binary as nobody (65534) and reads what the Manager logs.
func TestNonRootServerWarns(t *testing.T) {
	if os.Getenv(nonRootChildEnv) == "1" {
		dir := t.TempDir()
		db, err := sqlite.Open(context.Background(), filepath.Join(dir, "assent.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		m, err := New(context.Background(), Config{Store: db, DataDir: dir, Logger: slog.New(slog.NewTextHandler(os.Stdout, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		return
	}
	needRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary's own directory is root's; a copy in a directory
	// nobody may enter runs as nobody.
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyExe := filepath.Join(dir, "run.test")
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(copyExe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(copyExe, "-test.run=^TestNonRootServerWarns$", "-test.count=1")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), nonRootChildEnv+"=1", "TMPDIR="+tmp, "HOME="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Manager as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "the server is not root: Run and tool processes") {
		t.Fatalf("a Manager opened as nobody says nothing of Runs sharing its user:\n%s", out)
	}
}

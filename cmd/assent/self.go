package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/assent-run/assent/run/recipe"
)

// modulePath is the import path of the module this binary is built from.
const modulePath = "github.com/assent-run/assent"

// invocation is how a shell or an MCP client starts this same assent: the
// binary itself, or "go -C MODULE run ./cmd/assent" when the binary is a
// temporary one that go run built.
type invocation struct {
	name string
	args []string
	// short is the form to print for a person in the module's directory
	// ("go run ./cmd/assent", or "assent" when it is on PATH).
	short string
}

// command returns the program and arguments that run "assent args…".
func (i invocation) command(args ...string) (string, []string) {
	return i.name, append(append([]string{}, i.args...), args...)
}

// shell returns "assent args…" as a line to paste into a shell.
func (i invocation) shell(args ...string) string {
	parts := []string{i.short}
	for _, a := range args {
		parts = append(parts, shellWord(a))
	}
	return strings.Join(parts, " ")
}

// self works out how this process was started. exe is the running
// binary's path and wd the working directory.
func self(exe, wd string) invocation {
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	if builtByGoRun(exe) {
		if root := moduleRoot(wd); root != "" {
			short := "go run ./cmd/assent"
			if root != wd {
				short = "go -C " + shellWord(root) + " run ./cmd/assent"
			}
			return invocation{name: goCommand(), args: []string{"-C", root, "run", "./cmd/assent"}, short: short}
		}
	}
	short := shellWord(exe)
	if p, err := exec.LookPath("assent"); err == nil {
		if rp, err := filepath.EvalSymlinks(p); err == nil && rp == exe {
			short = "assent"
		}
	}
	return invocation{name: exe, short: short}
}

// goCommand is the go command's absolute path when it is on PATH, so that
// an MCP client started with another PATH finds it too, else "go".
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return "go"
}

// currentInvocation is self for this process.
func currentInvocation() invocation {
	exe, err := os.Executable()
	if err != nil {
		exe = "assent"
	}
	wd, _ := os.Getwd()
	return self(exe, wd)
}

// builtByGoRun reports whether exe is a binary go run left in a temporary
// work directory (TMPDIR/go-build…) or in the build cache: such a file goes
// away, so nothing should be told to start it later.
func builtByGoRun(exe string) bool {
	sep := string(filepath.Separator)
	if strings.HasPrefix(exe, filepath.Join(os.TempDir(), "go-build")) {
		return true
	}
	if d := os.Getenv("GOTMPDIR"); d != "" && strings.HasPrefix(exe, filepath.Join(d, "go-build")) {
		return true
	}
	var caches []string
	if c := os.Getenv("GOCACHE"); c != "" {
		caches = append(caches, c)
	}
	if c, err := os.UserCacheDir(); err == nil {
		caches = append(caches, filepath.Join(c, "go-build"))
	}
	for _, c := range caches {
		if strings.HasPrefix(exe, strings.TrimSuffix(c, sep)+sep) {
			return true
		}
	}
	return false
}

// moduleRoot returns the directory at or above dir whose go.mod declares
// this module, or "".
func moduleRoot(dir string) string {
	for dir != "" {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			found := false
			for sc.Scan() {
				if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
					found = strings.Trim(fields[1], `"`) == modulePath
					break
				}
			}
			f.Close()
			if found {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// shellWord quotes s for a POSIX shell when it needs quoting.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r))
	}) < 0 {
		return s
	}
	return recipe.ShellQuote(s)
}

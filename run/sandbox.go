package run

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// SafePATH is the PATH of every Run and tool process. A Recipe that needs
// another one declares PATH in its env.
const SafePATH = "/usr/local/bin:/usr/bin:/bin"

// runAs is the unprivileged user Run processes run as when the server runs
// as root.
type runAs struct {
	name     string
	uid, gid uint32
}

// resolveRunUser picks the user Run processes drop to. It returns nil when
// the server is not root (nothing changes) or when spec names root. spec is
// a user name or "uid:gid"; empty means "nobody" when that user exists.
func resolveRunUser(spec string) (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	explicit := spec != ""
	if !explicit {
		spec = "nobody"
	}
	var a runAs
	if uidText, gidText, ok := strings.Cut(spec, ":"); ok {
		uid, err1 := strconv.ParseUint(uidText, 10, 32)
		gid, err2 := strconv.ParseUint(gidText, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("run: run user %q: use a user name or numeric uid:gid", spec)
		}
		a = runAs{name: spec, uid: uint32(uid), gid: uint32(gid)}
	} else {
		u, err := user.Lookup(spec)
		if err != nil {
			if !explicit {
				return nil, nil
			}
			return nil, fmt.Errorf("run: run user %q not found: create it or set another run user", spec)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("run: run user %q has no numeric uid/gid", spec)
		}
		a = runAs{name: spec, uid: uint32(uid), gid: uint32(gid)}
	}
	if a.uid == 0 {
		return nil, nil
	}
	return &a, nil
}

// RunUser reports the user and group ids Run and tool processes run as,
// and false when they keep the server's own user (the server is not root,
// or the run user is root).
func (m *Manager) RunUser() (uid, gid int, ok bool) {
	if m.runAs == nil {
		return 0, 0, false
	}
	return int(m.runAs.uid), int(m.runAs.gid), true
}

// RunUserCanExecute reports whether Run processes may execute path: always
// when they keep the server's user; otherwise when the run user can search
// every directory on the way and the file's mode lets it execute.
func (m *Manager) RunUserCanExecute(path string) bool {
	if m.runAs == nil {
		return true
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	switch {
	case ok && st.Uid == m.runAs.uid:
		if perm&0o100 == 0 {
			return false
		}
	case ok && st.Gid == m.runAs.gid:
		if perm&0o010 == 0 {
			return false
		}
	case perm&0o001 == 0:
		return false
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		di, err := os.Stat(d)
		if err != nil || !m.canSearch(di) {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// sandboxEnv is the base environment of a Run or tool process whose
// directory is dir: a fixed PATH, HOME at dir, LANG and the server's TZ.
// Nothing else of the server's environment reaches the process.
func sandboxEnv(dir string) []string {
	env := []string{"PATH=" + SafePATH, "HOME=" + dir, "LANG=C.UTF-8"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	return env
}

// sandboxCommand returns a command that runs name with args the way every
// Run and tool process runs: in its own process group, in dir, with the
// base environment plus env (later entries win, so callers append the
// ASSENT_* variables last) and, when the server is root, as the run user,
// who is given dir. Cancelling ctx kills the process (as exec.CommandContext
// does); callers set cmd.Cancel to kill the whole group.
func (m *Manager) sandboxCommand(ctx context.Context, dir string, env []string, name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(sandboxEnv(dir), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if m.runAs != nil {
		if err := m.handOver(dir); err != nil {
			return nil, errorf(CodeSandbox, "Run directory %s cannot be given to run user %s: %v", dir, m.runAs.name, err)
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: m.runAs.uid, Gid: m.runAs.gid, Groups: []uint32{}}
	}
	return cmd, nil
}

// handOver gives path to the run user (a no-op when processes keep the
// server's user).
func (m *Manager) handOver(path string) error {
	if m.runAs == nil {
		return nil
	}
	return os.Lchown(path, int(m.runAs.uid), int(m.runAs.gid))
}

// prepareDirs creates the data directory layout with its permissions: the
// data directory and runs/ are 0700, recipes/ 0700. When processes run as
// the run user, the data directory and runs/ are 0711 (search only, no
// listing) so the run user can reach the per-Run directory it owns and
// nothing else: the database and every other file stay the server's, 0600.
// An ancestor of the data directory that the run user cannot search gets
// o+x (never read), and the change is logged.
func (m *Manager) prepareDirs() error {
	mode := os.FileMode(0o700)
	if m.runAs != nil {
		mode = 0o711
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{m.cfg.DataDir, mode}, {m.runsDir(), mode}, {m.recipesDir(), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	if m.runAs == nil {
		return nil
	}
	for d := filepath.Dir(m.cfg.DataDir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if !m.canSearch(fi) {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("run: run user %s cannot reach %s and search permission could not be added: %w", m.runAs.name, m.cfg.DataDir, err)
			}
			m.log.Warn("added search permission (o+x) so the run user can reach its Run directories", "dir", d, "run_user", m.runAs.name)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// canSearch reports whether the run user may traverse the directory fi.
func (m *Manager) canSearch(fi os.FileInfo) bool {
	perm := fi.Mode().Perm()
	if perm&0o001 != 0 {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return st.Uid == m.runAs.uid && perm&0o100 != 0 || st.Gid == m.runAs.gid && perm&0o010 != 0
}

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

// runAs is how Run processes drop root when the server runs as root:
// each to its own uid from a range (ranged), or all to one shared user.
type runAs struct {
	// name is how the operator gave it, for messages.
	name string
	// uid and gid are the shared user's; unused when ranged.
	uid, gid uint32
	// ranged: each Run generation and tool process gets its own uid, and
	// the same gid, from first to last.
	ranged      bool
	first, last uint32
	// fellBack: the default uid range is not mapped in the server's user
	// namespace, so every process shares this user instead.
	fellBack bool
}

// resolveRunUser picks the users Run processes drop to. It returns nil
// when the server is not root (nothing changes) or when spec names root.
// spec is a uid range "FIRST-LAST" (each process its own uid), a user name
// or "uid:gid" (one user shared by all); empty means DefaultRunUIDs where
// ranges are supported, else "nobody" when that user exists.
func resolveRunUser(spec string) (*runAs, error) {
	return resolveRunUserIn(spec, "/proc/self/uid_map", "/proc/self/gid_map")
}

// resolveRunUserIn is resolveRunUser reading the user namespace's id maps
// from uidMap and gidMap.
func resolveRunUserIn(spec, uidMap, gidMap string) (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	explicit := spec != ""
	if !explicit {
		spec = "nobody"
		if rangedUIDsSupported {
			spec = DefaultRunUIDs
		}
	}
	var a runAs
	fellBack := false
	if isUIDRange(spec) {
		if !rangedUIDsSupported {
			return nil, fmt.Errorf("run: run uid range %q: a uid for each Run needs Linux; set a run user instead", spec)
		}
		first, last, err := ParseRunUIDs(spec)
		if err != nil {
			return nil, fmt.Errorf("run: %s", err.(*Error).Message)
		}
		if mapped := idsMapped(uidMap, first, last) && idsMapped(gidMap, first, last); !mapped {
			if explicit {
				return nil, fmt.Errorf("run: run uids %s are not all mapped in this user namespace (/proc/self/uid_map, gid_map): set --run-uids to a mapped range, or --run-user", spec)
			}
			// A user namespace without the default range (a rootless
			// container): the server still starts, with one shared run
			// user, and says so (see New).
			spec, fellBack = "nobody", true
		} else {
			return &runAs{name: spec, ranged: true, first: first, last: last}, nil
		}
	}
	if uidText, gidText, ok := strings.Cut(spec, ":"); ok {
		uid, err1 := strconv.ParseUint(uidText, 10, 32)
		gid, err2 := strconv.ParseUint(gidText, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("run: run user %q: use a user name, numeric uid:gid or a uid range FIRST-LAST", spec)
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
	a.fellBack = fellBack
	return &a, nil
}

// isUIDRange reports whether spec has the shape of a uid range, digits on
// both sides of a dash (a user name may hold a dash too).
func isUIDRange(spec string) bool {
	a, b, ok := strings.Cut(spec, "-")
	digits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	return ok && digits(a) && digits(b)
}

// RunUser reports the user and group ids Run and tool processes run as
// when they all share one run user, and false otherwise: when they keep
// the server's own user (the server is not root, or the run user is root)
// or when each gets its own uid (see RunUIDs).
func (m *Manager) RunUser() (uid, gid int, ok bool) {
	if m.runAs == nil || m.runAs.ranged {
		return 0, 0, false
	}
	return int(m.runAs.uid), int(m.runAs.gid), true
}

// RunUIDs reports the range of uids from which each Run generation and
// tool process gets its own uid (and the same gid), and false when they
// do not (see RunUser).
func (m *Manager) RunUIDs() (first, last int, ok bool) {
	if m.runAs == nil || !m.runAs.ranged {
		return 0, 0, false
	}
	return int(m.runAs.first), int(m.runAs.last), true
}

// RunUserCanExecute reports whether Run processes may execute path: always
// when they keep the server's user; otherwise when they can search every
// directory on the way and the file's mode lets them execute it. A Run
// with its own uid owns nothing outside its directory, so only the
// "other" permission bits count for it.
//
// A path the Run's own mounts hide (under /tmp, /var/tmp, /dev/shm or the
// data directory, but for its bin/) is never executable by a Run.
func (m *Manager) RunUserCanExecute(path string) bool {
	if m.iso != nil && m.hiddenFromRuns(path) {
		return false
	}
	if m.runAs == nil {
		return true
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if !m.runUserMay(fi, 0o1) {
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

// runUserMay reports whether Run processes have permission bit (1
// execute/search, 2 write, 4 read) on fi.
func (m *Manager) runUserMay(fi os.FileInfo, bit os.FileMode) bool {
	perm := fi.Mode().Perm()
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case m.runAs.ranged || !ok:
	case st.Uid == m.runAs.uid:
		return perm&(bit<<6) != 0
	case st.Gid == m.runAs.gid:
		return perm&(bit<<3) != 0
	}
	return perm&bit != 0
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
// ASSENT_* variables last) and, when id is not nil, as id, to whom the
// caller has given dir (handOverTree). With api, a process in a network
// namespace of its own reaches the server at the loopback address of
// runURL. Cancelling ctx kills the process
// (as exec.CommandContext does); callers set cmd.Cancel to kill the whole
// group.
//
// When the Manager isolates processes (see Init), the process starts
// through a Run's init in new PID and mount namespaces: it sees only its
// own processes, its directory is the only part of the data directory
// there, and the init drops to id. Otherwise the process starts through
// the same executable, which drops to id, sets no_new_privs and executes
// it in its place.
func (m *Manager) sandboxCommand(ctx context.Context, id *identity, dir string, env []string, api bool, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(sandboxEnv(dir), env...)
	if m.iso != nil {
		m.iso.isolate(cmd, id, m.cfg.DataDir, dir, m.initNet(api), name, args)
		return cmd
	}
	if startPlain(cmd, id) {
		return cmd
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if id != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: []uint32{}}
	}
	return cmd
}

// Isolated reports whether Run and tool processes start in namespaces of
// their own, and why not when they do not.
func (m *Manager) Isolated() (bool, string) {
	return m.iso != nil, m.isoWhy
}

// setupIsolation finds whether Runs can start in namespaces of their own,
// and with a network of their own, and says so in the log.
func (m *Manager) setupIsolation() {
	dir, err := os.MkdirTemp(m.runsDir(), ".probe-")
	if err != nil {
		m.isoWhy = err.Error()
	} else {
		var netWhy string
		m.iso, netWhy, err = probeIsolation(m.cfg.DataDir, dir, m.cfg.Network != NetworkHost)
		os.RemoveAll(dir)
		if err != nil {
			m.isoWhy = err.Error()
		}
		if netWhy != "" {
			m.netWhy = "no network namespace: " + netWhy
		}
	}
	if m.iso != nil && m.iso.netns {
		// Without the run API a Run in a network of its own could not
		// reach the server: it then shares the server's network.
		if m.api, err = listenRunAPI(m.cfg.DataDir); err != nil {
			m.iso.netns, m.netWhy = false, "the run API's socket cannot be made: "+err.Error()
		}
	}
	network := "; each has a network of its own with loopback only, and reaches the server only at " + m.runURL()
	if m.RunNetwork() == NetworkHost {
		network = "; they share the server's network"
	}
	switch {
	case m.iso != nil && m.iso.userNS:
		m.log.Info("Run and tool processes start in new user, PID, mount and IPC namespaces: each sees only its own processes and its own Run directory of the data directory" + network)
	case m.iso != nil:
		m.log.Info("Run and tool processes start in new PID, mount and IPC namespaces: each sees only its own processes and its own Run directory of the data directory" + network)
	default:
		m.log.Warn("Run and tool processes are not isolated in namespaces of their own: they see every process on the machine in /proc (command lines included, where their uid may read them), the paths of the data directory, and every port of the machine's network; see docs/security.md",
			"reason", m.isoWhy)
		if !startPlain(exec.Command("/bin/true"), nil) {
			m.log.Warn("Run and tool processes start without no_new_privs: a setuid program they execute can raise their privileges", "reason", noNewPrivsWhy)
		}
	}
	if m.iso != nil && m.cfg.Network != NetworkHost && !m.iso.netns {
		m.log.Warn("Run and tool processes share the server's network although each should have its own: they can connect to every port of the machine (the server's listener, a database, other services); see docs/security.md", "reason", m.netWhy)
	}
	if os.Geteuid() != 0 && (m.iso == nil || !m.iso.userNS) {
		m.log.Warn("the server is not root: Run and tool processes run as the server's own user and can read and signal what it can; serve as root to give each its own uid")
	} else if os.Geteuid() != 0 {
		m.log.Warn("the server is not root: Run and tool processes keep the server's user (in a user namespace of their own); outside their mounts they can read what the server's user can; serve as root to give each its own uid")
	}
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

// canSearch reports whether Run processes may traverse the directory fi.
func (m *Manager) canSearch(fi os.FileInfo) bool { return m.runUserMay(fi, 0o1) }

// hiddenFromRuns reports whether the mounts of an isolated Run hide path.
func (m *Manager) hiddenFromRuns(path string) bool {
	within := func(dir string) bool {
		rel, err := filepath.Rel(dir, path)
		return err == nil && filepath.IsLocal(rel)
	}
	if within(filepath.Join(m.cfg.DataDir, "bin")) {
		return false
	}
	return within("/tmp") || within("/var/tmp") || within("/dev/shm") || within("/run/lock") || within(m.cfg.DataDir)
}

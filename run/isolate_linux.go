package run

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// A Run or tool process is started through a small init: the assent
// executable itself, started again under the name initArg0 in new PID and
// mount namespaces (and a new user namespace when the server is not
// root), and a new IPC namespace, so System V IPC objects and POSIX
// message queues of the server and of other Runs are out of its reach;
// unless Runs share the server's network (NetworkHost), in a new network
// namespace too, where only loopback is up (see runnet.go).
// The init is PID 1 of the new PID namespace. Before it starts the
// process it
//
//   - brings up the loopback interface of its network namespace and, for
//     a Run, listens on 127.0.0.1:RunAPIPort and passes each connection
//     on to the run API's socket, the Run's one way to the server;
//   - makes every mount private, so nothing it mounts reaches the server;
//   - mounts fresh tmpfs over /tmp, /var/tmp, /dev/shm and /run/lock,
//     private to the process, so no lock file or shared memory is shared
//     with the server or another Run, and a fresh mqueue filesystem over
//     /dev/mqueue when there is one;
//   - mounts a tmpfs over the data directory and binds back only the Run
//     directory (and, read-only, the data directory's bin/), so the store,
//     the other Runs and the Recipes are not there to be read;
//   - mounts a fresh procfs, which lists only the processes of the
//     namespace: the server's command line and environment are not in it;
//   - drops to the Run's uid (when the server is root);
//   - sets no_new_privs, so neither the process nor anything it executes
//     can gain privileges through a setuid or setgid program or file
//     capabilities.
//
// It then starts the process, reaps every process of the namespace, and
// exits with the process's status; its end ends every process left in the
// namespace. The kernel interfaces are used directly rather than an outside
// sandbox program, so that the one binary has no dependency to install,
// and the init stays the process the server records, signals (its
// process group) and re-adopts after a restart.

// initArg0 is argv[0] of a Run's init.
const initArg0 = "assent-run-init"

// execArg0 is argv[0] of the small step through which a process starts
// where Runs get no namespaces: it drops to the Run's uid, sets
// no_new_privs and executes the process in its place.
const execArg0 = "assent-run-exec"

// initExe is the executable that serves as a Run's init: set by Init.
var initExe string

// Init must be called first thing in main by a program whose Managers
// start Runs in namespaces. When this process was started as a Run's init
// it sets up the Run's world, runs its process and exits, never
// returning. Otherwise it records that this executable can be a Run's
// init, and Managers created afterwards isolate their Runs when the
// kernel allows it.
func Init() {
	if len(os.Args) > 0 && os.Args[0] == initArg0 {
		os.Exit(runInit(os.Args[1:]))
	}
	if len(os.Args) > 0 && os.Args[0] == execArg0 {
		os.Exit(runExec(os.Args[1:]))
	}
	if exe, err := os.Executable(); err == nil {
		initExe = exe
	}
}

// isolation is how a Manager starts processes in namespaces.
type isolation struct {
	exe string
	// userNS: a new user namespace too, mapping the server's uid and gid
	// to themselves (the server is not root).
	userNS bool
	// netns: a new network namespace too, with loopback only.
	netns bool
}

// initArgs are the arguments of a Run's init: uid, gid ("-" keeps the
// user), data directory, Run directory, network (see Manager.initNet),
// then the command.
func initArgs(id *identity, dataDir, dir, network, name string, args []string) []string {
	uid, gid := "-", "-"
	if id != nil {
		uid, gid = strconv.FormatUint(uint64(id.uid), 10), strconv.FormatUint(uint64(id.gid), 10)
	}
	return append([]string{initArg0, uid, gid, dataDir, dir, network, name}, args...)
}

// isolate makes cmd, a command built for name and args, start through
// the init of iso, with the network network (see Manager.initNet).
func (iso *isolation) isolate(cmd *exec.Cmd, id *identity, dataDir, dir, network, name string, args []string) {
	cmd.Path = iso.exe
	cmd.Args = initArgs(id, dataDir, dir, network, name, args)
	cmd.Err = nil
	attr := &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC}
	if network != "-" {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	if iso.userNS {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		uid, gid := os.Getuid(), os.Getgid()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// The init keeps the server's uid in its user namespace, where
		// an execve would drop the capabilities the namespace gave it:
		// the two it needs to build the Run's world are kept as ambient
		// capabilities, and dropped before the process starts.
		attr.AmbientCaps = []uintptr{capSysAdmin, capNetAdmin}
	}
	cmd.SysProcAttr = attr
}

// noNewPrivsWhy says why startPlain cannot serve.
const noNewPrivsWhy = "this program does not serve as a Run's init (run.Init is not called)"

// startPlain makes cmd, a command built for name and args, start as id
// (the server's user when nil) with no_new_privs set, through this
// executable started as execArg0, which executes name in its place (same
// process, same process group). It reports false, leaving cmd as it is,
// when this program cannot serve (run.Init is not called).
func startPlain(cmd *exec.Cmd, id *identity) bool {
	if initExe == "" {
		return false
	}
	uid, gid := "-", "-"
	if id != nil {
		uid, gid = strconv.FormatUint(uint64(id.uid), 10), strconv.FormatUint(uint64(id.gid), 10)
	}
	path := cmd.Path
	cmd.Path = initExe
	cmd.Args = append([]string{execArg0, uid, gid, path}, cmd.Args...)
	cmd.Err = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return true
}

// runExec is the step of startPlain: args are uid, gid ("-" keeps the
// user), the program's path and its argv. It answers 125 when it cannot
// drop privileges and 127 when the program cannot be executed; otherwise
// it does not return.
func runExec(args []string) int {
	if len(args) < 4 {
		fmt.Fprintln(os.Stderr, "assent-run-exec: want UID GID PATH ARGV0 [ARG...]")
		return 125
	}
	runtime.LockOSThread()
	if err := dropTo(args[0], args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-exec:", err)
		return 125
	}
	if err := noNewPrivs(); err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-exec:", err)
		return 125
	}
	err := syscall.Exec(args[2], args[3:], os.Environ())
	fmt.Fprintln(os.Stderr, "assent-run-exec:", &os.PathError{Op: "exec", Path: args[2], Err: err})
	return 127
}

// dropTo gives up every supplementary group and changes to gid and uid,
// unless they are "-".
func dropTo(uidText, gidText string) error {
	if uidText == "-" {
		return nil
	}
	uid, err1 := strconv.Atoi(uidText)
	gid, err2 := strconv.Atoi(gidText)
	if err1 != nil || err2 != nil {
		return errors.New("bad uid or gid")
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop groups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("set gid: %w", err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("set uid: %w", err)
	}
	return nil
}

// probeIsolation reports how this process can start Runs in namespaces,
// by starting one init that sets up a world in dir and checks it: nil and
// the reason when it cannot. With netns it first tries a network
// namespace of the Run's own too, and when that fails it reports why in
// netWhy and isolates without.
func probeIsolation(dataDir, dir string, netns bool) (iso *isolation, netWhy string, err error) {
	if initExe == "" {
		return nil, "", errors.New("this program does not serve as a Run's init (run.Init is not called)")
	}
	iso = &isolation{exe: initExe, userNS: os.Geteuid() != 0, netns: netns}
	if netns {
		err := iso.probe(dataDir, dir)
		if err == nil {
			return iso, "", nil
		}
		netWhy, iso.netns = err.Error(), false
	}
	if err := iso.probe(dataDir, dir); err != nil {
		return nil, netWhy, err
	}
	return iso, netWhy, nil
}

// probe starts one init of iso that sets up a world in dir and checks
// that it sees only its own processes and, in a network namespace of its
// own, only the loopback interface.
func (iso *isolation) probe(dataDir, dir string) error {
	network, check := "-", ""
	if iso.netns {
		network, check = "lo", ` && (m=0; while read -r l; do case "$l" in *:*) m=$((m+1)) ;; esac; done < /proc/net/dev; test "$m" = 1)`
	}
	cmd := exec.Command("/bin/sh")
	iso.isolate(cmd, nil, dataDir, dir, network, "/bin/sh", []string{"-c", `n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; test -d /proc/1 && test "$n" -le 2` + check})
	cmd.Dir = dir
	cmd.Env = sandboxEnv(dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		if len(out) > 0 {
			return fmt.Errorf("%v: %s", err, cut(string(out), 300))
		}
		return err
	}
	return nil
}

// runInit is a Run's init: args are uid, gid, data directory, Run
// directory, network and the command. It answers 125 when the world
// cannot be set up, else the command's exit status.
func runInit(args []string) int {
	if len(args) < 6 {
		fmt.Fprintln(os.Stderr, "assent-run-init: want UID GID DATADIR RUNDIR NETWORK COMMAND [ARG...]")
		return 125
	}
	// no_new_privs is set on this thread, and the process is started
	// from it: see noNewPrivs.
	runtime.LockOSThread()
	fwd, err := setupNetwork(args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-init:", err)
		return 125
	}
	if fwd != nil {
		defer fwd.close()
	}
	if err := setupWorld(args[0], args[1], args[2], args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-init:", err)
		return 125
	}
	if os.Getuid() != 0 {
		// In a user namespace of its own: what the init could do there,
		// the process must not.
		if err := dropCapabilities(); err != nil {
			fmt.Fprintln(os.Stderr, "assent-run-init:", err)
			return 125
		}
	}
	if err := noNewPrivs(); err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-init:", err)
		return 125
	}
	if fwd != nil {
		fwd.start()
	}
	cmd := exec.Command(args[5], args[6:]...)
	cmd.Dir = args[3]
	// The values to mask come in the environment; the process does not
	// get that variable.
	secrets := decodeMask(os.Getenv(maskEnv))
	if tok := os.Getenv("ASSENT_RUN_TOKEN"); tok != "" {
		secrets = append(secrets, tok)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, maskEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// What the process writes reaches the logs through a Masker.
	var copies sync.WaitGroup
	stdout, err := maskedPipe(&copies, os.Stdout, secrets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-init:", err)
		return 125
	}
	stderr, err := maskedPipe(&copies, os.Stderr, secrets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-init:", err)
		return 125
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// Signals sent to the init (a Run's process signalling PID 1) are
	// passed on rather than ending the init.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	err = cmd.Start()
	stdout.Close()
	stderr.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "assent-run-init:", err)
		return 127
	}
	child := cmd.Process.Pid
	go func() {
		for s := range sigs {
			_ = syscall.Kill(child, s.(syscall.Signal))
		}
	}()
	code := reap(child)
	// The process ended: so does everything it left in the namespace, and
	// then the output is complete.
	_ = syscall.Kill(-1, syscall.SIGKILL)
	for {
		if _, err := syscall.Wait4(-1, nil, 0, nil); err != nil && !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	copies.Wait()
	return code
}

// setupNetwork brings up loopback when the init has a network namespace of
// its own and, for a Run, listens on the run API's loopback port, passing
// connections to the socket in the run API's directory. The directory is
// opened here, before the data directory is hidden, and reached through
// its descriptor from then on: a server started again later puts its
// socket in the same directory. The descriptor is not passed on to the
// process.
func setupNetwork(arg string) (*forwarder, error) {
	n, err := parseRunNet(arg)
	if err != nil || !n.own {
		return nil, err
	}
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	if n.port == 0 {
		return nil, nil
	}
	dir, err := syscall.Open(n.dir, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the run API's directory: %w", err)
	}
	// The init ends with the process, and the descriptor with it.
	return listenForward(n.port, "/proc/self/fd/"+strconv.Itoa(dir)+"/"+runAPISocket)
}

// maskedPipe returns the write end of a pipe whose output reaches w
// through a Masker of secrets; copies is done once the pipe closed.
func maskedPipe(copies *sync.WaitGroup, w io.Writer, secrets []string) (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	copies.Go(func() {
		m := NewMasker(w, secrets)
		_, _ = io.Copy(m, pr)
		_ = m.Close()
		pr.Close()
	})
	return pw, nil
}

// reap reaps the processes of the namespace until child ends, and returns
// its exit status.
func reap(child int) int {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 125
		}
		if pid != child {
			continue // an orphan of the namespace, reaped
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
		return 125
	}
}

// setupWorld builds the mount namespace of a Run whose directory is dir
// (see the comment at the top of this file) and drops to uid:gid unless
// they are "-".
func setupWorld(uidText, gidText, dataDir, dir string) error {
	if os.Getpid() != 1 {
		return errors.New("not the first process of a new PID namespace")
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// The Run directory, held open: the tmpfs mounts below hide its path.
	keep, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open Run directory: %w", err)
	}
	defer syscall.Close(keep)
	bin := -1
	if dataDir != "" {
		if fd, err := syscall.Open(filepath.Join(dataDir, "bin"), oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0); err == nil {
			bin = fd
			defer syscall.Close(bin)
		}
	}
	const flags = syscall.MS_NOSUID | syscall.MS_NODEV
	for _, d := range privateTmpfs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", flags, "mode=1777"); err != nil {
			return fmt.Errorf("mount a private %s: %w", d, err)
		}
	}
	if dataDir != "" {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return fmt.Errorf("hide the data directory: %w", err)
		}
		if err := syscall.Mount("tmpfs", dataDir, "tmpfs", flags|syscall.MS_NOEXEC, "mode=0755"); err != nil {
			return fmt.Errorf("hide the data directory: %w", err)
		}
		if bin >= 0 {
			target := filepath.Join(dataDir, "bin")
			if err := bindFD(bin, target, true); err != nil {
				return err
			}
		}
	}
	if fi, err := os.Lstat("/dev/mqueue"); err == nil && fi.IsDir() {
		// The mqueue filesystem shows the queues of the IPC namespace
		// that mounts it: this one's, which is the Run's own.
		if err := syscall.Mount("mqueue", "/dev/mqueue", "mqueue", flags|syscall.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount the Run's own /dev/mqueue: %w", err)
		}
	}
	if err := bindFD(keep, dir, false); err != nil {
		return err
	}
	if err := syscall.Mount("proc", "/proc", "proc", flags|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount a procfs of the Run's own: %w", err)
	}
	if err := dropTo(uidText, gidText); err != nil {
		return err
	}
	return os.Chdir(dir)
}

// privateTmpfs are the directories that get a fresh tmpfs of the Run's
// own, where they exist: the places where processes leave temporary
// files, lock files and shared memory.
var privateTmpfs = []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"}

// prSetNoNewPrivs is PR_SET_NO_NEW_PRIVS, which the syscall package does
// not name.
const prSetNoNewPrivs = 38

// noNewPrivs sets no_new_privs on this process: once set it is inherited
// by every child and kept across execve, and an execve no longer grants
// the privileges of a setuid or setgid program or of file capabilities.
// It is set on every thread where the runtime can do so; otherwise on the
// calling thread only, which the caller has locked and starts the process
// from.
func noNewPrivs() error {
	_, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0)
	if errno == syscall.ENOTSUP {
		_, _, errno = syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0)
	}
	if errno != 0 {
		return fmt.Errorf("set no_new_privs: %w", errno)
	}
	return nil
}

// Capabilities and prctl options the syscall package does not name.
const (
	capNetAdmin          = 12
	capSysAdmin          = 21
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
	linuxCapabilityV3    = 0x20080522
	linuxCapabilityU32s3 = 2
)

// dropCapabilities clears the ambient, inheritable, permitted and
// effective capabilities of this process, so that neither it nor what it
// starts under a uid other than 0 can change the mounts, the network or
// anything else of the namespaces the init built. As with noNewPrivs, on
// every thread where the runtime can, otherwise on the calling thread,
// from which the process is started.
func dropCapabilities() error {
	_, _, errno := syscall.AllThreadsSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	if errno == syscall.ENOTSUP {
		_, _, errno = syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	}
	if errno != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", errno)
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: linuxCapabilityV3}
	var data [linuxCapabilityU32s3]struct{ effective, permitted, inheritable uint32 }
	_, _, errno = syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if errno == syscall.ENOTSUP {
		_, _, errno = syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	}
	if errno != 0 {
		return fmt.Errorf("drop capabilities: %w", errno)
	}
	return nil
}

// bindFD mounts the directory open as fd at target, created (as a
// directory, with its parents) when missing; read-only when ro.
func bindFD(fd int, target string, ro bool) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("bind %s: %w", target, err)
	}
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", target, err)
	}
	if ro {
		// A remount keeps the flags the source mount has (a user
		// namespace may not clear them).
		var st syscall.Statfs_t
		keepFlags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV)
		if syscall.Statfs(target, &st) == nil {
			for _, f := range [][2]uintptr{{0x8, syscall.MS_NOEXEC}, {0x400, syscall.MS_NOATIME}, {0x800, syscall.MS_NODIRATIME}, {0x1000, syscall.MS_RELATIME}} {
				if uintptr(st.Flags)&f[0] != 0 {
					keepFlags |= f[1]
				}
			}
		}
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|keepFlags, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", target, err)
		}
	}
	return nil
}

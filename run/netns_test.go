//go:build linux

package run

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// runAPIProbe is a stand-in for the server's handler: it answers 200 with
// "run-api-ok" to a request that carries the token, 401 otherwise.
func runAPIProbe(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "run-api-ok")
	})
}

// netProbe is the template of a Run that tries a TCP port the test opened
// on the machine's loopback (OUTSIDE_PORT) and then calls the server at
// ASSENT_URL with its run token, writing what happened to its directory.
const netProbe = `bash -c 'exec 3<>/dev/tcp/127.0.0.1/OUTSIDE_PORT' 2> "$ASSENT_STATE_DIR/outside.err"; echo $? > "$ASSENT_STATE_DIR/outside.rc"
echo "$ASSENT_URL" > "$ASSENT_STATE_DIR/url.txt"
host=$(echo "$ASSENT_URL" | cut -d/ -f3 | cut -d: -f1)
port=$(echo "$ASSENT_URL" | cut -d/ -f3 | cut -d: -f2)
bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET /probe HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n" "$ASSENT_RUN_TOKEN" >&3 && cat <&3' probe "$host" "$port" > "$ASSENT_STATE_DIR/api.txt" 2>&1
`

// A Run in a network of its own cannot connect to a port opened on the
// machine's loopback (the server's listener, a database, any service),
// but reaches the server with its run token at ASSENT_URL; one that
// shares the server's network (NetworkHost) reaches both.
func TestRunNetwork(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("the probe needs bash")
	}
	cases := []struct {
		network      string
		reachOutside bool
	}{
		{"", false},
		{NetworkIsolated, false},
		{NetworkHost, true},
	}
	for _, tc := range cases {
		t.Run("network="+tc.network, func(t *testing.T) {
			outside, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer outside.Close()
			var reached atomic.Int32
			go func() {
				for {
					c, err := outside.Accept()
					if err != nil {
						return
					}
					reached.Add(1)
					c.Close()
				}
			}()
			// In NetworkHost the Run calls the server's TCP address.
			api := httptest.NewServer(runAPIProbe("secret-probe"))
			defer api.Close()

			f := newFixture(t)
			f.m.Close()
			m, err := New(context.Background(), Config{Store: f.db, DataDir: f.dir, Tokens: &fakeTokens{}, URL: api.URL, Network: tc.network})
			if err != nil {
				t.Fatal(err)
			}
			f.m = m
			needIsolation(t, m)
			if tc.network != NetworkHost && m.RunNetwork() != NetworkIsolated {
				t.Skipf("no network namespace here: %s", m.netWhy)
			}
			m.ServeRunAPI(runAPIProbe("secret-probe"))
			port := strconv.Itoa(outside.Addr().(*net.TCPAddr).Port)
			r := f.spawn("alice", "probe", strings.ReplaceAll(netProbe, "OUTSIDE_PORT", port))
			f.waitEnded("probe")
			read := func(name string) string {
				b, _ := os.ReadFile(filepath.Join(r.StateDir, name))
				return strings.TrimSpace(string(b))
			}
			if got := read("outside.rc") == "0"; got != tc.reachOutside {
				t.Errorf("the Run connected to 127.0.0.1:%s outside: %v, want %v (%s)", port, got, tc.reachOutside, read("outside.err"))
			}
			if !tc.reachOutside && !strings.Contains(read("outside.err"), "refused") {
				t.Errorf("the connection outside failed with %q, want connection refused", read("outside.err"))
			}
			if !tc.reachOutside && reached.Load() != 0 {
				t.Errorf("%d connections from the Run reached the port outside", reached.Load())
			}
			wantURL := api.URL
			if !tc.reachOutside {
				wantURL = "http://127.0.0.1:" + strconv.Itoa(RunAPIPort)
			}
			if got := read("url.txt"); got != wantURL {
				t.Errorf("ASSENT_URL = %q, want %q", got, wantURL)
			}
			if got := read("api.txt"); !strings.Contains(got, "200 OK") || !strings.Contains(got, "run-api-ok") {
				t.Errorf("the Run's call to the server with its token answered %q, want 200 run-api-ok", got)
			}
		})
	}
}

// The run API's socket holds the server's handler: it answers a request
// with a token, refuses one without, and a Run's init passes connections
// to it even when the data directory's path is longer than a socket
// address may be.
func TestRunAPIOnLongDataDir(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("the probe needs bash")
	}
	f := newFixture(t)
	f.m.Close()
	dir := filepath.Join(f.dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := New(context.Background(), Config{Store: f.db, DataDir: dir, Tokens: &fakeTokens{}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	needIsolation(t, m)
	if m.RunNetwork() != NetworkIsolated {
		t.Skipf("no network namespace here: %s", m.netWhy)
	}
	m.ServeRunAPI(runAPIProbe("secret-probe"))
	sock := filepath.Join(dir, runAPIDir, runAPISocket)
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("the run API's socket %s: %v", sock, err)
	}
	r := f.spawn("alice", "probe", strings.ReplaceAll(netProbe, "OUTSIDE_PORT", "1"))
	f.waitEnded("probe")
	b, _ := os.ReadFile(filepath.Join(r.StateDir, "api.txt"))
	if !strings.Contains(string(b), "run-api-ok") {
		t.Errorf("the Run's call to the server answered %q, want run-api-ok", b)
	}
	m.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run API's socket is left after Close: %v", err)
	}
}

// The network argument of a Run's init is parsed strictly.
func TestInitNetArgument(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want runNet
		bad  bool
	}{
		{arg: "-", want: runNet{}},
		{arg: "lo", want: runNet{own: true}},
		{arg: "lo:7410:/data/run-api", want: runNet{own: true, port: 7410, dir: "/data/run-api"}},
		{arg: "lo:7410:/a:b", want: runNet{own: true, port: 7410, dir: "/a:b"}},
		{arg: "lo:0:/data", bad: true},
		{arg: "lo:70000:/data", bad: true},
		{arg: "lo:7410:relative", bad: true},
		{arg: "lo:x:/data", bad: true},
		{arg: "host", bad: true},
		{arg: "", bad: true},
	} {
		got, err := parseRunNet(tc.arg)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("parseRunNet(%q) = %+v, %v; want %+v, bad %v", tc.arg, got, err, tc.want, tc.bad)
		}
	}
}

// nonRootEnv names the directory in which TestNonRootRunHelper, started
// again by TestNonRootRun as an unprivileged user, leaves what its Run
// found.
const nonRootEnv = "ASSENT_TEST_NONROOT_OUT"

// nonRootProbe is netProbe and what a Run of a non-root server must not
// be able to do: see other processes, hold a capability, or uncover the
// data directory by unmounting what hides it.
const nonRootProbe = netProbe + `cd /proc && for p in [0-9]*; do echo "$p"; done > "$ASSENT_STATE_DIR/pids.txt"
grep CapEff /proc/self/status > "$ASSENT_STATE_DIR/caps.txt"
id -u > "$ASSENT_STATE_DIR/uid.txt"
umount -l DATA_DIR 2> /dev/null; echo $? > "$ASSENT_STATE_DIR/umount.rc"
ls DATA_DIR > "$ASSENT_STATE_DIR/data.txt"
`

// A server that is not root still gives its Runs namespaces of their own,
// in a user namespace where the kernel allows it: the Run keeps the
// server's uid, sees only its own processes and a data directory holding
// only runs/, has no capability (so cannot unmount what hides the data
// directory), cannot reach the machine's ports and reaches the server at
// ASSENT_URL. The test starts its own binary again as the user nobody.
func TestNonRootRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the test again as another user needs root")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("the probe needs bash")
	}
	const nobody = 65534
	dir := t.TempDir()
	// The test's directories are closed to other users: nobody may
	// search them (and read nothing but the binary copied there).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary's own directory is closed to other users.
	bin := filepath.Join(dir, "run.test")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(out, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	outside, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	cmd := exec.Command(bin, "-test.run=^TestNonRootRunHelper$", "-test.count=1")
	cmd.Dir = out
	cmd.Env = append(os.Environ(), nonRootEnv+"="+out, "ASSENT_TEST_OUTSIDE_PORT="+strconv.Itoa(outside.Addr().(*net.TCPAddr).Port), "TMPDIR="+out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test as user nobody: %v\n%s", err, res)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return strings.TrimSpace(string(b))
	}
	if why := read("skipped.txt"); why != "" {
		t.Skipf("as user nobody: %s", why)
	}
	if got := read("uid.txt"); got != strconv.Itoa(nobody) {
		t.Errorf("the Run runs as uid %q, want the server's %d", got, nobody)
	}
	if pids := strings.Fields(read("pids.txt")); len(pids) == 0 || len(pids) > 3 || pids[0] != "1" {
		t.Errorf("the Run sees the processes %v; want only the few of its own namespace", pids)
	}
	if got := read("caps.txt"); !strings.HasSuffix(got, "0000000000000000") {
		t.Errorf("the Run holds capabilities: %q", got)
	}
	if read("umount.rc") == "0" || read("data.txt") != "runs" {
		t.Errorf("the Run unmounted what hides the data directory (rc %s) and sees %q in it", read("umount.rc"), read("data.txt"))
	}
	if read("outside.rc") == "0" {
		t.Errorf("the Run connected to a port outside its network: %s", read("outside.err"))
	}
	if got := read("api.txt"); !strings.Contains(got, "run-api-ok") {
		t.Errorf("the Run's call to the server answered %q, want run-api-ok", got)
	}
}

// TestNonRootRunHelper is TestNonRootRun's server, run as the user
// nobody; it does nothing in a normal test run.
func TestNonRootRunHelper(t *testing.T) {
	out := os.Getenv(nonRootEnv)
	if out == "" {
		t.Skip("started only by TestNonRootRun")
	}
	f := newFixture(t)
	f.m.Close()
	m, err := New(context.Background(), Config{Store: f.db, DataDir: f.dir, Tokens: &fakeTokens{}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	if ok, why := m.Isolated(); !ok || m.RunNetwork() != NetworkIsolated {
		os.WriteFile(filepath.Join(out, "skipped.txt"), []byte("no namespaces for a non-root server here: "+why+" "+m.netWhy), 0o644)
		return
	}
	m.ServeRunAPI(runAPIProbe("secret-probe"))
	script := strings.ReplaceAll(nonRootProbe, "OUTSIDE_PORT", os.Getenv("ASSENT_TEST_OUTSIDE_PORT"))
	r := f.spawn("alice", "probe", strings.ReplaceAll(script, "DATA_DIR", f.dir))
	f.waitEnded("probe")
	for _, name := range []string{"uid.txt", "pids.txt", "caps.txt", "umount.rc", "data.txt", "outside.rc", "outside.err", "api.txt"} {
		b, _ := os.ReadFile(filepath.Join(r.StateDir, name))
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkRunStartNetwork measures a Run that exits at once, from spawn
// to its recorded end, in a network of its own and in the server's.
func BenchmarkRunStartNetwork(b *testing.B) {
	for _, network := range []string{NetworkIsolated, NetworkHost} {
		b.Run(network, func(b *testing.B) {
			f := newFixture(b)
			f.m.Close()
			m, err := New(context.Background(), Config{Store: f.db, DataDir: f.dir, Network: network})
			if err != nil {
				b.Fatal(err)
			}
			f.m = m
			if m.RunNetwork() != network {
				b.Skipf("no network namespace here: %s", m.netWhy)
			}
			for i := 0; b.Loop(); i++ {
				id := "b" + strconv.Itoa(i)
				f.spawn("alice", id, "true")
				f.waitEnded(id)
			}
		})
	}
}

// The forwarder passes bytes both ways between a loopback connection and
// the target socket, and close ends the connections still open and every
// goroutine of the forwarder (the package's TestMain finds leaks).
func TestForwarderPassesAndEnds(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	target, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		c, err := target.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	fwd, err := listenForward(0, sock)
	if err != nil {
		t.Fatal(err)
	}
	fwd.start()
	c, err := net.Dial("tcp", fwd.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("through the forwarder: %q, %v", buf, err)
	}
	fwd.close()
	if n, err := c.Read(buf); err == nil {
		t.Errorf("the connection is still open after close: read %d bytes", n)
	}
	<-echoed
}

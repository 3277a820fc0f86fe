package faults

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

// pgCluster is a PostgreSQL server of the test's own, in a temporary
// directory, so that stopping and starting it disturbs no other test.
type pgCluster struct {
	bin, dir string
	port     int
	// as runs a program as the cluster's owner: postgres refuses to run
	// as root.
	as []string
}

// newPGCluster makes and starts a cluster with Debian's PostgreSQL
// binaries. It skips when they are not installed, unless
// ASSENT_REQUIRE_POSTGRES=1 says they must be.
func newPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		if os.Getenv("ASSENT_REQUIRE_POSTGRES") == "1" {
			t.Fatal("ASSENT_REQUIRE_POSTGRES=1 but no PostgreSQL binaries under /usr/lib/postgresql")
		}
		t.Skip("PostgreSQL's binaries are not installed (apt-get install postgresql)")
	}
	slices.SortFunc(bins, func(a, b string) int { return majorOf(a) - majorOf(b) })
	c := &pgCluster{bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "assent-pgfault-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root needs the postgres user to own the cluster: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = []string{"runuser", "-u", "postgres", "--"}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	c.run(t, "initdb", "-D", c.data(), "--auth=trust", "--username=assent", "--encoding=UTF8", "--no-sync")
	c.start(t)
	t.Cleanup(func() { _ = c.cmd("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop").Run() })
	return c
}

func majorOf(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return n
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// url is the cluster's store URL: trust authentication, so no password.
func (c *pgCluster) url() string {
	return fmt.Sprintf("postgres://assent@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *pgCluster) cmd(prog string, args ...string) *exec.Cmd {
	argv := append(slices.Clone(c.as), append([]string{filepath.Join(c.bin, prog)}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.dir
	return cmd
}

func (c *pgCluster) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	if out, err := c.cmd(prog, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		t.Fatalf("%s %v: %v\n%s\n%s", prog, args, err, out, log)
	}
}

func (c *pgCluster) start(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-w", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, c.dir), "start")
}

// stop stops the cluster the way an operator's restart does: sessions are
// ended at once and new connections refused until it starts again.
func (c *pgCluster) stop(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop")
}

// TestPostgresRestart serves from a PostgreSQL server that is stopped and
// started again while writers start Flow instances. While it is down
// every write is answered 503 store_unavailable (never 500, never left
// without an answer) and /v1/ready answers 503 while /v1/health stays
// 200; once it is back writes succeed again without restarting assent;
// and every write acknowledged before, during or after is stored. One
// restart, three with -faults.long.
func TestPostgresRestart(t *testing.T) {
	exe := buildAssent(t)
	pg := newPGCluster(t)
	data := t.TempDir()
	s := serve(t, exe, data, "ASSENT_STORE="+pg.url(), "ASSENT_NODE=node-a")
	if s.token == "" {
		t.Fatal("the first start printed no agent token")
	}
	tokens := append([]string{s.token}, agentTokens(t, exe, data, pg.url(), 3)...)
	restarts, down := 1, 1500*time.Millisecond
	if *long {
		restarts, down = 3, 5*time.Second
	}
	l := newLedger()
	stop := make(chan struct{})
	wg := load(s, tokens, "pg", 8, stop, l)
	readyDown, healthDown := map[int]int{}, map[int]int{}
	for r := range restarts {
		time.Sleep(500 * time.Millisecond)
		pg.stop(t)
		for end := time.Now().Add(down); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			code, _, _ := s.call("GET", "/v1/ready", "", nil, nil)
			readyDown[code]++
			code, _, _ = s.call("GET", "/v1/health", "", nil, nil)
			healthDown[code]++
		}
		pg.start(t)
		n := 0
		testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
			n++
			id := fmt.Sprintf("back-%d-%d", r, n)
			code, body, err := s.startInstance(s.token, id)
			l.note(id, code, body, err)
			if code != http.StatusCreated {
				c.Errorf("a write after PostgreSQL came back: %d %s (%v)", code, errCode(body), err)
			}
		}, "writes succeed again once PostgreSQL is back")
	}
	close(stop)
	wg.Wait()

	if l.unknown > 0 {
		t.Errorf("%d writes got no answer (assent must answer while its store is down)", l.unknown)
	}
	if l.statuses[http.StatusInternalServerError] > 0 {
		t.Errorf("%d writes were answered 500: %v", l.statuses[http.StatusInternalServerError], l.refused)
	}
	for k := range l.refused {
		if k != "503 store_unavailable" && k != "429 rate_limited" {
			t.Errorf("writes refused %q while PostgreSQL restarted: %v", k, l.refused)
		}
	}
	if l.refused["503 store_unavailable"] == 0 {
		t.Errorf("no write was refused while PostgreSQL was down: %d acknowledged", len(l.acked))
	}
	if readyDown[http.StatusServiceUnavailable] == 0 || readyDown[http.StatusOK] > 0 {
		t.Errorf("/v1/ready while PostgreSQL was down answered %v, want only 503", readyDown)
	}
	if len(healthDown) != 1 || healthDown[http.StatusOK] == 0 {
		t.Errorf("/v1/health while PostgreSQL was down answered %v, want only 200", healthDown)
	}
	owner := map[string]string{}
	for _, id := range l.acked {
		owner[id] = s.token
		var w, i int
		if _, err := fmt.Sscanf(id, "pg-w%d-%d", &w, &i); err == nil {
			owner[id] = tokens[w%len(tokens)]
		}
	}
	if lost := missing(t, s, owner, l.acked); len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes are missing, e.g. %v", len(lost), len(l.acked), lost[:min(3, len(lost))])
	}
	t.Logf("%d PostgreSQL restarts (%s down each): %d writes acknowledged, all present; refused %v; /v1/ready while down %v, /v1/health %v",
		restarts, down, len(l.acked), l.refused, readyDown, healthDown)
}

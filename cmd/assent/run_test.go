package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/run/service"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// TestMain lets the test binary stand in for the assent binary in tests
// that start separate processes (ASSENT_TEST_AS_CLI=1), and in Runs that
// the demo Recipe starts: it names the running binary (os.Executable) with
// assent's arguments, which never begin with a -test. flag.
func TestMain(m *testing.M) {
	if os.Getenv("ASSENT_TEST_AS_CLI") == "1" || len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
		os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type runServer struct {
	url, token, dir string
}

func newRunServer(t *testing.T) runServer {
	t.Helper()
	k := assenttest.StartListening(t, func(c *server.Config) { c.RateLimit = -1 })
	// The operator's own program (a service) may run commands of its own
	// making; an agent's inline template would wait for a person.
	token, _ := k.Issue(store.KindService, "operator")
	return runServer{url: k.URL(), token: token, dir: k.Dir}
}

func (s runServer) cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errw bytes.Buffer
	code := execute(append(args, "--url", s.url, "--token-file", writeTokenFile(t, s.token)), strings.NewReader(""), &out, &errw)
	return out.String(), errw.String(), code
}

func TestRunCLI(t *testing.T) {
	s := newRunServer(t)
	out, errs, code := s.cli(t, "run", "spawn", "--template", "echo hello {who}; sleep 300", "--set", "who=world", "--id", "greet", "--json")
	if code != 0 {
		t.Fatalf("spawn: %d %s", code, errs)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || v["status"] != "running" {
		t.Fatalf("spawn output %q", out)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if out, _, _ = s.cli(t, "run", "logs", "greet"); out != "hello world\n" {
			c.Errorf("logs %q", out)
		}
	}, "the Run's log")
	if out, errs, code = s.cli(t, "trace", "emit", "--run", "greet", "--kind", "checkpoint.ready", "--summary", "half way", "--data", `{"n":1}`, "--attention", "followup"); code != 0 || !strings.HasPrefix(out, "trace=") {
		t.Fatalf("trace emit: %d %s %s", code, out, errs)
	}
	if out, _, code = s.cli(t, "run", "inspect", "greet", "--view", "trace", "--json"); code != 0 || !strings.Contains(out, "checkpoint.ready") {
		t.Fatalf("inspect trace: %d %s", code, out)
	}
	// An undeclared action is a refusal (exit 1) naming its code.
	if _, errs, code = s.cli(t, "run", "control", "greet", "pause"); code != 1 || !strings.Contains(errs, "undeclared_action") {
		t.Fatalf("undeclared: %d %s", code, errs)
	}
	if _, errs, code = s.cli(t, "trace", "emit", "--run", "greet", "--kind", "Bad"); code != 1 || !strings.Contains(errs, "invalid_trace_event") {
		t.Fatalf("bad kind: %d %s", code, errs)
	}
	if _, _, code = s.cli(t, "run", "kill"); code != 2 {
		t.Fatalf("usage error exit %d", code)
	}
	if out, errs, code = s.cli(t, "run", "kill", "greet"); code != 0 || !strings.Contains(out, "killed: true") {
		t.Fatalf("kill: %d %s %s", code, out, errs)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if out, _, _ = s.cli(t, "run", "inspect", "greet"); !strings.Contains(out, "status: killed") {
			c.Errorf("status after kill: %s", out)
		}
	}, "the Run killed")
	if out, errs, code = s.cli(t, "run", "prune", "greet"); code != 0 || !strings.Contains(out, "pruned: true") {
		t.Fatalf("prune: %d %s %s", code, out, errs)
	}
	if _, errs, code = s.cli(t, "run", "inspect", "greet"); code != 1 || !strings.Contains(errs, "not_found") {
		t.Fatalf("after prune: %d %s", code, errs)
	}
}

func TestRunHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"run", "spawn"}, {"run", "inspect"}, {"run", "control"}, {"run", "control", "claim"},
		{"run", "control", "handled"}, {"run", "control", "failed"}, {"run", "kill"}, {"run", "archive"}, {"run", "prune"},
		{"run", "logs"}, {"trace", "emit"}} {
		var out, errw bytes.Buffer
		if code := execute(append(args, "--help"), strings.NewReader(""), &out, &errw); code != 0 || !strings.Contains(out.String(), "Examples:") {
			t.Errorf("%v --help: %d, no Examples", args, code)
		}
	}
}

// TestControlAdmissionProcesses: 76 separate "assent run control"
// processes against an empty journal → exactly 64 admitted and 12
// control_backpressure, and the journal holds 64 records.
func TestControlAdmissionProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 76 processes")
	}
	s := newRunServer(t)
	recipe := `{"template":"exec 3<>\"$ASSENT_CONTROL_FIFO\"; exec sleep 300","control":["pause"]}`
	if err := os.WriteFile(filepath.Join(s.dir, "recipes", "holder.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := s.cli(t, "run", "spawn", "--recipe", "holder", "--id", "holder"); code != 0 {
		t.Fatalf("spawn: %s", errs)
	}
	defer s.cli(t, "run", "kill", "holder")
	// Wait until the Run holds its FIFO open (a delivery then succeeds
	// into the pipe buffer and the Control stays pending).
	fifo := ""
	matches, _ := filepath.Glob(filepath.Join(s.dir, "runs", "holder", "control-*.fifo"))
	if len(matches) == 1 {
		fifo = matches[0]
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return fifoHasReader(fifo) }, "the Run opening its FIFO")
	const workers = 76
	cmds := make([]*exec.Cmd, workers)
	errs := make([]*bytes.Buffer, workers)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "run", "control", "holder", "pause", "--url", s.url, "--token-file", writeTokenFile(t, s.token))
		cmd.Env = append(os.Environ(), "ASSENT_TEST_AS_CLI=1")
		errs[i] = &bytes.Buffer{}
		cmd.Stderr = errs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	admitted, refused := 0, 0
	for i, cmd := range cmds {
		err := cmd.Wait()
		switch {
		case err == nil:
			admitted++
		case strings.Contains(errs[i].String(), "control_backpressure"):
			refused++
		default:
			t.Errorf("worker %d: %v %s", i, err, errs[i])
		}
	}
	out, _, _ := s.cli(t, "run", "inspect", "holder", "--view", "control", "--lines", "200", "--json")
	var view map[string]any
	json.Unmarshal([]byte(out), &view)
	if admitted != 64 || refused != 12 || view["pending"] != float64(64) || len(view["recent_controls"].([]any)) != 64 {
		t.Fatalf("admitted=%d refused=%d pending=%v", admitted, refused, view["pending"])
	}
}

// fifoHasReader reports whether a non-blocking open for writing succeeds,
// which it does only while some process has the FIFO open for reading.
func fifoHasReader(path string) bool {
	if path == "" {
		return false
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// serveProcess starts "assent serve" as a separate process on a free port
// and returns its URL and, on first start, the agent token.
func serveProcess(t *testing.T, dir string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--data", dir, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "ASSENT_TEST_AS_CLI=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	base, token := "", ""
	for sc.Scan() {
		line := sc.Text()
		if _, rest, ok := strings.Cut(line, "serving on "); ok {
			base, _, _ = strings.Cut(rest, " ")
		}
		if strings.HasPrefix(line, "Agent ") {
			if strings.HasPrefix(line, "Agent token") && sc.Scan() {
				token = strings.TrimSpace(sc.Text())
			}
			break
		}
	}
	go io.Copy(io.Discard, out)
	if base == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("assent serve did not start")
	}
	return cmd, base, token
}

// TestReconcileAfterServerKill: assent serve is killed with SIGKILL while
// Runs are alive; a new server re-adopts the live Run, finishes the one
// that ended meanwhile with its recorded exit code, and can still kill the
// survivor.
func TestReconcileAfterServerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts assent serve twice")
	}
	dir := t.TempDir()
	srv1, base, _ := serveProcess(t, dir)
	var created bytes.Buffer
	if code := execute([]string{"token", "create", "--kind", "service", "--name", "operator", "--data", dir, "--json"}, strings.NewReader(""), &created, io.Discard); code != 0 {
		srv1.Process.Kill()
		srv1.Wait()
		t.Fatalf("token create: %d", code)
	}
	var tok struct {
		Token string `json:"token"`
	}
	json.Unmarshal(created.Bytes(), &tok)
	s := runServer{url: base, token: tok.Token, dir: dir}
	if _, errs, code := s.cli(t, "run", "spawn", "--template", "exec sleep 300", "--id", "survivor"); code != 0 {
		srv1.Process.Kill()
		srv1.Wait()
		t.Fatalf("spawn: %s", errs)
	}
	if _, errs, code := s.cli(t, "run", "spawn", "--template", "while [ ! -e gate ]; do sleep 0.05; done; exit 3", "--id", "ender"); code != 0 {
		t.Fatalf("spawn: %s", errs)
	}
	srv1.Process.Signal(syscall.SIGKILL)
	srv1.Wait()

	// While no server runs, "ender" finishes.
	if err := os.WriteFile(filepath.Join(dir, "runs", "ender", "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "runs", "ender", "exit"))
		return err == nil
	}, "ender finishing")

	srv2, base2, _ := serveProcess(t, dir)
	defer func() {
		srv2.Process.Signal(syscall.SIGTERM)
		srv2.Wait()
	}()
	s.url = base2
	var view struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
	}
	out, errs, code := s.cli(t, "run", "inspect", "survivor", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &view) != nil || view.Status != "running" {
		t.Fatalf("survivor after restart: %d %s %s", code, out, errs)
	}
	out, _, _ = s.cli(t, "run", "inspect", "ender", "--json")
	if json.Unmarshal([]byte(out), &view) != nil || view.Status != "failed" || view.ExitCode == nil || *view.ExitCode != 3 {
		t.Fatalf("ender after restart: %s", out)
	}
	if out, errs, code = s.cli(t, "run", "kill", "survivor"); code != 0 || !strings.Contains(out, "killed: true") {
		t.Fatalf("kill survivor: %d %s %s", code, out, errs)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if out, _, _ = s.cli(t, "run", "inspect", "survivor"); !strings.Contains(out, "status: killed") {
			c.Errorf("survivor after kill: %s", out)
		}
	}, "the survivor killed")
}

// TestDemoService steers the demo player: pause, status and resume
// Controls are claimed, handled and reported in the Trace.
func TestDemoService(t *testing.T) {
	s := newRunServer(t)
	recipe := `{"template":"env > env.txt; exec sleep 300","control":["pause","resume","status"]}`
	if err := os.WriteFile(filepath.Join(s.dir, "recipes", "player.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := s.cli(t, "run", "spawn", "--recipe", "player", "--id", "player"); code != 0 {
		t.Fatalf("spawn: %s", errs)
	}
	defer s.cli(t, "run", "kill", "player")
	env := map[string]string{}
	testwait.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(s.dir, "runs", "player", "env.txt"))
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		return env["ASSENT_RUN_TOKEN"] != ""
	}, "the Run's environment")
	svc := &service.Service{URL: env["ASSENT_URL"], Token: env["ASSENT_RUN_TOKEN"], RunID: "player",
		InstanceID: env["ASSENT_RUN_INSTANCE_ID"], FIFO: env["ASSENT_CONTROL_FIFO"], HTTP: http.DefaultClient}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, svc, time.Hour, 0, io.Discard) }()
	defer func() {
		cancel()
		<-done
	}()
	for _, action := range []string{"pause", "status", "resume"} {
		testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
			_, errs, code := s.cli(t, "run", "control", "player", action)
			if code == 0 {
				return
			}
			if !strings.Contains(errs, "endpoint_not_ready") {
				t.Fatalf("%s: %s", action, errs)
			}
			c.Errorf("%s: %s", action, errs)
		}, "the player taking "+action)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		out, _, _ := s.cli(t, "run", "inspect", "player", "--view", "trace", "--lines", "200", "--json")
		if !strings.Contains(out, "player.paused") || !strings.Contains(out, "player.status") || !strings.Contains(out, "player.resumed") {
			c.Errorf("trace %s", out)
		}
	}, "the player's pause, status and resume in its Trace")
}

package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fixture struct {
	t   testing.TB
	db  *sqlite.DB
	dir string
	m   *Manager
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, db: db, dir: dir}
	f.m = f.open()
	t.Cleanup(func() {
		f.m.Close()
		db.Close()
	})
	return f
}

func (f *fixture) open() *Manager {
	m, err := New(context.Background(), Config{Store: f.db, DataDir: f.dir, PollInterval: 20 * time.Millisecond, Version: "test"})
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *fixture) spawn(owner, id, template string, control ...string) *Run {
	f.t.Helper()
	def := map[string]any{"template": template}
	if len(control) > 0 {
		def["control"] = control
	}
	b, _ := json.Marshal(def)
	r, err := DecodeRecipe(b)
	if err != nil {
		f.t.Fatal(err)
	}
	v, err := f.m.Spawn(context.Background(), owner, SpawnRequest{Definition: r, RunID: id})
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

// waitEnded waits until the supervisor has recorded the end of Run id.
func (f *fixture) waitEnded(id string) store.RunRecord {
	f.t.Helper()
	var r store.RunRecord
	testwait.Eventually(f.t, 20*time.Second, func() bool {
		var err error
		r, err = f.db.Run(context.Background(), id)
		return err == nil && !r.EndedAt.IsZero()
	}, "the end of run "+id)
	return r
}

func (f *fixture) status(owner, id string) Status {
	f.t.Helper()
	v, err := f.m.Status(context.Background(), owner, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return v.Status
}

func code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestRunStatuses(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		id, template string
		status       Status
	}{
		{"ok", "echo hello", StatusDone},
		{"bad", "exit 3", StatusFailed},
		{"vanished", `kill -9 $PPID`, StatusExited},
	}
	for _, tc := range tests {
		f.spawn("alice", tc.id, tc.template)
	}
	for _, tc := range tests {
		f.waitEnded(tc.id)
		if got := f.status("alice", tc.id); got != tc.status {
			t.Errorf("%s: status %s, want %s", tc.id, got, tc.status)
		}
	}
	out, _ := f.m.Logs(context.Background(), "alice", "ok", "stdout", 0)
	if out != "hello\n" {
		t.Errorf("stdout %q", out)
	}
	evs, _ := f.db.Trace(context.Background(), "bad", 0)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if strings.Join(kinds, ",") != "run.start,run.failed" {
		t.Errorf("lifecycle trace %v", kinds)
	}
}

func TestOwnershipIndistinguishable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.spawn("alice", "mine", "echo hi", "pause")
	f.waitEnded("mine")
	ops := map[string]func(owner, id string) error{
		"status": func(o, id string) error { _, err := f.m.Status(ctx, o, id); return err },
		"inspect": func(o, id string) error {
			_, err := f.m.Inspect(ctx, o, InspectRequest{Target: "run:" + id, View: "control"})
			return err
		},
		"control": func(o, id string) error { _, err := f.m.Apply(ctx, o, id, "pause", nil); return err },
		"kill":    func(o, id string) error { _, err := f.m.Kill(ctx, o, id); return err },
		"archive": func(o, id string) error { _, err := f.m.Archive(ctx, o, id); return err },
		"prune":   func(o, id string) error { _, err := f.m.Prune(ctx, o, id, true); return err },
		"logs":    func(o, id string) error { _, err := f.m.Logs(ctx, o, id, "stdout", 1); return err },
		"trace": func(o, id string) error {
			_, err := f.m.AppendTrace(ctx, o, id, "", TraceInput{Kind: "x"})
			return err
		},
		"claim": func(o, id string) error { _, err := f.m.Claim(ctx, o, id, "", ""); return err },
	}
	for name, op := range ops {
		foreign := op("mallory", "mine")
		missing := op("mallory", "none")
		if code(foreign) != CodeNotFound || code(missing) != CodeNotFound {
			t.Errorf("%s: foreign %v, missing %v", name, foreign, missing)
			continue
		}
		if strings.ReplaceAll(foreign.Error(), "mine", "X") != strings.ReplaceAll(missing.Error(), "none", "X") {
			t.Errorf("%s: %q and %q differ", name, foreign, missing)
		}
	}
	runs, _ := f.m.List(ctx, "mallory", "all")
	if len(runs) != 0 {
		t.Errorf("mallory lists %d runs", len(runs))
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var got string
	testwait.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		got = string(b)
		return err == nil && strings.HasSuffix(got, "\n")
	}, "a pid in "+path)
	n, _ := strconv.Atoi(strings.TrimSpace(got))
	return n
}

// pidByCmdline returns the pid of the one process whose command line
// holds marker.
func pidByCmdline(t *testing.T, marker string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), marker) {
			return pid
		}
	}
	t.Fatalf("no process runs with %q", marker)
	return 0
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, func() bool {
		_, zombie, err := procStartTime(pid)
		return err != nil || zombie
	}, fmt.Sprintf("process %d gone", pid))
}

func TestKillReachesGrandchildren(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The grandchild is found by its command line: in a Run's own PID
	// namespace the pid it sees of itself is not the server's.
	f.spawn("alice", "tree", `sh -c 'sleep 313.25 & echo $! > grandchild.pid; wait' & wait`)
	readPID(t, filepath.Join(f.dir, "runs", "tree", "grandchild.pid"))
	gc := pidByCmdline(t, "sleep\x00313.25")
	if f.status("alice", "tree") != StatusRunning {
		t.Fatal("not running")
	}
	res, err := f.m.Kill(ctx, "alice", "tree")
	if err != nil || !res.Killed || res.SignalTarget != "processGroup" {
		t.Fatalf("kill: %v %v", res, err)
	}
	waitGone(t, gc)
	f.waitEnded("tree")
	if s := f.status("alice", "tree"); s != StatusKilled {
		t.Fatalf("status %s", s)
	}
	res, err = f.m.Kill(ctx, "alice", "tree")
	if err != nil || res.Killed || res.Reason != "not running" {
		t.Fatalf("second kill: %v %v", res, err)
	}
}

func TestControlDelivery(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	v := f.spawn("alice", "svc", "sleep 300", "pause", "resume")
	instance := v.InstanceID
	defer func() {
		f.m.Kill(ctx, "alice", "svc")
		f.waitEnded("svc")
	}()

	// Undeclared actions and bad envelopes are refused before admission.
	if _, err := f.m.Apply(ctx, "alice", "svc", "stop", nil); code(err) != CodeUndeclaredAction || !strings.Contains(err.Error(), "available=pause,resume") {
		t.Fatalf("undeclared: %v", err)
	}
	if _, err := f.m.Apply(ctx, "alice", "svc", "pause", json.RawMessage(`"`+strings.Repeat("x", 379)+`"`)); code(err) != CodeInvalidControl {
		t.Fatalf("oversized input: %v", err)
	}
	// No reader on the FIFO: the record fails with endpoint_not_ready.
	_, err := f.m.Apply(ctx, "alice", "svc", "pause", nil)
	if code(err) != CodeEndpointNotReady {
		t.Fatalf("no reader: %v", err)
	}
	cs, _ := f.db.Controls(ctx, "svc")
	if len(cs) != 1 || cs[0].Status != store.ControlFailed || cs[0].Error != "control endpoint is not ready for this Run generation" {
		t.Fatalf("journal %+v", cs)
	}
	// A reader: delivered, then claimed by id and handled.
	fifo := decodeDoc(mustRun(t, f.db, "svc")).FIFO
	fd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	rd := os.NewFile(uintptr(fd), fifo)
	defer rd.Close()
	res, err := f.m.Apply(ctx, "alice", "svc", "resume", json.RawMessage(`{"reason":"operator","token":"s3cret"}`))
	if err != nil || res.Delivery == nil || res.Delivery.Delivery != "delivered" {
		t.Fatalf("apply: %v %v", res, err)
	}
	line, err := bufio.NewReader(rd).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	id, action, input, err := DecodeWireRecord(line[:len(line)-1])
	if err != nil || action != "resume" || id != res.Delivery.ControlID || !strings.Contains(string(input), "s3cret") {
		t.Fatalf("wire %q: %v", line, err)
	}
	// A stale generation never claims.
	if _, err := f.m.Claim(ctx, "alice", "svc", "00000000-0000-4000-8000-000000000000", id); code(err) != CodeGenerationMismatch {
		t.Fatalf("stale claim: %v", err)
	}
	c, err := f.m.Claim(ctx, "alice", "svc", instance, id)
	if err != nil || c.Status != store.ControlClaimed {
		t.Fatalf("claim: %v %v", c, err)
	}
	if _, err := f.m.Settle(ctx, "alice", "svc", instance, id, true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Settle(ctx, "alice", "svc", instance, id, false, "late"); code(err) != CodeConflict {
		t.Fatalf("settle twice: %v", err)
	}
	iv, err := f.m.Inspect(ctx, "alice", InspectRequest{Target: "run:svc", View: "control"})
	if err != nil {
		t.Fatal(err)
	}
	view := iv.(*ControlView)
	b, _ := json.Marshal(view)
	if strings.Contains(string(b), "s3cret") || view.Pending != 0 || view.Available != 64 || view.Backpressured {
		t.Fatalf("control view %s", b)
	}
	if rt := view.RuntimeActions; len(rt) != 1 || rt[0] != "kill" {
		t.Fatalf("runtime actions %v", rt)
	}
}

func mustRun(t *testing.T, db *sqlite.DB, id string) store.RunRecord {
	t.Helper()
	r, err := db.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestKillBypassesSaturatedJournal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	v := f.spawn("alice", "full", "sleep 300", "pause")
	for i := 0; i < ControlPendingLimit; i++ {
		now := t0
		if _, err := f.db.AdmitControl(ctx, "full", store.Control{ID: strconv.Itoa(i), InstanceID: v.InstanceID, Action: "pause", QueuedAt: &now}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.m.Apply(ctx, "alice", "full", "pause", nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeBackpressure || e.Details["pending"] != 64 || e.Details["limit"] != 64 || e.Details["oldest_pending_at"] != "2026-01-01T00:00:00.000Z" {
		t.Fatalf("65th: %v %+v", err, e)
	}
	if res, err := f.m.Apply(ctx, "alice", "full", "kill", nil); err != nil || res.Kill == nil || !res.Kill.Killed {
		t.Fatalf("kill: %v %v", res, err)
	}
	f.waitEnded("full")
	cs, _ := f.db.Controls(ctx, "full")
	if len(cs) != 64 {
		t.Fatalf("kill touched the journal: %d records", len(cs))
	}
}

func TestReconcileAfterRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.spawn("alice", "live", "sleep 300")
	f.spawn("alice", "ghost", "sleep 300")
	// The supervisor goes away; a Run's recorded process then dies
	// without anyone watching (its pid is made to point elsewhere).
	f.m.Close()
	g := mustRun(t, f.db, "ghost")
	realPID := g.PID
	g.PID = 1 << 22
	if err := f.db.SaveRun(ctx, g); err != nil {
		t.Fatal(err)
	}
	f.m = f.open()
	if s := f.status("alice", "live"); s != StatusRunning {
		t.Fatalf("live run after restart: %s", s)
	}
	if r := mustRun(t, f.db, "ghost"); r.EndedAt.IsZero() {
		t.Fatal("a vanished run was not reconciled")
	}
	if s := f.status("alice", "ghost"); s != StatusExited {
		t.Fatalf("vanished run: %s", s)
	}
	syscall.Kill(-realPID, syscall.SIGKILL)
	if res, err := f.m.Kill(ctx, "alice", "live"); err != nil || !res.Killed {
		t.Fatalf("kill re-adopted run: %v %v", res, err)
	}
	f.waitEnded("live")
	f.waitEnded("ghost")
	if s := f.status("alice", "live"); s != StatusKilled {
		t.Fatalf("status %s", s)
	}
}

func TestPIDReuseNeverSignalled(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.spawn("alice", "r", "sleep 300")
	r := mustRun(t, f.db, "r")
	good := r.StartTime
	r.StartTime = "1"
	f.db.SaveRun(ctx, r)
	res, err := f.m.Kill(ctx, "alice", "r")
	if err != nil || res.Killed {
		t.Fatalf("kill with a reused pid: %v %v", res, err)
	}
	if verifyProcess(r.PID, good) != identityValid {
		t.Fatal("the process was signalled")
	}
	r.StartTime = good
	f.db.SaveRun(ctx, r)
	f.m.Kill(ctx, "alice", "r")
	f.waitEnded("r")
}

func TestRestartArchivePrune(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	recipe := `{"template":"echo gen >> workload.txt; echo report > report.md","artifacts":{"report":"report.md","missing":"nope.txt"},"control":["pause"]}`
	if err := os.WriteFile(filepath.Join(f.dir, "recipes", "job.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	v1, err := f.m.Spawn(ctx, "alice", SpawnRequest{Recipe: "job", RunID: "job"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitEnded("job")
	v2, err := f.m.Spawn(ctx, "alice", SpawnRequest{Recipe: "job", RunID: "job"})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Generation != 2 || v2.InstanceID == v1.InstanceID {
		t.Fatalf("restart: %v", v2)
	}
	f.waitEnded("job")
	b, _ := os.ReadFile(filepath.Join(f.dir, "runs", "job", "workload.txt"))
	if string(b) != "gen\ngen\n" {
		t.Fatalf("workload file across generations: %q", b)
	}
	// A running Run cannot be archived or pruned; a live one cannot be respawned.
	f.spawn("alice", "busy", "sleep 300")
	if _, err := f.m.Archive(ctx, "alice", "busy"); code(err) != CodeNotTerminal {
		t.Fatalf("archive running: %v", err)
	}
	if _, err := f.m.Spawn(ctx, "alice", SpawnRequest{Template: json.RawMessage(`"true"`), RunID: "busy"}); code(err) != CodeRunActive {
		t.Fatalf("respawn live: %v", err)
	}
	f.m.Kill(ctx, "alice", "busy")
	f.waitEnded("busy")

	res, err := f.m.Archive(ctx, "alice", "job")
	if err != nil || !res.Archived {
		t.Fatalf("archive: %v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "runs", "job", "archive-tombstone.json")); err != nil {
		t.Fatal("no tombstone")
	}
	st, _ := f.m.Status(ctx, "alice", "job")
	if !st.Archived {
		t.Fatalf("status after archive %v", st)
	}
	if _, err := f.m.Spawn(ctx, "alice", SpawnRequest{Recipe: "job", RunID: "job"}); code(err) != CodeRunArchived {
		t.Fatalf("spawn over a tombstone: %v", err)
	}
	// The removed spelling preserveArtifacts is refused, not ignored:
	// ignoring it would delete what its sender asked to keep.
	if _, err := f.m.Apply(ctx, "alice", "job", "prune", json.RawMessage(`{"preserveArtifacts":true}`)); code(err) != CodeInvalidRequest {
		t.Fatalf("prune with preserveArtifacts: %v", err)
	}
	if _, err := f.m.Status(ctx, "alice", "job"); err != nil {
		t.Fatalf("a refused prune removed the Run: %v", err)
	}
	pruned, err := f.m.Prune(ctx, "alice", "job", true)
	if err != nil {
		t.Fatal(err)
	}
	kept := pruned.PreservedArtifacts
	if len(kept) != 1 || kept["report"] == "" {
		t.Fatalf("preserved %v", kept)
	}
	if b, _ := os.ReadFile(kept["report"]); string(b) != "report\n" {
		t.Fatalf("preserved content %q", b)
	}
	if _, err := f.m.Status(ctx, "alice", "job"); code(err) != CodeNotFound {
		t.Fatalf("after prune: %v", err)
	}
	// Without preservation nothing is kept.
	pruned, err = f.m.Prune(ctx, "alice", "busy", false)
	if err != nil || len(pruned.PreservedArtifacts) != 0 {
		t.Fatalf("prune: %v %v", pruned, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "runs", "busy")); !os.IsNotExist(err) {
		t.Fatal("state left behind")
	}
}

func TestInspectViews(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.spawn("alice", "v", "exit 2", "pause")
	f.waitEnded("v")
	if _, err := f.m.AppendTrace(ctx, "alice", "v", "", TraceInput{Kind: "checkpoint.ready", Summary: "password=hunter2", Attention: "followup"}); err != nil {
		t.Fatal(err)
	}
	for _, req := range []InspectRequest{
		{Target: "runtime", View: "status"}, {Target: "runtime", View: "runs"}, {Target: "runtime", View: "triage"},
		{Target: "run:v", View: "status"}, {Target: "run:v", View: "recipe"}, {Target: "run:v", View: "trace"}, {Target: "run:v", View: "control"},
		{Target: "recipes", View: "summary"},
	} {
		v, err := f.m.Inspect(ctx, "alice", req)
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), "hunter2") {
			t.Errorf("%v leaks a secret: %s", req, b)
		}
		if v.Compact() == "" {
			t.Errorf("%v: no compact text", req)
		}
	}
	iv, _ := f.m.Inspect(ctx, "alice", InspectRequest{Target: "runtime", View: "triage"})
	tri := iv.(*Triage)
	if fr := tri.FailedRuns; len(fr) != 1 || fr[0] != "v" {
		t.Fatalf("triage %v", tri)
	}
	for _, bad := range []InspectRequest{{Target: "run:v", View: "nope"}, {Target: "room:x", View: "status"}, {Target: "runtime", View: "x"}} {
		if _, err := f.m.Inspect(ctx, "alice", bad); code(err) != CodeInvalidRequest {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestMain fails the package when a supervision goroutine outlives the
// tests (every test kills what it starts and closes its Manager).
//
// With ASSENT_TEST_ADMIT_DB set, the test binary is instead one admission
// worker of TestAdmitSeparateProcesses: it admits one Control and exits 0,
// or 2 with control_backpressure on stderr.
func TestMain(m *testing.M) {
	if db := os.Getenv("ASSENT_TEST_ADMIT_DB"); db != "" {
		os.Exit(admitWorker(db, os.Getenv("ASSENT_TEST_ADMIT_RUN"), os.Getenv("ASSENT_TEST_ADMIT_INSTANCE")))
	}
	Init()
	goleak.VerifyTestMain(m)
}

func admitWorker(path, runID, instance string) int {
	ctx := context.Background()
	// Opening checks the schema under the write lock; with 76 processes
	// starting at once that can time out, which is not what this tests.
	var db *sqlite.DB
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if db, err = sqlite.Open(ctx, path); err == nil {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	now := time.Now()
	c := store.Control{ID: uuid.NewString(), InstanceID: instance, Action: "pause", QueuedAt: &now}
	// SQLite's wait for the write lock is not first come, first served:
	// on a loaded machine one of 76 processes can wait past the busy
	// timeout while later ones write. A refused write wrote nothing, so
	// it is sent again; the bound is what this tests.
	for attempt := 0; ; attempt++ {
		_, err = db.AdmitControl(ctx, runID, c)
		if attempt == 4 || err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") {
			break
		}
	}
	var ce *store.ControlError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce) && ce.Reason == "control_backpressure":
		fmt.Fprintln(os.Stderr, "control_backpressure")
		return 2
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// TestAdmitSeparateProcesses: 76 processes admitting against an empty
// journal → exactly 64 admitted and 12 control_backpressure.
func TestAdmitSeparateProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 76 processes")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "assent.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	instance := uuid.NewString()
	if err := db.ClaimRun(ctx, store.RunRecord{ID: "race", OwnerID: "alice", InstanceID: instance, Generation: 1, CreatedAt: t0, StartedAt: t0}, ""); err != nil {
		t.Fatal(err)
	}
	const workers = 76
	cmds := make([]*exec.Cmd, workers)
	outs := make([]*strings.Builder, workers)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ASSENT_TEST_ADMIT_DB="+path, "ASSENT_TEST_ADMIT_RUN=race", "ASSENT_TEST_ADMIT_INSTANCE="+instance)
		outs[i] = &strings.Builder{}
		cmd.Stderr = outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	admitted, refused := 0, 0
	for i, cmd := range cmds {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			admitted++
		case errors.As(err, &ee) && ee.ExitCode() == 2 && strings.Contains(outs[i].String(), "control_backpressure"):
			refused++
		default:
			t.Errorf("worker %d: %v %s", i, err, outs[i])
		}
	}
	cs, err := db.Controls(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	if admitted != 64 || refused != 12 || len(cs) != 64 {
		t.Fatalf("admitted=%d refused=%d journal=%d, want 64, 12, 64", admitted, refused, len(cs))
	}
}

type fakeTokens struct {
	mu      sync.Mutex
	issued  []string
	revoked []string
}

func (f *fakeTokens) IssueRunToken(ctx context.Context, owner, run, instance string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := "tok-" + run
	f.issued = append(f.issued, owner+"/"+run+"/"+instance)
	return "secret-" + run, id, nil
}

func (f *fakeTokens) RevokeRunToken(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, id)
	return nil
}

func TestRunTokenLifecycle(t *testing.T) {
	f := newFixture(t)
	f.m.Close()
	tokens := &fakeTokens{}
	m, err := New(context.Background(), Config{Store: f.db, DataDir: f.dir, Tokens: tokens, URL: "http://example.test"})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	v := f.spawn("alice", "tok", `echo "$ASSENT_RUN_TOKEN $ASSENT_URL $ASSENT_RUN_ID $ASSENT_RUN_INSTANCE_ID"`)
	f.waitEnded("tok")
	out, _ := m.Logs(context.Background(), "alice", "tok", "stdout", 0)
	// The token is masked in the output by the Run's init or, without
	// namespaces, by the relay.
	if want := redactedMarker + " " + m.runURL() + " tok " + v.InstanceID + "\n"; out != want {
		t.Fatalf("environment %q, want %q", out, want)
	}
	tokens.mu.Lock()
	defer tokens.mu.Unlock()
	if len(tokens.issued) != 1 || tokens.issued[0] != "alice/tok/"+v.InstanceID || len(tokens.revoked) != 1 || tokens.revoked[0] != "tok-tok" {
		t.Fatalf("issued %v revoked %v", tokens.issued, tokens.revoked)
	}
}

func TestSingleton(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	recipe := `{"async":true,"singleton":true,"args":["mode=a"],"template":"exec sleep 300","control":["pause"]}`
	if err := os.WriteFile(filepath.Join(f.dir, "recipes", "player.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := f.m.Spawn(ctx, "alice", SpawnRequest{Recipe: "player"})
	if err != nil || v.ID != "player" {
		t.Fatalf("spawn: %v %v", v, err)
	}
	defer func() {
		f.m.Kill(ctx, "alice", "player")
		f.waitEnded("player")
	}()
	again, err := f.m.Spawn(ctx, "alice", SpawnRequest{Recipe: "player"})
	if err != nil || !again.Reused || again.InstanceID != v.InstanceID {
		t.Fatalf("compatible relaunch: %v %v", again, err)
	}
	if _, err := f.m.Spawn(ctx, "alice", SpawnRequest{Recipe: "player", Values: map[string]json.RawMessage{"mode": json.RawMessage(`"b"`)}}); code(err) != CodeRunActive || !strings.Contains(err.Error(), "incompatible") {
		t.Fatalf("incompatible relaunch: %v", err)
	}
	if _, err := f.m.Spawn(ctx, "alice", SpawnRequest{Recipe: "player", RunID: "other"}); err == nil || !strings.Contains(err.Error(), "singleton Recipe run identity is run:player; received run:other") {
		t.Fatalf("other id: %v", err)
	}
}

func TestNotify(t *testing.T) {
	f := newFixture(t)
	f.m.Close()
	var mu sync.Mutex
	seen := map[string]bool{}
	m, err := New(context.Background(), Config{Store: f.db, DataDir: f.dir, Notify: func(owner, run, kind string) {
		mu.Lock()
		defer mu.Unlock()
		seen[owner+"/"+run+"/"+kind] = true
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	f.spawn("alice", "n", "true")
	f.waitEnded("n")
	if _, err := m.AppendTrace(context.Background(), "alice", "n", "", TraceInput{Kind: "x.y"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"alice/n/run.status", "alice/n/run.trace"} {
		if !seen[want] {
			t.Errorf("no %s in %v", want, seen)
		}
	}
}

func TestPruneAbortsWhenPreservingFails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r, err := DecodeRecipe([]byte(`{"template":"echo r > report.md","artifacts":{"report":"report.md"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Spawn(ctx, "alice", SpawnRequest{Definition: r, RunID: "keep"}); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("keep")
	// A file where the preserved-artifacts directory must go makes the
	// copy fail.
	blocker := filepath.Join(f.dir, "archive", "preserved-artifacts", "keep")
	os.MkdirAll(filepath.Dir(blocker), 0o700)
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Prune(ctx, "alice", "keep", true); err == nil || !strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("prune: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "runs", "keep", "report.md")); err != nil {
		t.Fatal("the Run's files were deleted")
	}
	if s := f.status("alice", "keep"); s != StatusDone {
		t.Fatalf("status %s", s)
	}
}

func TestControlDiagnostics(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	v := f.spawn("alice", "diag", "true", "pause")
	f.waitEnded("diag")
	now := t0
	if _, err := f.db.AdmitControl(ctx, "diag", store.Control{ID: "c1", InstanceID: v.InstanceID, Action: "pause", QueuedAt: &now}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.SQL().Exec(`UPDATE run_controls SET status = 'lost'`); err != nil {
		t.Fatal(err)
	}
	iv, err := f.m.Inspect(ctx, "alice", InspectRequest{Target: "run:diag", View: "control"})
	if err != nil {
		t.Fatal(err)
	}
	cv := iv.(*ControlView)
	diags := cv.Diagnostics
	if len(diags) != 1 || diags[0].Reason != "invalid_status" || cv.Pending != 0 {
		t.Fatalf("control view %v", cv)
	}
	iv, _ = f.m.Inspect(ctx, "alice", InspectRequest{Target: "runtime", View: "triage"})
	tri := iv.(*Triage)
	if tri.ControlDiagnosticCount != 1 || tri.PendingControlCount != 0 {
		t.Fatalf("triage %v", tri)
	}
}

// Controls a stop of the server left pending never wait forever: at the
// next start a Control admitted but not yet written to a live Run's FIFO
// is delivered, and the pending Controls of a Run that ended meanwhile
// fail with terminal_state.
func TestPendingControlsAfterRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	live := f.spawn("alice", "live", "sleep 300", "pause")
	f.spawn("alice", "gone", "sleep 300", "pause")
	f.m.Close()
	// A reader on the live Run's FIFO, as the Run's own loop would be.
	fifo := decodeDoc(mustRun(t, f.db, "live")).FIFO
	fd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	rd := os.NewFile(uintptr(fd), fifo)
	defer rd.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	admit := func(run, instance, id string) {
		t.Helper()
		c := store.Control{ID: id, InstanceID: instance, Action: "pause", Status: store.ControlQueued, QueuedAt: &now}
		if _, err := f.db.AdmitControl(ctx, run, c); err != nil {
			t.Fatal(err)
		}
	}
	// Admitted, then the server was killed before writing it.
	admit("live", live.InstanceID, "11111111-1111-4111-8111-111111111111")
	// Queued on a Run whose process died while no server watched.
	g := mustRun(t, f.db, "gone")
	admit("gone", g.InstanceID, "33333333-3333-4333-8333-333333333333")
	realPID := g.PID
	g.PID = 1 << 22
	if err := f.db.SaveRun(ctx, g); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(-realPID, syscall.SIGKILL)

	f.m = f.open()
	defer func() {
		f.m.Kill(ctx, "alice", "live")
		f.waitEnded("live")
	}()
	f.waitEnded("gone")
	want := map[string]string{
		"11111111-1111-4111-8111-111111111111": store.ControlDelivered,
		"33333333-3333-4333-8333-333333333333": store.ControlFailed,
	}
	testwait.EventuallyC(t, 10*time.Second, func(wc *testwait.C) {
		got := map[string]store.Control{}
		for _, run := range []string{"live", "gone"} {
			cs, err := f.db.Controls(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				got[c.ID] = c
			}
		}
		for id, status := range want {
			c := got[id]
			if c.Status != status || (status == store.ControlFailed && !strings.HasPrefix(c.Error, "terminal_state")) {
				wc.Errorf("controls after restart: %+v; want %v", got, want)
				return
			}
		}
	}, "the pending controls settled after the restart")
	line, err := bufio.NewReader(rd).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if id, _, _, err := DecodeWireRecord(line[:len(line)-1]); err != nil || id != "11111111-1111-4111-8111-111111111111" {
		t.Fatalf("the FIFO received %q (%v)", line, err)
	}
}

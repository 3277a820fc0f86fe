package run

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store/sqlite"
)

// openWith opens a Manager on the fixture's store with cfg's extra fields.
func (f *fixture) openWith(cfg Config) *Manager {
	f.t.Helper()
	cfg.Store, cfg.PollInterval, cfg.Version = f.db, 20*time.Millisecond, "test"
	if cfg.DataDir == "" {
		cfg.DataDir = f.dir
	}
	m, err := New(context.Background(), cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(m.Close)
	return m
}

// spawnRecipe spawns the Recipe JSON def as owner.
func spawnRecipe(t *testing.T, m *Manager, owner, id, def string, values map[string]any, secret ...string) (*Run, error) {
	t.Helper()
	r, err := DecodeRecipe([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]json.RawMessage{}
	for k, v := range values {
		vals[k], _ = json.Marshal(v)
	}
	return m.Spawn(context.Background(), owner, SpawnRequest{Definition: r, RunID: id, Values: vals, Secret: secret})
}

func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// A relative data directory becomes absolute, so every path a Run gets is
// absolute and its FIFO and exit file work from the Run's own directory.
func TestRelativeDataDirGivesAbsolutePaths(t *testing.T) {
	base := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(base, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	t.Chdir(base)
	f := &fixture{t: t, db: db, dir: base}
	m := f.openWith(Config{DataDir: "assent-data", StartGrace: time.Minute})
	if !filepath.IsAbs(m.DataDir()) {
		t.Fatalf("DataDir %q is not absolute", m.DataDir())
	}
	v, err := spawnRecipe(t, m, "alice", "rel", `{"template": "printf '%s\n' \"$ASSENT_STATE_DIR\" \"$ASSENT_CONTROL_FIFO\" \"$(pwd)\"; test -p \"$ASSENT_CONTROL_FIFO\""}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != StatusDone {
		t.Fatalf("status = %v (stderr %v), want done", v.Status, v.StderrHead)
	}
	out, err := m.Logs(context.Background(), "alice", "rel", "stdout", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(base, "assent-data", "runs", "rel")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != want || !filepath.IsAbs(lines[1]) || lines[2] != want {
		t.Fatalf("paths seen by the Run = %q; want state dir and cwd %s and an absolute FIFO", lines, want)
	}
}

// A Run that cannot start or exits at once answers failed with the head of
// its stderr, and the status, triage and Control views agree.
func TestSpawnReportsImmediateFailure(t *testing.T) {
	f := newFixture(t)
	m := f.openWith(Config{StartGrace: time.Minute})
	tests := []struct {
		name, id, template, want string
	}{
		{"exit code", "dies", `echo "boom: cannot open config" >&2; exit 3`, "boom: cannot open config"},
		{"missing program", "missing", `/nonexistent/bin/service --flag`, "/nonexistent/bin/service"},
		{"long stderr", "noisy", `i=0; while [ $i -lt 50 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 1`, "line 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def, _ := json.Marshal(map[string]any{"template": tc.template, "control": []string{"pause"}})
			v, err := spawnRecipe(t, m, "alice", tc.id, string(def), nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status != StatusFailed {
				t.Fatalf("spawn status = %v, want failed", v.Status)
			}
			head := v.StderrHead
			if !strings.Contains(head, tc.want) {
				t.Fatalf("stderr_head = %q, want it to contain %q", head, tc.want)
			}
			if n := strings.Count(head, "\n") + 1; n > stderrHeadLines || len(head) > stderrHeadBytes {
				t.Fatalf("stderr_head has %d lines, %d bytes; bounds are %d and %d", n, len(head), stderrHeadLines, stderrHeadBytes)
			}
			st, err := m.Status(context.Background(), "alice", tc.id)
			if err != nil || st.Status != StatusFailed || st.StderrHead != head {
				t.Fatalf("status view = %v, %v; want failed with the same stderr_head", st, err)
			}
			_, err = m.Apply(context.Background(), "alice", tc.id, "pause", nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != "terminal_state" || e.Details["status"] != StatusFailed {
				t.Fatalf("pause on the dead Run = %v, want terminal_state with status failed", err)
			}
		})
	}
	iv, err := m.Inspect(context.Background(), "alice", InspectRequest{Target: "runtime", View: "triage"})
	if err != nil {
		t.Fatal(err)
	}
	tri := iv.(*Triage)
	if tri.FailedRunCount != len(tests) || len(tri.FailedRuns) != len(tests) {
		t.Fatalf("triage failed = %v (%v), want %d", tri.FailedRunCount, tri.FailedRuns, len(tests))
	}
	for _, d := range tri.FailedRunDetails {
		if d.StderrHead == "" {
			t.Fatalf("triage detail %v has no stderr_head", d)
		}
	}
}

// A Run's process sees only the documented environment: no variable of the
// server's, a fixed PATH, HOME in its directory, the ASSENT_* variables and
// what its Recipe declares.
func TestRunEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("SERVER_ONLY_SECRET", "hunter2")
	t.Setenv("ASSENT_SERVER_SETTING", "leak")
	f := newFixture(t)
	m := f.openWith(Config{StartGrace: time.Minute})
	def := `{"args": ["name"], "env": {"GREETING": "hello {name}"}, "template": "env; echo PWD_IS=$(pwd)"}`
	v, err := spawnRecipe(t, m, "alice", "envcheck", def, map[string]any{"name": "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != StatusDone {
		t.Fatalf("status = %v (%v)", v.Status, v.StderrHead)
	}
	out, _ := m.Logs(context.Background(), "alice", "envcheck", "stdout", 0)
	dir := filepath.Join(m.DataDir(), "runs", "envcheck")
	for _, bad := range []string{"SERVER_ONLY_SECRET", "hunter2", "ASSENT_SERVER_SETTING"} {
		if strings.Contains(out, bad) {
			t.Errorf("Run environment shows %s:\n%s", bad, out)
		}
	}
	for _, want := range []string{"PATH=" + SafePATH + "\n", "HOME=" + dir + "\n", "GREETING=hello bob\n",
		"ASSENT_RUN_ID=envcheck\n", "ASSENT_STATE_DIR=" + dir + "\n", "PWD_IS=" + dir + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("Run environment lacks %q:\n%s", want, out)
		}
	}
}

// When the server is root, a Run runs as an unprivileged uid of its own:
// it cannot read the database, yet writes its own files.
func TestRunDropsRootAndCannotReadDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: privileges are dropped only when the server is root")
	}
	f := newFixture(t)
	m := f.openWith(Config{StartGrace: time.Minute})
	first, last, ok := m.RunUIDs()
	if !ok {
		t.Fatal("the server is root but Runs get no uid range")
	}
	dbPath := filepath.Join(f.dir, "assent.db")
	def, _ := json.Marshal(map[string]any{"template": "id -u > me.txt; cat " + ShellQuote(dbPath) + " > stolen.bin"})
	v, err := spawnRecipe(t, m, "mallory", "thief", string(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != StatusFailed || v.ExitCode != nil && *v.ExitCode == 0 {
		t.Fatalf("reading the database: status %v exit %v, want failed", v.Status, v.ExitCode)
	}
	if fi, err := os.Stat(filepath.Join(m.DataDir(), "runs", "thief", "stolen.bin")); err != nil || fi.Size() != 0 {
		t.Fatalf("stolen copy: %v %v; want an empty file", fi, err)
	}
	me, err := os.ReadFile(filepath.Join(m.DataDir(), "runs", "thief", "me.txt"))
	uid, _ := strconv.Atoi(strings.TrimSpace(string(me)))
	if err != nil || uid < first || uid > last {
		t.Fatalf("Run ran as %q (%v), want a uid in %d-%d", me, err, first, last)
	}
	for _, p := range []string{dbPath, m.DataDir()} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o044 != 0 {
			t.Errorf("%s mode %v is readable by others", p, fi.Mode().Perm())
		}
	}
}

func TestRunIDBound(t *testing.T) {
	f := newFixture(t)
	// Spawn waits for these short Runs to end, so none outlives the test.
	f.m = f.openWith(Config{StartGrace: time.Minute})
	for _, tc := range []struct {
		n    int
		want string
	}{{RunIDMaxBytes, ""}, {RunIDMaxBytes + 1, CodeLimitExceeded}, {255, CodeLimitExceeded}, {4096, CodeLimitExceeded}} {
		id := strings.Repeat("a", tc.n)
		_, err := spawnRecipe(t, f.m, "alice", id, `{"template": "true"}`, nil)
		if codeOf(err) != tc.want {
			t.Errorf("id of %d bytes: %v, want code %q", tc.n, err, tc.want)
		}
		if _, err := ParseTarget("run:" + id); tc.want != "" && codeOf(err) != tc.want {
			t.Errorf("target with an id of %d bytes: %v, want %q", tc.n, err, tc.want)
		}
	}
}

func TestArtifactPathsConfined(t *testing.T) {
	f := newFixture(t)
	f.m = f.openWith(Config{StartGrace: time.Minute})
	tests := []struct {
		name, recipe string
		req          map[string]Artifact
		want         string
	}{
		{"relative", `{"template": "true", "artifacts": {"out": "out/{n}.txt"}}`, nil, ""},
		{"state_dir", `{"template": "true", "artifacts": {"out": "{state_dir}/o.txt"}}`, nil, ""},
		{"traversal", `{"template": "true", "artifacts": {"pw": "../../../../etc/passwd"}}`, nil, CodeInvalidRequest},
		{"absolute outside", `{"template": "true", "artifacts": {"pw": "/etc/passwd"}}`, nil, CodeInvalidRequest},
		{"sibling run", `{"template": "true", "artifacts": {"x": "{state_dir}/../other/secret"}}`, nil, CodeInvalidRequest},
		{"placeholder traversal", `{"template": "true", "artifacts": {"x": "{n}"}}`, nil, CodeInvalidRequest},
		{"request traversal", `{"template": "true"}`, map[string]Artifact{"pw": {Path: "../../../../etc/passwd"}}, CodeInvalidRequest},
		{"request absolute", `{"template": "true"}`, map[string]Artifact{"pw": {Path: "/etc/shadow"}}, CodeInvalidRequest},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeRecipe([]byte(`{"args": ["n=x"], ` + tc.recipe[1:]))
			if err != nil {
				t.Fatal(err)
			}
			n := "a"
			if tc.name == "placeholder traversal" {
				n = "../../../../etc/passwd"
			}
			vals := map[string]json.RawMessage{"n": json.RawMessage(strconv.Quote(n))}
			_, err = f.m.Spawn(context.Background(), "alice", SpawnRequest{Definition: r, RunID: "art" + strconv.Itoa(i), Values: vals, Artifacts: tc.req})
			if codeOf(err) != tc.want {
				t.Fatalf("spawn: %v, want code %q", err, tc.want)
			}
		})
	}
}

// A log line is bounded in the Logs view.
func TestLogsBoundLines(t *testing.T) {
	f := newFixture(t)
	m := f.openWith(Config{StartGrace: time.Minute})
	if _, err := spawnRecipe(t, m, "alice", "loud", `{"template": "head -c 100000 /dev/zero | tr '\\000' x; echo; echo short"}`, nil); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("loud")
	out, err := m.Logs(context.Background(), "alice", "loud", "stdout", 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) > logLineMaxBytes+32 || !strings.HasSuffix(lines[0], "[truncated]") || lines[1] != "short" {
		t.Fatalf("Logs gave %d lines, first %d bytes; want the long line cut to %d bytes and marked", len(lines), len(lines[0]), logLineMaxBytes)
	}
}

// Values of secret arguments, of names in SpawnRequest.Secret and of
// secret-looking names reach the process but no view or stored document.
func TestSecretValuesMasked(t *testing.T) {
	f := newFixture(t)
	m := f.m
	def := `{"args": ["pin:string!secret", "api_key", "note", "title"], "async": true,
		"template": "printf '%s %s %s' {pin} {api_key} {note} > got.txt; sleep 30"}`
	values := map[string]any{"pin": "4921", "api_key": "sk-live-77aa", "note": "flow-param-secret", "title": "visible-title"}
	v, err := spawnRecipe(t, m, "alice", "sec", def, values, "note")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Kill(context.Background(), "alice", "sec")
		f.waitEnded("sec")
	})
	got := filepath.Join(m.DataDir(), "runs", "sec", "got.txt")
	testwait.Eventually(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(got)
		return len(b) > 0
	}, "the process writing "+got)
	if b, _ := os.ReadFile(got); string(b) != "4921 sk-live-77aa flow-param-secret" {
		t.Fatalf("process received %q, want the real values", b)
	}
	var docs []any
	docs = append(docs, v)
	for _, view := range []string{"status", "recipe", "trace", "control"} {
		out, err := m.Inspect(context.Background(), "alice", InspectRequest{Target: "run:sec", View: view})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, out)
	}
	rec, err := f.db.Run(context.Background(), "sec")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, json.RawMessage(rec.Doc))
	all, _ := json.Marshal(docs)
	for _, secret := range []string{"4921", "sk-live-77aa", "flow-param-secret"} {
		if strings.Contains(string(all), secret) {
			t.Errorf("secret %q shows in a view or the stored document", secret)
		}
	}
	if !strings.Contains(string(all), "visible-title") {
		t.Errorf("a value that is not secret was masked too")
	}
}

func TestSecretKey(t *testing.T) {
	secret := []string{
		"pin", "PIN", "user_pin", "pinCode", "pin-code", "otp", "otpCode", "OTP_CODE", "totp",
		"iban", "IBAN", "ibanNumber", "card", "card_number", "cardNumber", "credit-card", "cvv", "cvc",
		"ssn", "SSN", "secret", "client_secret", "clientSecret", "secrets", "token", "accessToken",
		"refresh_token", "authtoken", "x-auth-token", "password", "Password", "db.password", "dbPassword",
		"passwd", "pwd", "passphrase", "api_key", "apiKey", "api-key", "apikey", "APIKey", "x-api-key",
		"private_key", "privateKey", "secretAccessKey", "authorization", "Authorization", "cookie",
		"credentials", "security_code", "jwt", "bearer",
	}
	plain := []string{
		"interval", "pinned", "spinner", "opinion", "pinyin", "shipping", "cardinal", "discard",
		"scorecard", "ticks", "title", "note", "name", "keyboard", "key", "monkey", "api", "tokens_used",
		"max_tokens", "input_tokens", "passenger", "bypass", "cvvx", "session_id", "run_id", "state_dir",
		"email", "address", "amount", "",
	}
	for _, k := range secret {
		if !SecretKey(k) {
			t.Errorf("SecretKey(%q) = false, want true", k)
		}
	}
	for _, k := range plain {
		if SecretKey(k) {
			t.Errorf("SecretKey(%q) = true, want false", k)
		}
	}
}

func TestRedactTextKeys(t *testing.T) {
	tests := []struct{ in, want string }{
		{"pin=1234 interval=2", "pin=[REDACTED] interval=2"},
		{`card_number: "4111 1111"`, "card_number: [REDACTED]"},
		{"Authorization: Bearer abc.def", "Authorization: [REDACTED] [REDACTED]"},
		{"apiKey=sk-1&page=2", "apiKey=[REDACTED]&page=2"},
		{"pinned=true", "pinned=true"},
	}
	for _, tc := range tests {
		if got := RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzSecretKey(f *testing.F) {
	for _, s := range []string{"apiKey", "IBANNumber", "x-api-key", "ÀpiKey", "a__b", "\xff\xfe", "PIN2fa"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		_ = SecretKey(k)
		_ = RedactText(k + "=v")
	})
}

// An id held by another principal answers exactly as an id lost to a
// concurrent claim: the same code and message whatever that Run's state.
func TestSpawnOnOthersIDRevealsNothing(t *testing.T) {
	f := newFixture(t)
	m := f.m
	if _, err := spawnRecipe(t, m, "alice", "live", `{"template": "sleep 30"}`, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Kill(context.Background(), "alice", "live")
		f.waitEnded("live")
	})
	if _, err := spawnRecipe(t, m, "alice", "gone", `{"template": "exit 2"}`, nil); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("gone")
	if _, err := spawnRecipe(t, m, "alice", "kept", `{"template": "true"}`, nil); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("kept")
	if _, err := m.Archive(context.Background(), "alice", "kept"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"live", "gone", "kept"} {
		_, err := spawnRecipe(t, m, "mallory", id, `{"template": "true"}`, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeConflict || e.Message != "Run id "+id+" is not available; choose another id." || e.Details != nil {
			t.Errorf("mallory spawning %s: %#v, want the plain conflict", id, err)
		}
	}
}

// A secret argument's default and fixed value are masked in the recipe
// view's definition too.
func TestSecretDefaultsMaskedInRecipeView(t *testing.T) {
	f := newFixture(t)
	f.m = f.openWith(Config{StartGrace: time.Minute})
	def := `{"args": ["pin:string!secret=0000", "code:string!secret"], "values": {"code": "9999"}, "template": "true"}`
	if _, err := spawnRecipe(t, f.m, "alice", "defs", def, nil); err != nil {
		t.Fatal(err)
	}
	v, err := f.m.Inspect(context.Background(), "alice", InspectRequest{Target: "run:defs", View: "recipe"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), "0000") || strings.Contains(string(b), "9999") {
		t.Fatalf("recipe view shows a secret default or value: %s", b)
	}
}

// A Run that plants a symbolic link at its artifact's path learns nothing
// about the file it points to, and preserving does not copy it.
func TestArtifactSymlinkNotFollowed(t *testing.T) {
	f := newFixture(t)
	m := f.openWith(Config{StartGrace: time.Minute})
	def := `{"template": "ln -s /etc/passwd loot.txt; mkdir -p d; ln -s /etc d2", "artifacts": {"loot": "loot.txt", "deep": "d2/passwd"}}`
	if _, err := spawnRecipe(t, m, "alice", "planter", def, nil); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("planter")
	v, err := m.Status(context.Background(), "alice", "planter")
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range v.Artifacts {
		if e.Exists || e.Size != nil {
			t.Errorf("artifact %s through a link reports %v", name, e)
		}
	}
	res, err := m.Prune(context.Background(), "alice", "planter", true)
	if err != nil {
		t.Fatal(err)
	}
	if kept := res.PreservedArtifacts; len(kept) != 0 {
		t.Fatalf("preserved through links: %v", kept)
	}
}

func TestResolveRunUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if a, err := resolveRunUser("65534:65534"); a != nil || err != nil {
			t.Fatalf("not root: %+v %v; want no change", a, err)
		}
		return
	}
	tests := []struct {
		spec        string
		uid, gid    uint32
		first, last uint32
		none        bool
		err         bool
	}{
		{spec: "", first: 2000000000, last: 2000999999},
		{spec: "5000-6000", first: 5000, last: 6000},
		{spec: "999-2000", err: true},
		{spec: "6000-5000", err: true},
		{spec: "1234:5678", uid: 1234, gid: 5678},
		{spec: "0:0", none: true},
		{spec: "root", none: true},
		{spec: "no-such-user-here", err: true},
		{spec: "a:b", err: true},
		{spec: "1:", err: true},
	}
	for _, tc := range tests {
		a, err := resolveRunUser(tc.spec)
		switch {
		case tc.err:
			if err == nil {
				t.Errorf("%q: %+v, want an error", tc.spec, a)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.spec, err)
		case tc.none:
			if a != nil {
				t.Errorf("%q: %+v, want root kept", tc.spec, a)
			}
		case tc.last != 0:
			if a == nil || !a.ranged || a.first != tc.first || a.last != tc.last {
				t.Errorf("%q: %+v, want each process its own uid from %d-%d", tc.spec, a, tc.first, tc.last)
			}
		case a == nil || a.ranged || a.uid != tc.uid || a.gid != tc.gid:
			t.Errorf("%q: %+v, want %d:%d", tc.spec, a, tc.uid, tc.gid)
		}
	}
}

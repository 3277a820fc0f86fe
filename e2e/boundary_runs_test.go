package e2e

// The Run boundary, attacked: each test does what an attacker holding only
// an agent's token tried against Runs, and asserts it is refused with a
// code or gets nothing. The agent holds command.execute, so it may run its
// own commands: the sandbox is what is under test.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// runsTarget is a server under attack: its data directory, the owner's
// agent token (the victim) and an attacking agent's token.
type runsTarget struct {
	url, dir         string
	victim, attacker string
}

func newRunsTarget(t *testing.T) runsTarget {
	t.Helper()
	a := newAppIn(t, t.TempDir(), false, nil)
	return runsTarget{url: a.HTTP.URL, dir: a.Dir, victim: a.issue(store.KindAgent, "victim", "command.execute"),
		attacker: a.issue(store.KindAgent, "attacker", "command.execute")}
}

// call sends a JSON request with token and returns the status and the raw
// and decoded answer.
func (rt runsTarget) call(t *testing.T, token, method, path string, body any) (int, string, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, rt.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return resp.StatusCode, string(raw), v
}

// errCode digs the stable error code out of an API error answer.
func errCode(v map[string]any) string {
	if c, ok := v["code"].(string); ok {
		return c
	}
	if e, ok := v["error"].(map[string]any); ok {
		c, _ := e["code"].(string)
		return c
	}
	return ""
}

// spawnAndWait starts an inline template as token and waits for its end;
// it returns the final status view and stdout.
func (rt runsTarget) spawnAndWait(t *testing.T, token, id, template string) (map[string]any, string) {
	t.Helper()
	code, raw, v := rt.call(t, token, "POST", "/v1/runs", map[string]any{"template": template, "run_id": id})
	if code >= 300 || v["run"] != id {
		t.Fatalf("spawn %s: %d %s", id, code, raw)
	}
	testwait.Eventually(t, 20*time.Second, func() bool {
		if v["status"] != "running" {
			return true
		}
		_, _, v = rt.call(t, token, "GET", "/v1/runs/"+id, nil)
		return v["status"] != "running"
	}, "run "+id+" ending")
	_, out, _ := rt.call(t, token, "GET", "/v1/runs/"+id+"/logs?stream=stdout", nil)
	return v, out
}

// The attacker's Run dumps its environment looking for the server's
// secrets: it sees none of the server's variables.
func TestBoundaryRunSeesNoServerEnvironment(t *testing.T) {
	t.Setenv("SERVER_ONLY_SECRET", "env-secret-4411")
	t.Setenv("ASSENT_DATABASE_KEY", "env-secret-5522")
	rt := newRunsTarget(t)
	v, out := rt.spawnAndWait(t, rt.attacker, "envdump", "env; cat /proc/$PPID/environ 2>/dev/null | tr '\\000' '\\n'")
	if v["status"] != "done" && v["status"] != "failed" {
		t.Fatalf("status %v", v)
	}
	for _, leak := range []string{"env-secret-4411", "env-secret-5522", "SERVER_ONLY_SECRET"} {
		if strings.Contains(out, leak) {
			t.Fatalf("the Run's environment shows the server's %s:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "ASSENT_RUN_ID=envdump") {
		t.Fatalf("the Run lacks its documented ASSENT_* variables:\n%s", out)
	}
}

// The attacker's Run copies the database to steal token hashes and
// sessions: with the server running as root the Run is an unprivileged
// user and cannot read it.
func TestBoundaryRunCannotReadDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the Run drops to an unprivileged user only when the server runs as root")
	}
	rt := newRunsTarget(t)
	db := filepath.Join(rt.dir, "assent.db")
	v, out := rt.spawnAndWait(t, rt.attacker, "steal", "id -u; cat '"+db+"' | head -c 64 | od -c | head -3; ls '"+rt.dir+"'")
	if strings.Contains(out, "S   Q   L   i   t   e") {
		t.Fatalf("the Run read the database:\n%s", out)
	}
	if strings.Contains(out, "assent.db") {
		t.Fatalf("the Run listed the data directory:\n%s", out)
	}
	if strings.HasPrefix(strings.TrimSpace(out), "0\n") {
		t.Fatalf("the Run ran as root:\n%s", out)
	}
	_ = v
}

// The attacker declares an artifact outside its Run's directory so that a
// later preserve or manifest reads another file.
func TestBoundaryArtifactTraversalRefused(t *testing.T) {
	rt := newRunsTarget(t)
	for _, p := range []string{"../../../../etc/passwd", "/etc/passwd", "../victim/stdout.log"} {
		code, raw, v := rt.call(t, rt.attacker, "POST", "/v1/runs", map[string]any{
			"template": "true", "run_id": "art", "artifacts": map[string]any{"loot": p}})
		if code != http.StatusBadRequest || errCode(v) != "invalid_request" {
			t.Fatalf("artifact %s: %d %s; want 400 invalid_request", p, code, raw)
		}
	}
}

// An oversized Run id used to crash the request with a 500.
func TestBoundaryLongRunIDRefused(t *testing.T) {
	rt := newRunsTarget(t)
	code, raw, v := rt.call(t, rt.attacker, "POST", "/v1/runs", map[string]any{"template": "true", "run_id": strings.Repeat("a", 255)})
	if code != http.StatusRequestEntityTooLarge || errCode(v) != "limit_exceeded" {
		t.Fatalf("255-byte run id: %d %s; want 413 limit_exceeded", code, raw)
	}
}

// The attacker probes Run ids to learn what another principal runs and in
// what state: every id held by someone else answers with one and the same
// conflict, whatever that Run's state, and nothing else about it shows.
func TestBoundaryRunIDOracleShowsNothing(t *testing.T) {
	rt := newRunsTarget(t)
	if code, raw, _ := rt.call(t, rt.victim, "POST", "/v1/runs", map[string]any{"template": "sleep 30", "run_id": "payroll"}); code >= 300 {
		t.Fatalf("victim spawn: %d %s", code, raw)
	}
	t.Cleanup(func() { rt.call(t, rt.victim, "POST", "/v1/runs/payroll/kill", nil) })
	rt.spawnAndWait(t, rt.victim, "payroll-old", "exit 4")
	rt.spawnAndWait(t, rt.victim, "payroll-archived", "true")
	if code, raw, _ := rt.call(t, rt.victim, "POST", "/v1/runs/payroll-archived/archive", nil); code >= 300 {
		t.Fatalf("archive: %d %s", code, raw)
	}
	for _, id := range []string{"payroll", "payroll-old", "payroll-archived"} {
		code, raw, v := rt.call(t, rt.attacker, "POST", "/v1/runs", map[string]any{"template": "true", "run_id": id})
		want := `Run id ` + id + ` is not available; choose another id.`
		if code != http.StatusConflict || errCode(v) != "conflict" || !strings.Contains(raw, want) {
			t.Fatalf("attacker spawning %s: %d %s; want 409 conflict %q", id, code, raw, want)
		}
		for _, leak := range []string{"running", "failed", "archived", "victim", "sleep"} {
			if strings.Contains(strings.ReplaceAll(raw, want, ""), leak) {
				t.Fatalf("attacker spawning %s learns %q: %s", id, leak, raw)
			}
		}
		if code, raw, v := rt.call(t, rt.attacker, "GET", "/v1/runs/"+id, nil); code != http.StatusNotFound || errCode(v) != "not_found" {
			t.Fatalf("attacker reading %s: %d %s; want not_found", id, code, raw)
		}
	}
}

// Secret values given to a Run (a "!secret" argument, a secret-looking
// name) never come back in its views: only its process receives them.
func TestBoundarySecretValuesNotInRunViews(t *testing.T) {
	rt := newRunsTarget(t)
	recipe := `{"args": ["pin:string!secret", "card_number", "memo"], "template": "printf '%s %s' {pin} {card_number} > got.txt; echo memo={memo}; sleep 30", "control": ["status"]}`
	if err := os.WriteFile(filepath.Join(rt.dir, "recipes", "pay.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	code, raw, _ := rt.call(t, rt.attacker, "POST", "/v1/runs", map[string]any{"recipe": "pay", "run_id": "pay1",
		"values": map[string]any{"pin": "7315-0284-9961", "card_number": "4111111111111111", "memo": "lunch"}})
	if code >= 300 {
		t.Fatalf("spawn: %d %s", code, raw)
	}
	t.Cleanup(func() { rt.call(t, rt.attacker, "POST", "/v1/runs/pay1/kill", nil) })
	got := filepath.Join(rt.dir, "runs", "pay1", "got.txt")
	testwait.Eventually(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(got)
		return len(b) > 0
	}, "the process writing "+got)
	if b, _ := os.ReadFile(got); string(b) != "7315-0284-9961 4111111111111111" {
		t.Fatalf("the process received %q, want the real values", b)
	}
	answers := raw
	for _, p := range []string{"/v1/runs/pay1", "/v1/runs/pay1/views/recipe", "/v1/runs/pay1/views/trace", "/v1/runs/pay1/views/control", "/v1/runs"} {
		_, body, _ := rt.call(t, rt.attacker, "GET", p, nil)
		answers += body
	}
	// Long enough that no pid, id or time in the answers holds it by
	// chance, as a four-digit pin did.
	for _, secret := range []string{"7315-0284-9961", "4111111111111111"} {
		if strings.Contains(answers, secret) {
			t.Fatalf("secret %s shows in a Run view", secret)
		}
	}
	if !strings.Contains(answers, "lunch") {
		t.Fatalf("a value that is not secret was masked too")
	}
}

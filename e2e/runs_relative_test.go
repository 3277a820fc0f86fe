package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store"
)

// buildAssent builds the assent binary into a directory every user may
// read and execute (Runs drop to an unprivileged user when tests run as
// root) and returns its path.
func buildAssent(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the assent binary")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "assent")
	cmd := exec.Command("go", "build", "-o", exe, "github.com/assent-run/assent/cmd/assent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// A server started on a relative data directory runs the demo player: it
// starts, is paused and resumed, and its Trace shows each change.
func TestRunsFromRelativeDataDir(t *testing.T) {
	exe := buildAssent(t)
	t.Chdir(t.TempDir())
	a := newAppIn(t, "assent-data", true, nil)
	token := a.issue(store.KindAgent, "player-agent")
	rt := runsTarget{url: a.HTTP.URL, dir: "assent-data", attacker: token}

	// The server wrote the demo Recipe for the binary running now, which
	// here is the test binary: point it at the real assent binary.
	p := filepath.Join("assent-data", "recipes", "demo-player.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var recipe map[string]any
	if err := json.Unmarshal(b, &recipe); err != nil {
		t.Fatal(err)
	}
	tpl, _ := recipe["template"].(string)
	_, rest, ok := strings.Cut(tpl, " run demo-service")
	if !ok || !strings.HasPrefix(tpl, "exec /") && !strings.HasPrefix(tpl, "exec '/") {
		t.Fatalf("demo-player template %q does not exec an absolute binary", tpl)
	}
	recipe["template"] = "exec " + run.ShellQuote(shareWithRuns(t, "assent-data", exe)) + " run demo-service" + rest
	b, _ = json.Marshal(recipe)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}

	code, raw, v := rt.call(t, token, "POST", "/v1/runs", map[string]any{"recipe": "demo-player", "values": map[string]any{"interval": 0.05}})
	if code >= 300 || v["status"] != "running" {
		t.Fatalf("spawn demo-player: %d %s", code, raw)
	}
	id, _ := v["run"].(string)
	if sd, _ := v["state_dir"].(string); !filepath.IsAbs(sd) {
		t.Fatalf("state_dir %q is not absolute", sd)
	}
	t.Cleanup(func() { rt.call(t, token, "POST", "/v1/runs/"+id+"/kill", nil) })
	rt.waitTrace(t, token, id, "player.started")
	for _, step := range []struct{ action, kind string }{{"pause", "player.paused"}, {"resume", "player.resumed"}} {
		if code, raw, _ := rt.call(t, token, "POST", "/v1/runs/"+id+"/controls", map[string]any{"action": step.action}); code >= 300 {
			t.Fatalf("%s: %d %s", step.action, code, raw)
		}
		rt.waitTrace(t, token, id, step.kind)
	}
	if code, raw, v := rt.call(t, token, "GET", "/v1/runs/"+id, nil); code != http.StatusOK || v["status"] != "running" {
		t.Fatalf("status after resume: %d %s", code, raw)
	}
}

// waitTrace waits until Run id's Trace shows an event of kind.
func (rt runsTarget) waitTrace(t *testing.T, token, id, kind string) {
	t.Helper()
	testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
		_, raw, _ := rt.call(t, token, "GET", "/v1/runs/"+id+"/views/trace?lines=200", nil)
		if !strings.Contains(raw, `"kind":"`+kind+`"`) {
			_, st, _ := rt.call(t, token, "GET", "/v1/runs/"+id, nil)
			c.Errorf("%s\nstatus: %s", raw, st)
		}
	}, fmt.Sprintf("%s in the Trace of %s", kind, id))
}

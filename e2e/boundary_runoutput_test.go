package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// TestBoundaryRunOutputMasksSecrets: an agent without command.execute
// spawns an operator's Recipe whose process echoes a secret argument,
// traces the operator's secret default under set -x, prints its run
// token and a bearer header, and writes a secret in two pieces. The e2e
// server starts Runs without namespaces (run.Init is not called), so no
// Run init stands between the process and its logs. The agent reads the
// logs, the Trace view and a person opens the Run page: none shows a
// secret.
func TestBoundaryRunOutputMasksSecrets(t *testing.T) {
	a := newAppIn(t, t.TempDir(), false, nil)
	agent := a.issue(store.KindAgent, "plain", "state.write", "tool.invoke") // no command.execute
	const pin, operatorKey = "pin-7315-4471", "op-default-key-9931"
	recipe := `{"args":["pin:string!secret","key:string!secret=` + operatorKey + `"],"template":[` +
		`"echo pin={pin}",` +
		`"printf 'token=%s\\n' \"$ASSENT_RUN_TOKEN\"",` +
		`"echo \"Authorization: Bearer $ASSENT_RUN_TOKEN\" >&2",` +
		`"printf '%s' {pin} | head -c 5; sleep 0.3; printf '%s\\n' {pin} | tail -c +6",` +
		`"set -x; : --key {key}",` +
		`"echo done > done.txt"]}`
	if err := os.WriteFile(filepath.Join(a.Dir, "recipes", "leaky.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, raw := a.API("POST", "/v1/runs", agent, map[string]any{"recipe": "leaky", "run_id": "leaky1",
		"values": map[string]any{"pin": pin}})
	if code >= 300 {
		t.Fatalf("spawn: %d %s", code, raw)
	}
	testwait.Eventually(t, 20*time.Second, func() bool {
		_, v, _ := a.API("GET", "/v1/runs/leaky1", agent, nil)
		return v["status"] != nil && v["status"] != "running"
	}, "the end of Run leaky1")
	if b, err := os.ReadFile(filepath.Join(a.Dir, "runs", "leaky1", "done.txt")); err != nil || string(b) != "done\n" {
		t.Fatalf("the Run did not run to its end (done.txt %q, %v), so this test proves nothing", b, err)
	}
	var seen strings.Builder
	for _, p := range []string{"/v1/runs/leaky1/logs?stream=stdout", "/v1/runs/leaky1/logs?stream=stderr", "/v1/runs/leaky1/views/trace", "/v1/runs/leaky1"} {
		code, _, body := a.API("GET", p, agent, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
		seen.WriteString(body)
	}
	cookie, _ := a.SignIn()
	page := a.webPage("/runs/leaky1", cookie)
	seen.WriteString(page)
	all := seen.String()
	for _, leak := range []string{pin, operatorKey, "asnt_"} {
		if strings.Contains(all, leak) {
			t.Errorf("the Run's logs, Trace view or page show %q", leak)
		}
	}
	// The output is there, masked: the checks above are not passing on
	// empty logs.
	for _, want := range []string{"pin=[REDACTED]", "token=[REDACTED]", "Bearer [REDACTED]", "--key [REDACTED]"} {
		if !strings.Contains(all, want) {
			t.Errorf("the logs lack %q:\n%s", want, all)
		}
	}
	if !strings.Contains(page, "[REDACTED]") {
		t.Errorf("the Run page shows no masked output tail:\n%s", page)
	}
}

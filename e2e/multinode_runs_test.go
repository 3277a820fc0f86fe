package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

// TestMultiNodeRuns runs three `assent serve` processes on one PostgreSQL
// database and steers a Run of node A from the other two: a Control
// applied on node B is delivered to the Run's FIFO by node A, the Run's
// logs are read on node C, and a kill sent to node B is carried out by
// node A. Nodes do not reach each other's files here: they pass the
// requests through the store even though they share one machine.
func TestMultiNodeRuns(t *testing.T) {
	cl := startCluster(t)
	a, b, c, tok := cl.a, cl.b, cl.c, cl.token

	// The service reads its Control FIFO (held open for reading and
	// writing, so it never sees an end) and echoes each record.
	writeRecipe(t, a, "echoer", `{"template":"exec 3<>\"$ASSENT_CONTROL_FIFO\"; while read -r line <&3; do echo \"got $line\"; done","control":["poke"]}`)
	v := spawnOn(t, a, tok, map[string]any{"recipe": "echoer", "run_id": "echoer"})
	killRunProcess(t, v)
	if v["node"] != "node-a" {
		t.Fatalf("Run started on node A names node %v", v["node"])
	}

	// A Control applied on node B is delivered by node A.
	code, res, raw := b.api(t, "POST", "/v1/runs/echoer/controls", tok, nil, map[string]any{"action": "poke", "input": map[string]any{"word": "marmalade"}})
	if code != 200 || res["delivery"] != "delivered" || res["node"] != "node-a" {
		t.Fatalf("Control applied on node B: %d %s; want delivered by node-a", code, raw)
	}
	controlID, _ := res["control_id"].(string)

	// Node C shows the service's echo of it.
	var logs string
	testwait.EventuallyC(t, 15*time.Second, func(wc *testwait.C) {
		var code int
		code, _, logs = c.api(t, "GET", "/v1/runs/echoer/logs?stream=stdout&lines=20", tok, nil, nil)
		if code != 200 {
			t.Fatalf("logs on node C: %d %s", code, logs)
		}
		if !strings.Contains(logs, "marmalade") {
			wc.Errorf("last %q", logs)
		}
	}, "the logs on node C showing the Control")
	if !strings.Contains(logs, "got ") || !strings.Contains(logs, controlID) {
		t.Errorf("logs on node C = %q; want the echoed record of Control %s", logs, controlID)
	}

	// A kill sent to node B is carried out by node A, and node A's record
	// says so.
	code, res, raw = b.api(t, "POST", "/v1/runs/echoer/kill", tok, nil, nil)
	if code != 200 || res["killed"] != true || res["node"] != "node-a" {
		t.Fatalf("kill on node B: %d %s; want killed by node-a", code, raw)
	}
	testwait.EventuallyC(t, 15*time.Second, func(wc *testwait.C) {
		_, rec, raw := a.api(t, "GET", "/v1/runs/echoer", tok, nil, nil)
		if rec["status"] != "killed" || rec["ended_at"] == nil {
			wc.Errorf("%s", raw)
		}
	}, "node A's record after the kill: killed and ended")
	// Every node now answers that the Run is not running.
	for _, p := range []*serveProc{b, c} {
		code, res, raw := p.api(t, "POST", "/v1/runs/echoer/controls", tok, nil, map[string]any{"action": "poke"})
		if e, _ := res["error"].(map[string]any); code == 200 || e["code"] != "terminal_state" {
			t.Errorf("Control after the kill on %s: %d %s; want terminal_state", p.base, code, raw)
		}
	}
}

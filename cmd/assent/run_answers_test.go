package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRunCommandsPrintAnswers drives the Run commands against canned
// server answers and checks what they print and send.
func TestRunCommandsPrintAnswers(t *testing.T) {
	answers := map[string]string{
		"POST /v1/runs/ok":                     `{"run":"ok","run_instance_id":"i1","generation":2,"status":"running","owner_id":"p","pid":4194304,"control":[]}`,
		"POST /v1/runs/wait":                   `{"status":"pending_approval","proposal":"prop-1","kind":"spawn","run":"wait","url":"http://x/p","message":"A person must approve it.","script":"echo","work_dir":"/d","next_actions":[]}`,
		"POST /v1/runs/bad":                    `{"run":"bad","run_instance_id":"i2","generation":1,"status":"failed","owner_id":"p","pid":7,"control":[],"exit_code":2,"stderr_head":"no such file"}`,
		"POST /v1/runs/ok/kill":                `{"killed":false,"stopped":false,"reason":"not running","status":"done"}`,
		"POST /v1/runs/ok/prune":               `{"pruned":true,"preserved_artifacts":{},"run":"ok","state_dir":"/d/ok","ts":"2026-01-01T00:00:00.000Z"}`,
		"POST /v1/runs/ok/controls":            `{"action":"pause","bytes":90,"control_id":"c1","delivery":"queued","endpoint_type":"fifo","next_actions":[{"tool":"actors_inspect","arguments":{"target":"run:ok","view":"control"}}],"run":"ok","run_instance_id":"i1"}`,
		"POST /v1/runs/ok/controls/c1/handled": `{"id":"c1","run_instance_id":"i1","action":"pause","status":"handled","handled_at":"2026-01-01T00:00:01.000Z"}`,
		"POST /v1/runs/ok/trace":               `{"id":"e1","ts":"2026-01-01T00:00:02.500Z","kind":"progress.update","summary":"3 of 10"}`,
		"POST /v1/runs/inspect":                `{"run_root":"/d/runs","state_schema":"run-kernel-v1","version":"test","automatic_review":false}`,
	}
	bodies := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		key := r.Method + " " + r.URL.Path
		if r.URL.Path == "/v1/runs" {
			var req struct {
				RunID string `json:"run_id"`
			}
			json.Unmarshal(b, &req)
			key += "/" + req.RunID
		}
		bodies[key] = string(b)
		a, ok := answers[key]
		if !ok {
			http.Error(w, `{"error":{"code":"not_found","message":"no canned answer"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, a)
	}))
	defer srv.Close()
	tests := []struct {
		args     []string
		code     int
		out, err string // out exact; err a substring
		sent     string // key of the request whose body is checked
		body     string
	}{
		{args: []string{"run", "spawn", "--recipe", "demo", "--id", "ok"}, out: "run=ok status=running generation=2 pid=4194304\n",
			sent: "POST /v1/runs/ok", body: `{"run_id":"ok","recipe":"demo"}`},
		{args: []string{"run", "spawn", "--template", "echo {x}", "--set", "x=1", "--id", "wait"},
			out:  "run=wait status=pending_approval proposal=prop-1\nA person must approve it.\n",
			sent: "POST /v1/runs/wait", body: `{"run_id":"wait","template":"echo {x}","values":{"x":"1"}}`},
		{args: []string{"run", "spawn", "--recipe", "demo", "--id", "bad"}, code: exitRefused,
			out: "run=bad status=failed generation=1 pid=7\n", err: "start_failed: Run bad failed at once: no such file"},
		{args: []string{"run", "spawn", "--recipe", "demo", "--id", "bad", "--json"}, code: exitRefused,
			out: `{"control":[],"exit_code":2,"generation":1,"owner_id":"p","pid":7,"run":"bad","run_instance_id":"i2","status":"failed","stderr_head":"no such file"}` + "\n"},
		{args: []string{"run", "kill", "ok"}, code: exitRefused, out: "killed: false\nreason: not running\nstatus: done\nstopped: false\n"},
		{args: []string{"run", "prune", "ok", "--preserve-artifacts"}, out: "preserved_artifacts: {}\npruned: true\nrun: ok\nstate_dir: /d/ok\nts: 2026-01-01T00:00:00.000Z\n",
			sent: "POST /v1/runs/ok/prune", body: `{"preserve_artifacts":true}`},
		{args: []string{"run", "control", "ok", "pause", "--input", `{"why":"x"}`, "--json"},
			out:  `{"action":"pause","bytes":90,"control_id":"c1","delivery":"queued","endpoint_type":"fifo","next_actions":[{"arguments":{"target":"run:ok","view":"control"},"tool":"actors_inspect"}],"run":"ok","run_instance_id":"i1"}` + "\n",
			sent: "POST /v1/runs/ok/controls", body: `{"action":"pause","input":{"why":"x"}}`},
		{args: []string{"run", "control", "handled", "c1", "--run", "ok", "--instance", "i1"}, out: "control=c1 action=pause status=handled\n",
			sent: "POST /v1/runs/ok/controls/c1/handled", body: `{"run_instance_id":"i1"}`},
		{args: []string{"trace", "emit", "--run", "ok", "--kind", "progress.update", "--summary", "3 of 10"},
			out:  "trace=e1 kind=progress.update ts=2026-01-01T00:00:02.500Z\n",
			sent: "POST /v1/runs/ok/trace", body: `{"kind":"progress.update","summary":"3 of 10"}`},
		{args: []string{"run", "inspect", "runtime"}, out: "automatic_review: false\nrun_root: /d/runs\nstate_schema: run-kernel-v1\nversion: test\n",
			sent: "POST /v1/runs/inspect", body: `{"target":"runtime","view":"status"}`},
		{args: []string{"run", "archive", "ok"}, code: exitRefused, err: "not_found: no canned answer"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errw bytes.Buffer
			code := execute(append(tc.args, "--url", srv.URL, "--token-file", writeTokenFile(t, "t")), strings.NewReader(""), &out, &errw)
			if code != tc.code || out.String() != tc.out || !strings.Contains(errw.String(), tc.err) {
				t.Fatalf("exit %d, out %q, err %q; want %d, %q, %q", code, out.String(), errw.String(), tc.code, tc.out, tc.err)
			}
			if tc.sent != "" && strings.TrimSpace(bodies[tc.sent]) != tc.body {
				t.Errorf("sent %s, want %s", bodies[tc.sent], tc.body)
			}
		})
	}
}

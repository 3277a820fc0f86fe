package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/assent-run/assent/run"
)

// benchControlRun is the Run the admission row sends Controls to, and
// benchControlAction its one declared action.
const (
	benchControlRun    = "bench-control"
	benchControlAction = "tick"
)

// benchControlRecipe runs a process that holds the Run's Control FIFO open
// for reading and discards what it reads, so that every admitted Control
// is delivered at once; the row settles the records itself.
const benchControlRecipe = `{
  "description": "Read and discard the Control FIFO (assent bench).",
  "template": "exec cat <>\"$ASSENT_CONTROL_FIFO\" >/dev/null",
  "control": ["` + benchControlAction + `"]
}
`

// settleEvery is how many delivered Controls the admission row lets wait
// before it settles them, well under the journal's pending limit.
const settleEvery = run.ControlPendingLimit / 2

// setUpControlRun starts the Run of the admission row, owned by the agent,
// and returns a function that kills it.
func (e *benchEnv) setUpControlRun(ctx context.Context) (func(), error) {
	m := e.srv.Runs().Manager()
	recipes := filepath.Join(m.DataDir(), "recipes")
	if err := os.MkdirAll(recipes, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(recipes, benchControlRun+".json"), []byte(benchControlRecipe), 0o600); err != nil {
		return nil, err
	}
	r, err := m.Spawn(ctx, e.agentID, run.SpawnRequest{Recipe: benchControlRun, RunID: benchControlRun})
	if err != nil {
		return nil, err
	}
	if r.Status != run.StatusRunning {
		return nil, fmt.Errorf("the Run %s is %s, not running", benchControlRun, r.Status)
	}
	e.controlInstance = r.InstanceID
	return func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		m.Kill(kctx, e.agentID, benchControlRun)
	}, nil
}

// admissionRow measures Control admission through
// POST /v1/runs/{id}/controls against the floor's JSON endpoint, with the
// same body, from one client. Between admissions, and outside the
// figures, the delivered Controls are claimed and settled through the
// Manager every settleEvery admissions, so the journal never fills.
func (e *benchEnv) admissionRow(ctx context.Context, name string) (benchRow, error) {
	body := []byte(`{"action":"` + benchControlAction + `"}`)
	m := e.srv.Runs().Manager()
	var pending []string
	settle := func(ctx context.Context) error {
		if len(pending) < settleEvery {
			return nil
		}
		for _, id := range pending {
			if _, err := m.Claim(ctx, e.agentID, benchControlRun, e.controlInstance, id); err != nil {
				return fmt.Errorf("claim %s: %w", id, err)
			}
			if _, err := m.Settle(ctx, e.agentID, benchControlRun, e.controlInstance, id, true, ""); err != nil {
				return fmt.Errorf("settle %s: %w", id, err)
			}
		}
		pending = pending[:0]
		return nil
	}
	hcA := loopbackClient(e.token, 1)
	url := e.base + "/v1/runs/" + benchControlRun + "/controls"
	a := func() (sample, error) {
		return batchWith(ctx, e.o.calls, 1, e.o.batchTimeout, func(ctx context.Context, _ int) error {
			id, err := admitOnce(ctx, hcA, url, body)
			if err != nil {
				return err
			}
			pending = append(pending, id)
			return nil
		}, settle)
	}
	hcB := loopbackClient("", 1)
	b := func() (sample, error) {
		return batch(ctx, e.o.calls, 1, e.o.batchTimeout, func(ctx context.Context, _ int) error {
			return postOnce(ctx, hcB, e.floor.base+"/http", body)
		})
	}
	return compareRow(name, 0, e.o.rounds, a, b)
}

// admitOnce applies one Control through url and returns its id.
func admitOnce(ctx context.Context, hc *http.Client, url string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	var d run.ControlDelivery
	if err := json.Unmarshal(b, &d); err != nil || d.ControlID == "" {
		return "", fmt.Errorf("POST %s: no control_id in %s", url, bytes.TrimSpace(b))
	}
	return d.ControlID, nil
}

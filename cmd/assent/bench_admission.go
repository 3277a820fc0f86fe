package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store"
)

// benchControlRun is the prefix of the Runs the admission rows send
// Controls to, and benchControlAction their one declared action.
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

// settleEvery is how many Controls one batch of an admission row admits
// to one Run before it moves on to the next, well under the journal's
// pending limit; they are settled after the batch.
const settleEvery = run.ControlPendingLimit / 2

// benchRun is a running Run of the admission rows.
type benchRun struct {
	id, instance string
}

// serverCase is a row measured on an assent server and its floor.
type serverCase struct {
	name string
	run  func(ctx context.Context, e *benchEnv, name string) (benchRow, error)
}

// durableCases are the rows of calls that commit before they answer:
// staging a Control value, a Flow step and a Control admission, from 1,
// 16 and 64 clients, each against the floor that commits one transaction
// per call on the same store. suffix ends every name.
func durableCases(suffix string) []serverCase {
	stage := map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "pro"}
	concs := []int{1, 16, 64}
	var out []serverCase
	for _, conc := range concs {
		out = append(out, serverCase{fmt.Sprintf("mcp controls_execute stage, %d client(s)%s", conc, suffix), func(ctx context.Context, e *benchEnv, name string) (benchRow, error) {
			return e.mcpRow(ctx, name, conc, targetDurable, floorCommitTool, mcpCall("controls_execute", stage))
		}})
	}
	for _, conc := range concs {
		out = append(out, serverCase{fmt.Sprintf("mcp flows_prescribe+flows_apply, %d client(s)%s", conc, suffix), func(ctx context.Context, e *benchEnv, name string) (benchRow, error) {
			return e.mcpRow(ctx, name, conc, targetDurable, floorCommitTool, e.flowStep)
		}})
	}
	for _, conc := range concs {
		out = append(out, serverCase{fmt.Sprintf("control admission POST /v1/runs/{id}/controls, %d client(s)%s", conc, suffix), func(ctx context.Context, e *benchEnv, name string) (benchRow, error) {
			return e.admissionRow(ctx, name, conc)
		}})
	}
	return out
}

// maxDurableClients is the most clients of a durable row.
const maxDurableClients = 64

// setUpDurable prepares the durable rows on st: a Flow instance for each
// client and the admission rows' Runs. The returned function kills the
// Runs.
func (e *benchEnv) setUpDurable(ctx context.Context, st store.Store) (func(), error) {
	if err := e.setUpFlow(ctx, st, maxDurableClients); err != nil {
		return nil, fmt.Errorf("setting up the Flow rows: %w", err)
	}
	kill, err := e.setUpControlRuns(ctx, (e.o.calls+settleEvery-1)/settleEvery)
	if err != nil {
		return nil, fmt.Errorf("setting up the admission rows: %w", err)
	}
	return kill, nil
}

// setUpControlRuns starts n Runs for the admission rows, owned by the
// agent, and returns a function that kills them.
func (e *benchEnv) setUpControlRuns(ctx context.Context, n int) (func(), error) {
	m := e.srv.Runs().Manager()
	recipes := filepath.Join(m.DataDir(), "recipes")
	if err := os.MkdirAll(recipes, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(recipes, benchControlRun+".json"), []byte(benchControlRecipe), 0o600); err != nil {
		return nil, err
	}
	kill := func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, r := range e.controlRuns {
			m.Kill(kctx, e.agentID, r.id)
		}
	}
	for i := range n {
		id := fmt.Sprintf("%s-%d", benchControlRun, i+1)
		r, err := m.Spawn(ctx, e.agentID, run.SpawnRequest{Recipe: benchControlRun, RunID: id})
		if err != nil {
			kill()
			return nil, err
		}
		e.controlRuns = append(e.controlRuns, benchRun{id: id, instance: r.InstanceID})
		if r.Status != run.StatusRunning {
			kill()
			return nil, fmt.Errorf("the Run %s is %s, not running", id, r.Status)
		}
	}
	return kill, nil
}

// admissionRow measures Control admission through
// POST /v1/runs/{id}/controls from conc clients against the floor's
// durable JSON endpoint, with the same body. A batch sends settleEvery
// Controls to each Run in turn; after the batch, outside the figures, the
// delivered Controls are claimed and settled through the Manager, so the
// journals never fill and keep their newest terminal records as a
// long-lived Run's do.
func (e *benchEnv) admissionRow(ctx context.Context, name string, conc int) (benchRow, error) {
	body := []byte(`{"action":"` + benchControlAction + `"}`)
	runs := e.controlRuns
	urls := make([]string, len(runs))
	for i, r := range runs {
		urls[i] = e.base + "/v1/runs/" + r.id + "/controls"
	}
	var (
		mu      sync.Mutex
		pending = make([][]string, len(runs))
		next    atomic.Int64
	)
	hcA := loopbackClient(e.token, conc)
	a := func() (sample, error) {
		next.Store(0)
		s, err := batch(ctx, e.o.calls, conc, e.o.batchTimeout, func(ctx context.Context, _ int) error {
			i := int(next.Add(1)-1) / settleEvery % len(runs)
			id, err := admitOnce(ctx, hcA, urls[i], body)
			if err != nil {
				return err
			}
			mu.Lock()
			pending[i] = append(pending[i], id)
			mu.Unlock()
			return nil
		})
		if serr := e.settleAll(ctx, pending); err == nil {
			err = serr
		}
		return s, err
	}
	hcB := loopbackClient("", conc)
	b := func() (sample, error) {
		return batch(ctx, e.o.calls, conc, e.o.batchTimeout, func(ctx context.Context, _ int) error {
			return postOnce(ctx, hcB, e.floor.base+"/http/commit", body)
		})
	}
	return compareRow(name, targetDurable, e.o.rounds, a, b)
}

// settleAll claims and settles the Controls in pending, which are indexed
// like e.controlRuns, each Run's in a goroutine of its own, and empties
// pending.
func (e *benchEnv) settleAll(ctx context.Context, pending [][]string) error {
	m := e.srv.Runs().Manager()
	errs := make([]error, len(pending))
	var wg sync.WaitGroup
	for i, ids := range pending {
		r := e.controlRuns[i]
		wg.Go(func() {
			for _, id := range ids {
				if _, err := m.Claim(ctx, e.agentID, r.id, r.instance, id); err != nil {
					errs[i] = fmt.Errorf("claim %s: %w", id, err)
					return
				}
				if _, err := m.Settle(ctx, e.agentID, r.id, r.instance, id, true, ""); err != nil {
					errs[i] = fmt.Errorf("settle %s: %w", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range pending {
		pending[i] = pending[i][:0]
	}
	return errors.Join(errs...)
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

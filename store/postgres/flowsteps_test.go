package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/flowtest"
)

// TestFlowStepsConcurrently runs Flow steps on many instances at once, on
// two nodes, each instance stepped by one agent: none touches another's
// instance, so every step must commit. Concurrent SERIALIZABLE
// transactions on different instances may still fail to serialize with
// one another (their reads and writes share index pages); that must cost
// retries, never an apply that ends in recovery or fails. A prescribe may
// answer the retryable flow.ErrContention, and is then sent again.
func TestFlowStepsConcurrently(t *testing.T) {
	dbs := nodes(t, 2)
	ctx := t.Context()
	const agents, steps = 64, 8
	kernels := make([]*flow.Kernel, len(dbs))
	var prog *flow.Program
	for i, db := range dbs {
		kernels[i] = flow.NewKernel(db.Flows(), flow.NewInventory("0.1.0"), flow.WithNode(fmt.Sprint("node-", i)))
		p, err := kernels[i].AddProgram(ctx, []byte(flowtest.Toggle))
		if err != nil {
			t.Fatal(err)
		}
		prog = p
	}
	pr := flow.Principal{ID: "agent", Kind: flow.AuthorityAgent, Grants: []string{"state.write"}}
	for i := range agents {
		inst := flow.Instance{ID: fmt.Sprint("light-", i), Program: prog.Fingerprint(), Phase: "off", Objective: "never", Owner: "agent"}
		if _, err := kernels[0].Start(ctx, inst); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, agents)
	var wg sync.WaitGroup
	for i := range agents {
		k := kernels[i%len(kernels)]
		id := fmt.Sprint("light-", i)
		wg.Go(func() {
			for s := range steps {
				d, err := k.Prescribe(ctx, id, pr, flow.Request{})
				for errors.Is(err, flow.ErrContention) {
					// Retryable, as its code says: a client sends it again.
					d, err = k.Prescribe(ctx, id, pr, flow.Request{})
				}
				if err != nil || d.Kind != flow.Prescribed {
					errs <- fmt.Errorf("%s step %d: prescribe = %s %s %v", id, s, d.Kind, d.Message, err)
					return
				}
				if _, err := k.Apply(ctx, d.Prescription.ID, pr); err != nil {
					errs <- fmt.Errorf("%s step %d: apply: %v", id, s, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range agents {
		inst, err := kernels[1].Instance(ctx, fmt.Sprint("light-", i))
		if err != nil || inst.Revision != steps || inst.Recovery != nil || inst.Pending != "" {
			t.Errorf("instance %d after %d steps: %+v %v", i, steps, inst, err)
		}
	}
}

package flows_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// timedProgram is a one-step program an agent may only propose; id makes
// its fingerprint its own.
func timedProgram(id string) []byte {
	return []byte(`{
  "schema_version": 1, "program_id": "` + id + `", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "done", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["done"]}]}],
  "transitions": [{"id": "finish", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["open"], "target_phases": ["done"], "authority": ["human"],
    "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
    "prescription": {"operation": "finish", "expected_postcondition": "it is done"}}]
}`)
}

// BenchmarkExpireProgramProposals measures one sweep that declines 40
// proposed programs past their deadline (5 agents, 8 each, the most an
// agent may have waiting): per program, the Flow store's compare-and-set,
// the audit record, the event and the removal of the deadline. Proposing
// them is not timed.
//
//	go test -run XXX -bench BenchmarkExpireProgramProposals -benchtime 5x ./server/flows
func BenchmarkExpireProgramProposals(b *testing.B) {
	const agents, each = 5, 8
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	f := assenttest.Start(b, func(cfg *server.Config) { cfg.Now = c.Now; cfg.RateLimit = -1 })
	tokens := make([]string, agents)
	for i := range tokens {
		tokens[i], _ = f.Issue(store.KindAgent, fmt.Sprintf("bench-%d", i))
	}
	round := 0
	for b.Loop() {
		b.StopTimer()
		for i := range agents * each {
			code, _, raw := f.API("POST", "/v1/flows/programs?deadline_seconds=60", tokens[i%agents], timedProgram(fmt.Sprintf("timed-%d-%d", round, i)))
			if code != 202 {
				b.Fatalf("propose: %d %s", code, raw)
			}
		}
		round++
		c.Add(time.Minute)
		b.StartTimer()
		got, err := f.Srv.Flows().ExpireProgramProposals(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// The part's own sweeper may have taken some first.
		loads, _ := f.Srv.Flows().Kernel().ProgramLoads(b.Context())
		for _, l := range loads {
			if l.Status == flow.ProgramProposed {
				b.Fatalf("%s still proposed after the sweep (it declined %d)", l.Fingerprint, len(got))
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/(agents*each), "µs/program")
}

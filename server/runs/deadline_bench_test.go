package runs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// BenchmarkExpireDue measures one sweep that declines 100 command
// proposals past their deadline (4 agents, 25 each): per proposal, the
// store's compare-and-set, the audit record, the event, and the removal
// of the deadline. Filing them is not timed.
//
//	go test -run XXX -bench BenchmarkExpireDue -benchtime 5x ./server/runs
func BenchmarkExpireDue(b *testing.B) {
	c := newClock()
	f := &fixture{assenttest.Start(b, func(cfg *server.Config) { cfg.Now = c.Now; cfg.RateLimit = -1 })}
	tokens := make([]string, 4)
	for i := range tokens {
		tokens[i], _ = f.Issue(store.KindAgent, fmt.Sprintf("bench-%d", i))
	}
	round := 0
	for b.Loop() {
		b.StopTimer()
		for i := range 100 {
			if code := f.Do("POST", "/v1/runs", tokens[i%4], map[string]any{"template": "true", "run_id": fmt.Sprintf("r%d-%d", round, i), "deadline_seconds": 60}, nil); code != 202 {
				b.Fatalf("propose: %d", code)
			}
		}
		round++
		c.Add(time.Minute)
		b.StartTimer()
		n, err := f.Srv.Runs().ExpireDue(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// The part's own sweeper may have taken some first.
		if pend, _ := f.DB.Proposals().ListProposals(b.Context(), store.ProposalPending, "", 0); len(pend) != 0 || n > 100 {
			b.Fatalf("%d still pending after the sweep (it declined %d)", len(pend), n)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/100, "µs/proposal")
}

// BenchmarkEscalateDue measures one sweep that escalates 100 command
// proposals past their first deadline to a group (4 agents, 25 each):
// per proposal, reading it, the compare-and-set on the deadline's stage,
// the audit record and the event. Filing them is not timed.
//
//	go test -run XXX -bench BenchmarkEscalateDue -benchtime 5x ./server/runs
func BenchmarkEscalateDue(b *testing.B) {
	c := newClock()
	f := &fixture{assenttest.Start(b, func(cfg *server.Config) { cfg.Now = c.Now; cfg.RateLimit = -1 })}
	_, carol := f.Issue(store.KindHuman, "carol")
	if err := f.DB.Groups().AddGroupMember(b.Context(), store.GroupMember{Group: "oncall", PrincipalID: carol.ID, AddedAt: c.Now()}); err != nil {
		b.Fatal(err)
	}
	tokens := make([]string, 4)
	for i := range tokens {
		tokens[i], _ = f.Issue(store.KindAgent, fmt.Sprintf("bench-%d", i))
	}
	round := 0
	for b.Loop() {
		b.StopTimer()
		// Decline what the last round escalated, so each round files 100
		// under the agents' bound of pending proposals.
		if pend, _ := f.DB.Proposals().ListProposals(b.Context(), store.ProposalPending, "", 0); len(pend) > 0 {
			c.Add(time.Minute)
			if _, err := f.Srv.Runs().ExpireDue(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 100 {
			if code := f.Do("POST", "/v1/runs", tokens[i%4], map[string]any{"template": "true", "run_id": fmt.Sprintf("r%d-%d", round, i),
				"deadline_seconds": 60, "escalate_to": "oncall"}, nil); code != 202 {
				b.Fatalf("propose: %d", code)
			}
		}
		round++
		c.Add(time.Minute)
		b.StartTimer()
		if _, err := f.Srv.Runs().ExpireDue(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// The part's own sweeper may have taken some first.
		if due, _ := f.DB.Deadlines().DueDeadlines(b.Context(), store.DeadlineCommandProposal, c.Now(), 200); len(due) != 0 {
			b.Fatalf("%d deadlines still due after the sweep", len(due))
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/100, "µs/proposal")
}

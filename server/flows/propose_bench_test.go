package flows_test

import (
	"fmt"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
)

// BenchmarkProposeProgram measures one agent proposing a new one-step
// program with a reason and a deadline, over HTTP (POST
// /v1/flows/programs) and over MCP (flows_program_propose, one session):
// the strict parse, the bounds, the deadline, the proposal and the event.
// Each proposal is a new program, so the store grows as b.N does; compare
// the two at the same -benchtime.
//
//	go test -run XXX -bench BenchmarkProposeProgram -benchtime 200x ./server/flows
func BenchmarkProposeProgram(b *testing.B) {
	for _, via := range []string{"http", "mcp"} {
		b.Run(via, func(b *testing.B) {
			f := assenttest.Start(b, func(cfg *server.Config) { cfg.RateLimit = -1 })
			lim := flows.DefaultLimits
			lim.PendingPrograms = 1 << 20
			f.Srv.Flows().SetLimits(lim)
			tok, _ := f.Issue(store.KindAgent, "bench")
			cs, err := f.MCPSession(tok, "")
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			i := 0
			for b.Loop() {
				src := timedProgram(fmt.Sprintf("proposed-%d", i))
				i++
				if via == "http" {
					if code, _, raw := f.API("POST", "/v1/flows/programs?deadline_seconds=3600&reason=bench", tok, src); code != 202 {
						b.Fatalf("propose: %d %s", code, raw)
					}
					continue
				}
				out, isErr := assenttest.CallTool(b, cs, "flows_program_propose", map[string]any{"program": string(src), "reason": "bench", "deadline_seconds": 3600})
				if isErr || out["status"] != "proposed" {
					b.Fatalf("propose: %v", out)
				}
			}
		})
	}
}

package flows_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/flowtest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/tool"
)

// BenchmarkFlowPrescribeApply measures one prescribe and one apply of a
// state.assign transition through the server's Flow part, on the durable
// SQLite store, with ownership checks.
func BenchmarkFlowPrescribeApply(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "assent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	srv, err := server.New(ctx, server.Config{DataDir: b.TempDir(), Store: db})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	_, agent, err := auth.IssueToken(ctx, db, store.KindAgent, "bench", []string{"state.write"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	p, err := srv.Flows().Kernel().AddProgram(ctx, []byte(flowtest.Toggle))
	if err != nil {
		b.Fatal(err)
	}
	// The toggle has no entry phase, so an agent cannot start it: the
	// instance is started for the agent, as a person or service would.
	if _, err := srv.Flows().Kernel().Start(ctx, flow.Instance{ID: "t-1", Program: p.Fingerprint(), Phase: "off", Objective: "never", Owner: agent.ID}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := srv.Flows().Prescribe(ctx, agent, "t-1", flow.Request{})
		if err != nil || res.Decision.Kind != flow.Prescribed {
			b.Fatalf("prescribe: %v %+v", err, res.Decision)
		}
		if _, err := srv.Flows().Apply(ctx, agent, res.Decision.Prescription.ID, nil); err != nil {
			b.Fatalf("apply: %v", err)
		}
	}
}

// BenchmarkFlowsList measures one flows_list call, with only the demo's
// programs stored and with a 20,000-transition program (several MB) stored
// too: the list carries each program's summary, so its cost does not grow
// with the size of a program.
func BenchmarkFlowsList(b *testing.B) {
	for _, bc := range []struct {
		name string
		big  int // transitions of the extra program; 0 for none
	}{{"demo", 0}, {"big-program", 20000}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "assent.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			srv, _, err := demo.NewServer(ctx, server.Config{DataDir: b.TempDir(), Store: db})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			_, agent, err := auth.IssueToken(ctx, db, store.KindAgent, "bench", nil, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			size := 0
			if bc.big > 0 {
				src := chainProgram("big", bc.big)
				if _, err := srv.Flows().Kernel().AddProgram(ctx, []byte(src)); err != nil {
					b.Fatal(err)
				}
				size = len(src)
			}
			list := flows.FlowsListTool(srv.Flows())
			call := tool.Call{Principal: agent, Args: []byte(`{}`)}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := list.Handler(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "program-bytes")
		})
	}
}

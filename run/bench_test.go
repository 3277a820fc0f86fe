package run

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/assent-run/assent/store"
)

// BenchmarkControlAdmission measures durable Control admissions through the
// Manager's grouped commits, from 32 concurrent admitters per CPU. Each Run
// takes 64 admissions, so nothing backpressures.
func BenchmarkControlAdmission(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	runs := b.N/ControlPendingLimit + 1
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d", i)
		if err := f.db.ClaimRun(ctx, store.RunRecord{ID: ids[i], OwnerID: "alice", InstanceID: "gen", Generation: 1, CreatedAt: t0, StartedAt: t0}, ""); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			now := t0
			c := store.Control{ID: uuid.NewString(), InstanceID: "gen", Action: "pause", QueuedAt: &now}
			if err := f.m.controls.do(store.ControlAdmission{RunID: ids[i/ControlPendingLimit], Control: c}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
}

// BenchmarkTraceAppend measures validated Trace appends to one Run through
// the Manager (grouped commits, compaction included), from 32 concurrent
// producers per CPU.
func BenchmarkTraceAppend(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	if err := f.db.ClaimRun(ctx, store.RunRecord{ID: "t", OwnerID: "alice", InstanceID: "gen", Generation: 1, CreatedAt: t0, StartedAt: t0}, ""); err != nil {
		b.Fatal(err)
	}
	in := TraceInput{Kind: "progress.update", Summary: "step", Data: []byte(`{"completed":1}`)}
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.m.AppendTrace(ctx, "alice", "t", "", in); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// benchParallelism is the number of concurrent producers per CPU.
var benchParallelism = 32

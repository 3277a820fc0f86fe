package control

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkStageApplyUndo measures one in-process command per iteration,
// cycling stage (agent), apply (person) and undo (person) on one control
// per goroutine. It reports commands per second of wall time and per
// second of CPU time; on a machine shared with other work the second one
// shows what the registry itself costs.
func BenchmarkStageApplyUndo(b *testing.B) {
	for _, subs := range []int{0, 1} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			b.ReportAllocs()
			r := New(Config{})
			var delivered, dropped atomic.Uint64
			for range subs {
				stop := r.Subscribe(func(e Event) {
					delivered.Add(1)
					dropped.Add(e.Dropped)
				})
				defer stop()
			}
			ctx := context.Background()
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// Each goroutine works on its own control, as many
				// people and agents would.
				id := Identity{FormID: "bench"}
				id.ControlID = fmt.Sprintf("%p", &id)
				dispose, err := r.Register(Registration{Identity: id, Metadata: text("Name"), Handles: NewValue("Ada").Handles()})
				if err != nil {
					b.Error(err)
					return
				}
				defer dispose()
				cmds := [3]Command{
					{Action: Stage, Identity: id, Value: "Grace"},
					{Action: Apply, Identity: id},
					{Action: Undo, Identity: id},
				}
				ccs := [3]CommandContext{agent, person, person}
				i := 0
				for pb.Next() {
					if res := r.Execute(ctx, cmds[i], ccs[i]); !res.OK {
						b.Errorf("%s: %s", res.Action, res.Reason)
						return
					}
					i = (i + 1) % 3
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(b.N)/cpu.Seconds(), "commands/cpu-s")
			}
			if subs > 0 {
				// Events still queued when the benchmark stops are in
				// neither count.
				b.ReportMetric(float64(dropped.Load())/float64(dropped.Load()+delivered.Load()), "dropped-fraction")
			}
		})
	}
}

// BenchmarkRefusal measures an agent's refused apply, the most common
// refusal.
func BenchmarkRefusal(b *testing.B) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(b, r, Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()})
	ctx := context.Background()
	cmd := Command{Action: Apply, Identity: profile}
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Execute(ctx, cmd, agent); res.Reason != ReasonHumanConfirmationRequired {
			b.Fatal(res.Reason)
		}
	}
}

// BenchmarkList measures List of 10,000 controls.
func BenchmarkList(b *testing.B) {
	const n = 10000
	r := New(Config{})
	for i := range n {
		id := Identity{FormID: fmt.Sprint("form", i%100), ControlID: fmt.Sprint("control", i)}
		mustRegister(b, r, Registration{Identity: id, Metadata: text("Label"), Handles: NewValue(i).Handles()})
	}
	ctx := context.Background()
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got := r.List(ctx, ""); len(got) != n {
				b.Fatal(len(got))
			}
		}
	})
	b.Run("one-form", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got := r.List(ctx, "form7"); len(got) != n/100 {
				b.Fatal(len(got))
			}
		}
	})
}

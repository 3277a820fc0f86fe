package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// benchDB opens a store on a fresh schema for a benchmark.
func benchDB(b *testing.B) *postgres.DB {
	b.Helper()
	u, _ := pgtest.URL(b)
	db, err := postgres.Open(context.Background(), u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

var benchT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func benchRun(b *testing.B, db *postgres.DB, id string) store.RunRecord {
	b.Helper()
	r := store.RunRecord{ID: id, OwnerID: "p1", InstanceID: id + "-1", Generation: 1, CreatedAt: benchT0, StartedAt: benchT0}
	if err := db.ClaimRun(context.Background(), r, ""); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkAdmitControl measures durable Control admissions, one to a
// transaction; a new Run is used every 64 admissions so the journal never
// backpressures.
func BenchmarkAdmitControl(b *testing.B) {
	db := benchDB(b)
	ctx := context.Background()
	var run store.RunRecord
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%store.ControlPendingLimit == 0 {
			b.StopTimer()
			run = benchRun(b, db, fmt.Sprintf("r%d", i))
			b.StartTimer()
		}
		q := benchT0
		if _, err := db.AdmitControl(ctx, run.ID, store.Control{ID: uuid.NewString(), InstanceID: run.InstanceID, Action: "pause", QueuedAt: &q}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
}

// BenchmarkAdmitControlLongJournal measures admissions to a long-lived
// Run, whose journal keeps store.ControlTerminalLimit terminal records;
// the admitted Controls are claimed and handled every 32 admissions,
// outside the timer.
func BenchmarkAdmitControlLongJournal(b *testing.B) {
	db := benchDB(b)
	ctx := context.Background()
	run := benchRun(b, db, "long")
	var pending []string
	admit := func() {
		q := benchT0
		c, err := db.AdmitControl(ctx, run.ID, store.Control{ID: uuid.NewString(), InstanceID: run.InstanceID, Action: "pause", QueuedAt: &q})
		if err != nil {
			b.Fatal(err)
		}
		pending = append(pending, c.ID)
	}
	settle := func() {
		for _, id := range pending {
			if _, err := db.ClaimControl(ctx, run.ID, run.InstanceID, id, benchT0); err != nil {
				b.Fatal(err)
			}
			if _, err := db.TransitionControl(ctx, run.ID, id, store.ControlHandled, nil, "", benchT0); err != nil {
				b.Fatal(err)
			}
		}
		pending = pending[:0]
	}
	for range store.ControlTerminalLimit / 32 {
		for range 32 {
			admit()
		}
		settle()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if admit(); len(pending) == 32 {
			b.StopTimer()
			settle()
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
}

// BenchmarkAdmitControlsBatched measures admissions committed 64 to a
// transaction (one Run's full pending window each).
func BenchmarkAdmitControlsBatched(b *testing.B) {
	db := benchDB(b)
	ctx := context.Background()
	items := make([]store.ControlAdmission, store.ControlPendingLimit)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(items) {
		b.StopTimer()
		run := benchRun(b, db, fmt.Sprintf("r%d", i))
		b.StartTimer()
		q := benchT0
		for k := range items {
			items[k] = store.ControlAdmission{RunID: run.ID, Control: store.Control{ID: uuid.NewString(), InstanceID: run.InstanceID, Action: "pause", QueuedAt: &q}}
		}
		errs, err := db.AdmitControls(ctx, items)
		if err != nil || errs[len(errs)-1] != nil {
			b.Fatal(err, errs)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
}

// BenchmarkAppendTrace measures Trace appends on one Run, one to a
// transaction, compactions included.
func BenchmarkAppendTrace(b *testing.B) {
	db := benchDB(b)
	run := benchRun(b, db, "demo")
	ctx := context.Background()
	ev := store.TraceEvent{TS: benchT0, Kind: "progress.update", Summary: "step", Data: json.RawMessage(`{"completed":1}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev.ID = uuid.NewString()
		if err := db.AppendTrace(ctx, run.ID, ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkAppendTracesBatched measures appends committed 64 to a
// transaction, as the Run manager groups concurrent appenders.
func BenchmarkAppendTracesBatched(b *testing.B) {
	db := benchDB(b)
	run := benchRun(b, db, "demo")
	ctx := context.Background()
	items := make([]store.TraceAppend, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(items) {
		for k := range items {
			items[k] = store.TraceAppend{RunID: run.ID, Event: store.TraceEvent{ID: uuid.NewString(), TS: benchT0, Kind: "progress.update", Summary: "step", Data: json.RawMessage(`{"completed":1}`)}}
		}
		errs, err := db.AppendTraces(ctx, items)
		if err != nil || errs[len(errs)-1] != nil {
			b.Fatal(err, errs)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/assent-run/assent/run/journal"
	"github.com/assent-run/assent/store"
)

func openTest(t testing.TB) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newRun(t testing.TB, db *DB, id string) store.RunRecord {
	t.Helper()
	rec := store.RunRecord{ID: id, OwnerID: "p1", InstanceID: uuid.NewString(), Generation: 1, CreatedAt: t0, StartedAt: t0}
	if err := db.ClaimRun(context.Background(), rec, ""); err != nil {
		t.Fatal(err)
	}
	return rec
}

func admit(db *DB, run store.RunRecord, action string) (store.Control, error) {
	now := t0
	return db.AdmitControl(context.Background(), run.ID, store.Control{ID: uuid.NewString(), InstanceID: run.InstanceID, Action: action, QueuedAt: &now})
}

func TestClaimRunGenerations(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	r1 := newRun(t, db, "demo")
	if err := db.ClaimRun(ctx, r1, ""); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second claim: %v, want ErrConflict", err)
	}
	if _, err := admit(db, r1, "pause"); err != nil {
		t.Fatal(err)
	}
	r2 := r1
	r2.InstanceID, r2.Generation = uuid.NewString(), 2
	if err := db.ClaimRun(ctx, r2, "other"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("claim with wrong instance: %v", err)
	}
	if err := db.ClaimRun(ctx, r2, r1.InstanceID); err != nil {
		t.Fatal(err)
	}
	cs, _ := db.Controls(ctx, "demo")
	if len(cs) != 0 {
		t.Fatalf("new generation kept %d controls", len(cs))
	}
	if err := db.SaveRun(ctx, r1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("save of a replaced generation: %v", err)
	}
}

func TestAdmitBackpressure(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run := newRun(t, db, "demo")
	for i := 0; i < store.ControlPendingLimit; i++ {
		if _, err := admit(db, run, "pause"); err != nil {
			t.Fatalf("admission %d: %v", i+1, err)
		}
	}
	before, _ := db.Controls(ctx, run.ID)
	_, err := admit(db, run, "pause")
	var ce *store.ControlError
	if !errors.As(err, &ce) || ce.Reason != "control_backpressure" {
		t.Fatalf("65th admission: %v", err)
	}
	if ce.Pending != 64 || ce.Limit != 64 || ce.JournalLimit != 1<<20 || ce.JournalBytes == 0 || !ce.OldestPendingAt.Equal(t0) {
		t.Fatalf("refusal = %+v", ce)
	}
	if got := err.Error(); got != "Run Control admission backpressured: pending=64/64" {
		t.Fatalf("message %q", got)
	}
	after, _ := db.Controls(ctx, run.ID)
	if len(after) != len(before) {
		t.Fatalf("refusal wrote: %d → %d", len(before), len(after))
	}
	// A terminal transition frees exactly one slot.
	if _, err := db.TransitionControl(ctx, run.ID, before[0].ID, store.ControlFailed, nil, "x", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := admit(db, run, "pause"); err != nil {
		t.Fatalf("after a terminal transition: %v", err)
	}
	if _, err := admit(db, run, "pause"); !errors.As(err, &ce) {
		t.Fatalf("slot count: %v", err)
	}
}

func TestAdmitConcurrent(t *testing.T) {
	db := openTest(t)
	run := newRun(t, db, "demo")
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	for i := 0; i < 76; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := admit(db, run, "pause")
			mu.Lock()
			defer mu.Unlock()
			var ce *store.ControlError
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &ce) && ce.Reason == "control_backpressure":
				refused++
			default:
				t.Errorf("admission: %v", err)
			}
		}()
	}
	wg.Wait()
	if admitted != 64 || refused != 12 {
		t.Fatalf("admitted=%d refused=%d, want 64 and 12", admitted, refused)
	}
	cs, _ := db.Controls(context.Background(), run.ID)
	if len(cs) != 64 {
		t.Fatalf("journal holds %d records", len(cs))
	}
}

func TestControlTransitions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		path     []string // statuses applied in order after admission
		next     string
		expected []string
		ok       bool
		status   string
	}{
		{nil, store.ControlDelivered, nil, true, store.ControlDelivered},
		{nil, store.ControlClaimed, nil, true, store.ControlClaimed},
		{nil, store.ControlHandled, nil, false, store.ControlQueued},
		{nil, store.ControlFailed, nil, true, store.ControlFailed},
		{nil, store.ControlQueued, nil, false, store.ControlQueued},
		{[]string{store.ControlDelivered}, store.ControlDelivered, nil, false, store.ControlDelivered},
		{[]string{store.ControlDelivered}, store.ControlClaimed, nil, true, store.ControlClaimed},
		// A fast service claimed before delivery completed: delivered
		// records delivered_at but never regresses the status.
		{[]string{store.ControlClaimed}, store.ControlDelivered, nil, true, store.ControlClaimed},
		{[]string{store.ControlClaimed, store.ControlHandled}, store.ControlDelivered, nil, false, store.ControlHandled},
		{[]string{store.ControlClaimed}, store.ControlHandled, []string{store.ControlClaimed}, true, store.ControlHandled},
		{[]string{store.ControlClaimed}, store.ControlFailed, []string{store.ControlQueued, store.ControlDelivered}, false, store.ControlClaimed},
		{[]string{store.ControlClaimed}, store.ControlFailed, []string{store.ControlClaimed}, true, store.ControlFailed},
		{[]string{store.ControlClaimed}, store.ControlClaimed, nil, false, store.ControlClaimed},
		{[]string{store.ControlFailed}, store.ControlHandled, nil, false, store.ControlFailed},
		{[]string{store.ControlFailed}, store.ControlFailed, nil, false, store.ControlFailed},
		{[]string{store.ControlClaimed, store.ControlHandled}, store.ControlFailed, nil, false, store.ControlHandled},
	}
	for _, tc := range tests {
		name := strings.Join(append(append([]string{"queued"}, tc.path...), tc.next), "→")
		if tc.expected != nil {
			name += " expecting " + strings.Join(tc.expected, ",")
		}
		t.Run(name, func(t *testing.T) {
			db := openTest(t)
			run := newRun(t, db, "demo")
			c, err := admit(db, run, "pause")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.path {
				if _, err := db.TransitionControl(ctx, run.ID, c.ID, s, nil, "", t0); err != nil {
					t.Fatalf("setup %s: %v", s, err)
				}
			}
			_, err = db.TransitionControl(ctx, run.ID, c.ID, tc.next, tc.expected, "boom", t0.Add(time.Second))
			if tc.ok != (err == nil) {
				t.Fatalf("transition: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, store.ErrConflict) {
				t.Fatalf("refusal is %v, want ErrConflict", err)
			}
			cs, _ := db.Controls(ctx, run.ID)
			if cs[0].Status != tc.status {
				t.Fatalf("status %s, want %s", cs[0].Status, tc.status)
			}
			if cs[0].StatusTime().IsZero() {
				t.Fatal("status timestamp missing")
			}
		})
	}
}

func TestClaimFencedByGeneration(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run := newRun(t, db, "demo")
	c, _ := admit(db, run, "pause")
	if _, err := db.ClaimControl(ctx, run.ID, uuid.NewString(), c.ID, t0); err == nil {
		t.Fatal("a foreign generation claimed")
	}
	got, err := db.ClaimControl(ctx, run.ID, run.InstanceID, "", t0)
	if err != nil || got.ID != c.ID || got.Status != store.ControlClaimed {
		t.Fatalf("claim: %+v, %v", got, err)
	}
	if _, err := db.ClaimControl(ctx, run.ID, run.InstanceID, c.ID, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second claim: %v", err)
	}
}

func TestConcurrentClaimsNoDuplicates(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run := newRun(t, db, "demo")
	for i := 0; i < 20; i++ {
		admit(db, run, "pause")
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := db.ClaimControl(ctx, run.ID, run.InstanceID, "", t0)
				if err != nil {
					return
				}
				mu.Lock()
				seen[c.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 20 {
		t.Fatalf("claimed %d distinct", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
}

func TestTerminalRecordsKept(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run := newRun(t, db, "demo")
	for i := 0; i < store.ControlTerminalLimit+12; i++ {
		c, err := admit(db, run, "pause")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.TransitionControl(ctx, run.ID, c.ID, store.ControlFailed, nil, fmt.Sprint(i), t0); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := admit(db, run, "resume")
	cs, _ := db.Controls(ctx, run.ID)
	if len(cs) != 129 || cs[0].Error != "12" || cs[128].ID != p.ID {
		t.Fatalf("kept %d, oldest error %q", len(cs), cs[0].Error)
	}
}

func TestErrorTruncation(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"ascii", strings.Repeat("x", 5000)},
		{"two-byte", strings.Repeat("é", 3000)},
		{"three-byte", strings.Repeat("€", 2000)},
		{"four-byte", strings.Repeat("𝄞", 1500)},
		{"exact", strings.Repeat("x", 4096)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t)
			run := newRun(t, db, "demo")
			c, _ := admit(db, run, "pause")
			got, err := db.TransitionControl(ctx, run.ID, c.ID, store.ControlFailed, nil, tc.in, t0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Error) > 4096 || !utf8.ValidString(got.Error) {
				t.Fatalf("error of %d bytes, valid=%v", len(got.Error), utf8.ValidString(got.Error))
			}
			if len(tc.in) <= 4096 {
				if got.Error != tc.in {
					t.Fatal("an error within the bound was changed")
				}
				return
			}
			if !strings.HasSuffix(got.Error, "… [truncated]") || !strings.HasPrefix(tc.in, strings.TrimSuffix(got.Error, "… [truncated]")) {
				t.Fatalf("truncation %q…", got.Error[len(got.Error)-20:])
			}
			if len(got.Error) < 4096-20 {
				t.Fatalf("kept only %d bytes", len(got.Error))
			}
		})
	}
}

func TestJournalIntegrity(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		damage string
		reason string
	}{
		{"malformed input", `UPDATE run_controls SET input = '{not json'`, "malformed"},
		{"unknown status", `UPDATE run_controls SET status = 'lost'`, "invalid_record"},
		{"empty id", `UPDATE run_controls SET id = ''`, "invalid_record"},
		{"bad action", `UPDATE run_controls SET action = 'Pause'`, "invalid_record"},
		{"missing timestamp", `UPDATE run_controls SET queued_at = NULL`, "invalid_status_timestamp"},
		{"foreign pending", `UPDATE run_controls SET instance_id = 'other'`, "generation_mismatch"},
		{"oversized", `UPDATE run_controls SET bytes = 2000000`, "journal_bytes"},
		{"empty segment", `UPDATE run_controls SET action = 'player..pause'`, "invalid_record"},
		{"final dot", `UPDATE run_controls SET action = 'player.'`, "invalid_record"},
		{"leading digit", `UPDATE run_controls SET action = '1player'`, "invalid_record"},
		{"space in action", `UPDATE run_controls SET action = 'player pause'`, "invalid_record"},
		{"long action", `UPDATE run_controls SET action = 'a' || replace(hex(zeroblob(32)), '0', 'b')`, "invalid_record"},
		{"long input", `UPDATE run_controls SET input = '"' || replace(hex(zeroblob(200)), '0', 'x') || '"'`, "invalid_record"},
		{"empty instance", `UPDATE run_controls SET instance_id = ''`, "invalid_record"},
		{"claimed without its time", `UPDATE run_controls SET status = 'claimed'`, "invalid_status_timestamp"},
		{"malformed before invalid", `UPDATE run_controls SET input = '[', status = 'lost'`, "malformed"},
		{"sound edits", `UPDATE run_controls SET action = 'player-2.pause_now.x9', input = ' {"a": [1, 2.5e3, null]} '`, ""},
		{"full action length", `UPDATE run_controls SET action = 'a' || replace(hex(zeroblob(31)), '0', 'b') || 'c'`, ""},
		{"terminal of another generation", `UPDATE run_controls SET instance_id = 'other', status = 'failed', failed_at = 1`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t)
			run := newRun(t, db, "demo")
			c, _ := admit(db, run, "pause")
			if _, err := db.SQL().Exec(tc.damage); err != nil {
				t.Fatal(err)
			}
			before, _ := db.Controls(ctx, run.ID)
			var ce *store.ControlError
			_, err := admit(db, run, "pause")
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("admission to a sound journal: %v", err)
				}
				return
			}
			if !errors.As(err, &ce) || ce.Reason != "control_journal_integrity" || ce.IntegrityReason != tc.reason {
				t.Fatalf("admission: %v, want integrity %s", err, tc.reason)
			}
			if tc.reason != "generation_mismatch" {
				// Transitions and claims fail closed too.
				if _, err := db.TransitionControl(ctx, run.ID, before[0].ID, store.ControlFailed, nil, "", t0); !errors.As(err, &ce) {
					t.Fatalf("transition on a damaged journal: %v", err)
				}
				if _, err := db.ClaimControl(ctx, run.ID, run.InstanceID, "", t0); !errors.As(err, &ce) {
					t.Fatalf("claim on a damaged journal: %v", err)
				}
			}
			after, _ := db.Controls(ctx, run.ID)
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatal("a refused admission changed the journal")
			}
			_ = c
		})
	}
}

// appendN appends n events, several to a transaction (each append is
// still checked and compacted on its own).
func appendN(t testing.TB, db *DB, runID string, n int, data string) {
	t.Helper()
	var batch []store.TraceAppend
	flush := func() {
		errs, err := db.AppendTraces(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
		batch = batch[:0]
	}
	for i := 0; i < n; i++ {
		ev := store.TraceEvent{ID: uuid.NewString(), TS: t0, Kind: "progress.update", Summary: fmt.Sprint(i)}
		if data != "" {
			ev.Data = json.RawMessage(data)
		}
		batch = append(batch, store.TraceAppend{RunID: runID, Event: ev})
		if len(batch) == 100 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

func marker(t *testing.T, st store.TraceStats) journal.Compaction {
	t.Helper()
	if st.Marker == nil {
		t.Fatal("no marker")
	}
	var d journal.Compaction
	if err := json.Unmarshal(st.Marker.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTraceCompactionCount(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run := newRun(t, db, "demo")
	appendN(t, db, run.ID, 2048, "")
	st, _ := db.TraceStats(ctx, run.ID)
	if st.Events != 2048 || st.Marker != nil {
		t.Fatalf("before: %+v", st)
	}
	last := store.TraceEvent{ID: uuid.NewString(), TS: t0, Kind: "checkpoint.ready", Summary: "last"}
	if err := db.AppendTrace(ctx, run.ID, last); err != nil {
		t.Fatal(err)
	}
	evs, _ := db.Trace(ctx, run.ID, 0)
	if len(evs) != 1536 {
		t.Fatalf("kept %d events, want 1536", len(evs))
	}
	if evs[0].Summary != "514" || evs[1533].Summary != "2047" || evs[1534].ID != last.ID || evs[1535].Kind != store.TraceCompactedKind {
		t.Fatalf("suffix %s…%s, then %s, %s", evs[0].Summary, evs[1533].Summary, evs[1534].Kind, evs[1535].Kind)
	}
	st, _ = db.TraceStats(ctx, run.ID)
	d := marker(t, st)
	var size int
	for _, e := range evs {
		b, _ := store.EncodeLine(e)
		size += len(b)
	}
	if d.CompactionsTotal != 1 || d.DroppedValidEventsTotal != 514 || d.RetainedEvents != 1536 || d.RetainedBytes != int64(size) ||
		!d.DroppedEventCountExact || d.HistoryComplete || st.Bytes != size || st.Events != 1536 {
		t.Fatalf("marker %+v, stats %d/%d, size %d", d, st.Events, st.Bytes, size)
	}
	if st.Marker.Level != "warning" || st.Marker.Summary != "" || st.Marker.Attention != "" {
		t.Fatalf("marker shape %+v", st.Marker)
	}
	// A second compaction keeps one marker with cumulative totals.
	appendN(t, db, run.ID, 513, "")
	evs, _ = db.Trace(ctx, run.ID, 0)
	markers := 0
	for _, e := range evs {
		if e.Kind == store.TraceCompactedKind {
			markers++
		}
	}
	st, _ = db.TraceStats(ctx, run.ID)
	d = marker(t, st)
	if markers != 1 || d.CompactionsTotal != 2 || d.DroppedValidEventsTotal != 514+513 || len(evs) != 1536 {
		t.Fatalf("after a second compaction: %d markers, %+v, %d events", markers, d, len(evs))
	}
}

func TestTraceCompactionBytes(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run := newRun(t, db, "demo")
	big := `"` + strings.Repeat("x", 60000) + `"`
	appendN(t, db, run.ID, 200, big)
	st, _ := db.TraceStats(ctx, run.ID)
	if st.Bytes > store.TraceMaxBytes || st.Events > store.TraceMaxEvents {
		t.Fatalf("bounds passed: %+v", st)
	}
	d := marker(t, st)
	if d.RetainedBytes > store.TraceTargetBytes || d.RetainedEvents > store.TraceTargetEvents {
		t.Fatalf("marker %+v", d)
	}
	evs, _ := db.Trace(ctx, run.ID, 0)
	if evs[len(evs)-1].Summary != "199" {
		t.Fatal("the newest event is not last")
	}
	if d.DroppedValidEventsTotal+int64(len(evs)-1) != 200 {
		t.Fatalf("dropped %d + kept %d != 200", d.DroppedValidEventsTotal, len(evs)-1)
	}
}

func TestTools(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	tr := store.ToolRecord{Name: "audio_transcribe", OwnerID: "p1", Expose: true, Doc: json.RawMessage(`{"a":1}`), CreatedAt: t0, UpdatedAt: t0}
	if err := db.PutTool(ctx, tr, false); err != nil {
		t.Fatal(err)
	}
	if err := db.PutTool(ctx, tr, false); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	tr.Expose = false
	if err := db.PutTool(ctx, tr, true); err != nil {
		t.Fatal(err)
	}
	got, err := db.Tool(ctx, tr.Name)
	if err != nil || got.Expose {
		t.Fatalf("%+v %v", got, err)
	}
	if err := db.DeleteTool(ctx, tr.Name); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteTool(ctx, tr.Name); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
}

// BenchmarkAdmitControl measures durable Control admissions; a new Run is
// used every 64 admissions so the journal never backpressures.
func BenchmarkAdmitControl(b *testing.B) {
	db := openTest(b)
	var run store.RunRecord
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%store.ControlPendingLimit == 0 {
			b.StopTimer()
			run = newRun(b, db, fmt.Sprintf("r%d", i))
			b.StartTimer()
		}
		if _, err := admit(db, run, "pause"); err != nil {
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
	db := openTest(b)
	ctx := context.Background()
	run := newRun(b, db, "long")
	var pending []string
	settle := func() {
		for _, id := range pending {
			if _, err := db.ClaimControl(ctx, run.ID, run.InstanceID, id, t0); err != nil {
				b.Fatal(err)
			}
			if _, err := db.TransitionControl(ctx, run.ID, id, store.ControlHandled, nil, "", t0); err != nil {
				b.Fatal(err)
			}
		}
		pending = pending[:0]
	}
	for range store.ControlTerminalLimit / 32 {
		for range 32 {
			c, err := admit(db, run, "pause")
			if err != nil {
				b.Fatal(err)
			}
			pending = append(pending, c.ID)
		}
		settle()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := admit(db, run, "pause")
		if err != nil {
			b.Fatal(err)
		}
		if pending = append(pending, c.ID); len(pending) == 32 {
			b.StopTimer()
			settle()
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
}

// BenchmarkAppendTrace measures Trace appends on one Run, compactions
// included.
func BenchmarkAppendTrace(b *testing.B) {
	db := openTest(b)
	run := newRun(b, db, "demo")
	ctx := context.Background()
	ev := store.TraceEvent{TS: t0, Kind: "progress.update", Summary: "step", Data: json.RawMessage(`{"completed":1}`)}
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
	db := openTest(b)
	run := newRun(b, db, "demo")
	ctx := context.Background()
	items := make([]store.TraceAppend, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(items) {
		for k := range items {
			items[k] = store.TraceAppend{RunID: run.ID, Event: store.TraceEvent{ID: uuid.NewString(), TS: t0, Kind: "progress.update", Summary: "step", Data: json.RawMessage(`{"completed":1}`)}}
		}
		if _, err := db.AppendTraces(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkAdmitControlsBatched measures admissions committed 64 to a
// transaction (one Run's full pending window each).
func BenchmarkAdmitControlsBatched(b *testing.B) {
	db := openTest(b)
	ctx := context.Background()
	items := make([]store.ControlAdmission, store.ControlPendingLimit)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(items) {
		b.StopTimer()
		run := newRun(b, db, fmt.Sprintf("r%d", i))
		b.StartTimer()
		now := time.Now()
		for k := range items {
			items[k] = store.ControlAdmission{RunID: run.ID, Control: store.Control{ID: uuid.NewString(), InstanceID: run.InstanceID, Action: "pause", QueuedAt: &now}}
		}
		errs, err := db.AdmitControls(ctx, items)
		if err != nil || errs[len(errs)-1] != nil {
			b.Fatal(err, errs)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
}

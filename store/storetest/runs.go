package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// Runs checks a backend's store.Runs: generations, the Control journal's
// bounds, transitions (also under concurrent writers) and reads of one
// record, the Trace's bounds and compaction, and deletion. Run calls it; a
// backend that keeps only Runs may call it alone.
func Runs(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	cases := []struct {
		name string
		test func(*testing.T, store.Runs)
	}{
		{"Generations", testRunGenerations},
		{"AdmissionBounds", testAdmissionBounds},
		{"ConcurrentAdmission", testConcurrentAdmission},
		{"Transitions", testControlTransitions},
		{"MarkDelivered", testMarkDelivered},
		{"ReadControl", testReadControl},
		{"ConcurrentClaims", testConcurrentClaims},
		{"TerminalRetention", testTerminalRetention},
		{"TraceCompaction", testTraceCompaction},
		{"ConcurrentTrace", testConcurrentTrace},
		{"Delete", testRunDelete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t).Runs()) })
	}
}

// newRun claims a new Run id for owner p1, generation 1 with instance
// id+"-1".
func newRun(t *testing.T, s store.Runs, id string) store.RunRecord {
	t.Helper()
	r := store.RunRecord{ID: id, OwnerID: "p1", InstanceID: id + "-1", Generation: 1, CreatedAt: at(0), StartedAt: at(0)}
	if err := s.ClaimRun(ctx(t), r, ""); err != nil {
		t.Fatalf("ClaimRun(%s): %v", id, err)
	}
	return r
}

// admitOne admits Control n of generation r at epoch plus n milliseconds.
func admitOne(s store.Runs, t *testing.T, r store.RunRecord, n int) (store.Control, error) {
	q := at(time.Duration(n) * time.Millisecond)
	return s.AdmitControl(ctx(t), r.ID, store.Control{ID: fmt.Sprintf("c%03d", n), InstanceID: r.InstanceID, Action: "pause", QueuedAt: &q})
}

func pendingCount(t *testing.T, s store.Runs, runID string) int {
	t.Helper()
	cs, err := s.Controls(ctx(t), runID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cs {
		if store.ControlPending(c.Status) {
			n++
		}
	}
	return n
}

func testRunGenerations(t *testing.T, s store.Runs) {
	r := newRun(t, s, "gen")
	if err := s.ClaimRun(ctx(t), r, ""); !errors.Is(err, store.ErrConflict) {
		t.Errorf("claiming a taken id without replacing = %v, want ErrConflict", err)
	}
	if _, err := admitOne(s, t, r, 1); err != nil {
		t.Fatal(err)
	}
	next := r
	next.InstanceID, next.Generation = "gen-2", 2
	if err := s.ClaimRun(ctx(t), next, "gen-wrong"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("replacing another generation = %v, want ErrConflict", err)
	}
	if err := s.ClaimRun(ctx(t), next, r.InstanceID); err != nil {
		t.Fatalf("replacing the current generation: %v", err)
	}
	if cs, _ := s.Controls(ctx(t), r.ID); len(cs) != 0 {
		t.Errorf("the old generation's journal survived: %v", cs)
	}
	if err := s.SaveRun(ctx(t), r); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("saving a replaced generation = %v, want ErrNotFound", err)
	}
	code := 0
	next.ExitCode, next.Stop, next.EndedAt = &code, "killed", at(time.Second)
	if err := s.SaveRun(ctx(t), next); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx(t), r.ID)
	if err != nil || got.Generation != 2 || got.ExitCode == nil || *got.ExitCode != 0 || got.Stop != "killed" || !got.EndedAt.Equal(at(time.Second)) {
		t.Errorf("Run = %+v, %v; want generation 2 ended killed with code 0", got, err)
	}
}

func testAdmissionBounds(t *testing.T, s store.Runs) {
	r := newRun(t, s, "bounds")
	for i := range store.ControlPendingLimit {
		if _, err := admitOne(s, t, r, i); err != nil {
			t.Fatalf("admission %d: %v", i, err)
		}
	}
	_, err := admitOne(s, t, r, store.ControlPendingLimit)
	var ce *store.ControlError
	if !errors.As(err, &ce) || ce.Reason != "control_backpressure" || ce.Pending != store.ControlPendingLimit || !ce.OldestPendingAt.Equal(at(0)) {
		t.Fatalf("admission past the bound = %v, want control_backpressure at %d pending, oldest at %v", err, store.ControlPendingLimit, at(0))
	}
	if n := pendingCount(t, s, r.ID); n != store.ControlPendingLimit {
		t.Errorf("a refused admission wrote: %d pending", n)
	}
	foreign := r
	foreign.InstanceID = "other"
	if _, err := admitOne(s, t, foreign, 999); !errors.As(err, &ce) || ce.Reason != "control_journal_integrity" || ce.IntegrityReason != "generation_mismatch" {
		t.Errorf("admission of another generation = %v, want generation_mismatch", err)
	}
	q := at(0)
	if _, err := s.AdmitControl(ctx(t), "missing", store.Control{ID: "x", InstanceID: "i", Action: "pause", QueuedAt: &q}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("admission to an unknown Run = %v, want ErrNotFound", err)
	}
}

func testConcurrentAdmission(t *testing.T, s store.Runs) {
	r := newRun(t, s, "race")
	const writers = store.ControlPendingLimit + 16
	errs := race(writers, func(i int) error {
		_, err := admitOne(s, t, r, i)
		return err
	})
	admitted := 0
	for _, err := range errs {
		var ce *store.ControlError
		switch {
		case err == nil:
			admitted++
		case !errors.As(err, &ce) || ce.Reason != "control_backpressure":
			t.Errorf("concurrent admission: %v", err)
		}
	}
	if admitted != store.ControlPendingLimit || pendingCount(t, s, r.ID) != store.ControlPendingLimit {
		t.Errorf("%d of %d concurrent admissions succeeded, journal holds %d; want exactly %d",
			admitted, writers, pendingCount(t, s, r.ID), store.ControlPendingLimit)
	}
}

func testControlTransitions(t *testing.T, s store.Runs) {
	r := newRun(t, s, "moves")
	c, err := admitOne(s, t, r, 1)
	if err != nil || c.Status != store.ControlQueued {
		t.Fatalf("admission = %+v, %v", c, err)
	}
	steps := []struct {
		next     string
		expected []string
		want     string // status after, or "" for ErrConflict
	}{
		{store.ControlHandled, nil, ""},
		{store.ControlDelivered, nil, store.ControlDelivered},
		{store.ControlDelivered, nil, ""},
		{store.ControlClaimed, []string{store.ControlQueued}, ""},
		{store.ControlClaimed, nil, store.ControlClaimed},
		{store.ControlClaimed, nil, ""},
		{store.ControlHandled, []string{store.ControlClaimed}, store.ControlHandled},
		{store.ControlFailed, nil, ""},
	}
	for i, st := range steps {
		got, err := s.TransitionControl(ctx(t), r.ID, c.ID, st.next, st.expected, "", at(time.Duration(10+i)*time.Second))
		switch {
		case st.want == "" && !errors.Is(err, store.ErrConflict):
			t.Errorf("step %d to %s = %v, want ErrConflict", i, st.next, err)
		case st.want != "" && (err != nil || got.Status != st.want || got.StatusTime().IsZero()):
			t.Errorf("step %d to %s = %+v, %v; want %s", i, st.next, got, err, st.want)
		}
	}
	if _, err := s.TransitionControl(ctx(t), r.ID, "nope", store.ControlFailed, nil, "", at(0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("transition of an unknown record = %v, want ErrNotFound", err)
	}
	f, err := admitOne(s, t, r, 2)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", store.ControlErrorMaxBytes)
	f, err = s.TransitionControl(ctx(t), r.ID, f.ID, store.ControlFailed, nil, long, at(time.Minute))
	if err != nil || len(f.Error) > store.ControlErrorMaxBytes || !strings.HasSuffix(f.Error, "[truncated]") {
		t.Errorf("failed with a long error = %d bytes, %v; want at most %d, marked", len(f.Error), err, store.ControlErrorMaxBytes)
	}
}

// testMarkDelivered checks the one-statement delivered mark: it moves a
// record still queued as admitted, and changes nothing (ErrConflict) for
// one that moved on, was admitted otherwise or does not exist.
func testMarkDelivered(t *testing.T, s store.Runs) {
	r := newRun(t, s, "marks")
	c, err := admitOne(s, t, r, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkControlDelivered(ctx(t), r.ID, c, at(5*time.Second)); err != nil {
		t.Fatalf("marking a queued record = %v", err)
	}
	got, err := s.Control(ctx(t), r.ID, c.ID)
	if err != nil || got.Status != store.ControlDelivered || got.DeliveredAt == nil || !got.DeliveredAt.Equal(at(5*time.Second)) {
		t.Fatalf("after the mark the record is %+v, %v; want delivered at %v", got, err, at(5*time.Second))
	}
	if _, err := s.TransitionControl(ctx(t), r.ID, c.ID, store.ControlDelivered, nil, "", at(6*time.Second)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a transition to delivered after the mark = %v, want ErrConflict", err)
	}
	claimed, err := admitOne(s, t, r, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionControl(ctx(t), r.ID, claimed.ID, store.ControlClaimed, nil, "", at(7*time.Second)); err != nil {
		t.Fatal(err)
	}
	other, err := admitOne(s, t, r, 3)
	if err != nil {
		t.Fatal(err)
	}
	foreign := other
	foreign.InstanceID = "marks-9"
	changed := other
	changed.Action = "resume"
	missing := other
	missing.ID = "nope"
	conflicts := []struct {
		name string
		run  string
		c    store.Control
	}{
		{"marked already", r.ID, c},
		{"claimed", r.ID, claimed},
		{"of another generation", r.ID, foreign},
		{"not as admitted", r.ID, changed},
		{"unknown record", r.ID, missing},
		{"unknown Run", "nowhere", other},
	}
	for _, tc := range conflicts {
		if err := s.MarkControlDelivered(ctx(t), tc.run, tc.c, at(8*time.Second)); !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s: mark = %v, want ErrConflict", tc.name, err)
		}
	}
	for _, id := range []string{claimed.ID, other.ID} {
		got, err := s.Control(ctx(t), r.ID, id)
		if err != nil || got.DeliveredAt != nil {
			t.Errorf("a refused mark changed %s: %+v, %v", id, got, err)
		}
	}
	// The journal's tally follows the mark: the marked record's life
	// goes on and ends as any other's.
	for _, next := range []string{store.ControlClaimed, store.ControlHandled} {
		if _, err := s.TransitionControl(ctx(t), r.ID, c.ID, next, nil, "", at(9*time.Second)); err != nil {
			t.Fatalf("%s after the mark: %v", next, err)
		}
	}
}

func testReadControl(t *testing.T, s store.Runs) {
	r := newRun(t, s, "readone")
	other := newRun(t, s, "readother")
	for n := 1; n <= 3; n++ {
		if _, err := admitOne(s, t, r, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admitOne(s, t, other, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionControl(ctx(t), r.ID, "c002", store.ControlFailed, nil, "gone wrong", at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, run, id string
		want          string // status, or "" for ErrNotFound
		wantErr       string
	}{
		{"queued", r.ID, "c001", store.ControlQueued, ""},
		{"failed", r.ID, "c002", store.ControlFailed, "gone wrong"},
		{"last", r.ID, "c003", store.ControlQueued, ""},
		{"unknown id", r.ID, "c004", "", ""},
		{"another Run's record", r.ID, "c009", "", ""},
		{"unknown Run", "missing", "c001", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Control(ctx(t), c.run, c.id)
			if c.want == "" {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("Control(%s, %s) = %+v, %v; want ErrNotFound", c.run, c.id, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Control(%s, %s): %v", c.run, c.id, err)
			}
			if got.ID != c.id || got.InstanceID != r.InstanceID || got.Action != "pause" || got.Status != c.want || got.Error != c.wantErr || got.StatusTime().IsZero() {
				t.Errorf("Control(%s, %s) = %+v; want status %s, error %q", c.run, c.id, got, c.want, c.wantErr)
			}
		})
	}
	// The record read alone equals the one in the whole journal.
	cs, err := s.Controls(ctx(t), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range cs {
		got, err := s.Control(ctx(t), r.ID, want.ID)
		a, _ := store.EncodeLine(got)
		b, _ := store.EncodeLine(want)
		if err != nil || string(a) != string(b) || got.SenderID != want.SenderID {
			t.Errorf("Control(%s) = %s, %v; the journal holds %s", want.ID, a, err, b)
		}
	}
}

func testConcurrentClaims(t *testing.T, s store.Runs) {
	r := newRun(t, s, "claims")
	c, err := admitOne(s, t, r, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Another generation never claims: nothing to claim, or a journal
	// whose pending records belong to someone else.
	if got, err := s.ClaimControl(ctx(t), r.ID, "other", c.ID, at(time.Second)); err == nil {
		t.Errorf("claim by another generation succeeded: %+v", got)
	}
	errs := race(8, func(int) error {
		_, err := s.ClaimControl(ctx(t), r.ID, r.InstanceID, c.ID, at(time.Second))
		return err
	})
	exactlyOne(t, "concurrent claims", errs, store.ErrNotFound)
}

func testTerminalRetention(t *testing.T, s store.Runs) {
	r := newRun(t, s, "keep")
	const total = store.ControlTerminalLimit + 10
	for i := range total {
		c, err := admitOne(s, t, r, i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.TransitionControl(ctx(t), r.ID, c.ID, store.ControlFailed, nil, "x", at(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := s.Controls(ctx(t), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != store.ControlTerminalLimit || cs[len(cs)-1].ID != fmt.Sprintf("c%03d", total-1) || cs[0].ID != fmt.Sprintf("c%03d", total-store.ControlTerminalLimit) {
		t.Errorf("kept %d terminal records (first %s); want the newest %d", len(cs), cs[0].ID, store.ControlTerminalLimit)
	}
}

// appendEvents appends n events with the summary prefix, in batches.
func appendEvents(t *testing.T, s store.Runs, runID, prefix string, n int) {
	t.Helper()
	var batch []store.TraceAppend
	for i := range n {
		batch = append(batch, store.TraceAppend{RunID: runID, Event: store.TraceEvent{ID: fmt.Sprintf("%s%d", prefix, i), TS: at(0), Kind: "progress.update", Summary: fmt.Sprint(i)}})
		if len(batch) == 100 || i == n-1 {
			errs, err := s.AppendTraces(ctx(t), batch)
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
	}
}

// checkTrace checks the retained Trace of runID against its bounds and
// its stats, and returns the marker's data.
func checkTrace(t *testing.T, s store.Runs, runID string) map[string]any {
	t.Helper()
	st, err := s.TraceStats(ctx(t), runID)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Trace(ctx(t), runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	markers := 0
	for _, e := range evs {
		b, _ := store.EncodeLine(e)
		size += len(b)
		if e.Kind == store.TraceCompactedKind {
			markers++
		}
	}
	if st.Events != len(evs) || st.Bytes != size || st.Events > store.TraceMaxEvents || st.Bytes > store.TraceMaxBytes {
		t.Fatalf("stats %d events %d bytes; Trace holds %d events %d bytes; bounds %d, %d", st.Events, st.Bytes, len(evs), size, store.TraceMaxEvents, store.TraceMaxBytes)
	}
	if markers > 1 {
		t.Fatalf("%d compaction markers retained; want at most one", markers)
	}
	if st.Marker == nil {
		return nil
	}
	var d map[string]any
	if err := json.Unmarshal(st.Marker.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func testTraceCompaction(t *testing.T, s store.Runs) {
	r := newRun(t, s, "trace")
	appendEvents(t, s, r.ID, "a", store.TraceMaxEvents)
	if d := checkTrace(t, s, r.ID); d != nil {
		t.Fatalf("compacted at the bound: %v", d)
	}
	appendEvents(t, s, r.ID, "b", 1)
	d := checkTrace(t, s, r.ID)
	if d == nil || d["compactions_total"] != 1.0 || d["dropped_valid_events_total"].(float64) <= 0 {
		t.Fatalf("after passing the bound: marker %v", d)
	}
	evs, _ := s.Trace(ctx(t), r.ID, 2)
	if len(evs) != 2 || evs[0].ID != "b0" || evs[1].Kind != store.TraceCompactedKind {
		t.Errorf("newest events %v; want the appended event, then the marker", evs)
	}
	dropped := d["dropped_valid_events_total"].(float64)
	appendEvents(t, s, r.ID, "c", store.TraceMaxEvents)
	d = checkTrace(t, s, r.ID)
	if d["compactions_total"].(float64) < 2 || d["dropped_valid_events_total"].(float64) <= dropped {
		t.Errorf("totals are not cumulative: %v", d)
	}
	big := store.TraceEvent{ID: "big", TS: at(0), Kind: "progress.update", Summary: strings.Repeat("x", store.TraceEventMaxBytes)}
	if err := s.AppendTrace(ctx(t), r.ID, big); err == nil {
		t.Errorf("an event over %d bytes was appended", store.TraceEventMaxBytes)
	}
	if err := s.AppendTrace(ctx(t), "missing", store.TraceEvent{ID: "x", TS: at(0), Kind: "progress.update"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("append to an unknown Run = %v, want ErrNotFound", err)
	}
}

func testConcurrentTrace(t *testing.T, s store.Runs) {
	r := newRun(t, s, "tracerace")
	appendEvents(t, s, r.ID, "w", store.TraceMaxEvents-8)
	errs := race(16, func(i int) error {
		for j := range 4 {
			if err := s.AppendTrace(ctx(t), r.ID, store.TraceEvent{ID: fmt.Sprintf("r%d-%d", i, j), TS: at(0), Kind: "progress.update"}); err != nil {
				return err
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if d := checkTrace(t, s, r.ID); d == nil || d["compactions_total"] != 1.0 {
		t.Errorf("concurrent appends past the bound: marker %v, want one compaction", d)
	}
}

func testRunDelete(t *testing.T, s store.Runs) {
	r := newRun(t, s, "gone")
	keep := newRun(t, s, "kept")
	for _, run := range []store.RunRecord{r, keep} {
		if _, err := admitOne(s, t, run, 1); err != nil {
			t.Fatal(err)
		}
		appendEvents(t, s, run.ID, "e", 3)
	}
	if err := s.DeleteRun(ctx(t), r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx(t), r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Run after delete = %v, want ErrNotFound", err)
	}
	if cs, _ := s.Controls(ctx(t), r.ID); len(cs) != 0 {
		t.Errorf("journal after delete: %v", cs)
	}
	if evs, _ := s.Trace(ctx(t), r.ID, 0); len(evs) != 0 {
		t.Errorf("Trace after delete: %d events", len(evs))
	}
	if err := s.DeleteRun(ctx(t), r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice = %v, want ErrNotFound", err)
	}
	runs, err := s.ListRuns(ctx(t), "p1")
	if err != nil || len(runs) != 1 || runs[0].ID != keep.ID {
		t.Errorf("ListRuns after delete = %v, %v; want only %s", runs, err, keep.ID)
	}
	if cs, _ := s.Controls(ctx(t), keep.ID); len(cs) != 1 {
		t.Errorf("deleting one Run touched another's journal: %v", cs)
	}
}

package journal

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/assent-run/assent/store"
)

// Compaction is the data of a runtime.trace_compacted marker. The
// counters are cumulative over every compaction of the generation.
type Compaction struct {
	Version                    int   `json:"version"`
	CompactionsTotal           int64 `json:"compactions_total"`
	DroppedValidEventsTotal    int64 `json:"dropped_valid_events_total"`
	DroppedMalformedLinesTotal int64 `json:"dropped_malformed_lines_total"`
	DroppedBytesTotal          int64 `json:"dropped_bytes_total"`
	DroppedEventCountExact     bool  `json:"dropped_event_count_exact"`
	RetainedEvents             int64 `json:"retained_events"`
	RetainedBytes              int64 `json:"retained_bytes"`
	HistoryComplete            bool  `json:"history_complete"`
}

// maxSafeInteger is the largest integer a JSON reader keeps exactly; the
// counters saturate there.
const maxSafeInteger = 1<<53 - 1

func satAdd(a, b int64) int64 {
	if a > maxSafeInteger-b {
		return maxSafeInteger
	}
	return a + b
}

// TraceFits reports whether an event of n bytes (its line, newline
// included) can be appended to a Trace of events events and size bytes
// without compaction.
func TraceFits(events, size, n int64) bool {
	return events+1 <= store.TraceMaxEvents && size+n <= store.TraceMaxBytes
}

// ErrEventTooLarge refuses an event whose encoding passes
// store.TraceEventMaxBytes.
var ErrEventTooLarge = errors.New("the Trace event exceeds 65536 bytes")

// EventLine returns the canonical line of ev with its time in
// milliseconds, refusing one over store.TraceEventMaxBytes.
func EventLine(ev store.TraceEvent) ([]byte, error) {
	ev.TS = ev.TS.UTC().Truncate(time.Millisecond)
	line, err := store.EncodeLine(ev)
	if err != nil {
		return nil, err
	}
	return line, CheckLine(line)
}

// CheckLine refuses an encoded event line (newline included) over
// store.TraceEventMaxBytes.
func CheckLine(line []byte) error {
	if len(line)-1 > store.TraceEventMaxBytes {
		return ErrEventTooLarge
	}
	return nil
}

// TraceEntry is one retained Trace event as compaction sees it: a
// backend's key for it (ordered as appended), its kind and the size of its
// line.
type TraceEntry struct {
	Key   int64
	Kind  string
	Bytes int64
}

// CompactPlan is what a compaction writes, in one transaction: delete
// every non-marker entry with a key up to DropThrough (nothing when Drop
// is false) and every entry in Markers, append the new event, then append
// Marker. The Trace then holds RetainedEvents events of RetainedBytes.
type CompactPlan struct {
	Drop           bool
	DropThrough    int64
	Markers        []int64
	Marker         store.TraceEvent
	MarkerLine     []byte
	RetainedEvents int64
	RetainedBytes  int64
}

// Compact plans the compaction that makes room for the event ev, whose
// line is n bytes, in a Trace past its bounds. entries are the retained
// events newest first; prev is the data of the newest retained marker
// (zero when there is none). The newest suffix that fits
// store.TraceTargetEvents and store.TraceTargetBytes, with room for the
// event and the marker, is kept.
func Compact(entries []TraceEntry, prev *Compaction, ev store.TraceEvent, n int64) (CompactPlan, error) {
	var p CompactPlan
	last := Compaction{DroppedEventCountExact: true}
	if prev != nil {
		last = *prev
	}
	var candidates []TraceEntry
	var candidateBytes int64
	for _, e := range entries {
		if e.Kind == store.TraceCompactedKind {
			p.Markers = append(p.Markers, e.Key)
			continue
		}
		candidates = append(candidates, e)
		candidateBytes += e.Bytes
	}
	p.Marker = store.TraceEvent{ID: uuid.NewString(), TS: ev.TS, Kind: store.TraceCompactedKind, Level: "warning"}
	reserve, err := markerLine(p.Marker, Compaction{Version: 1, CompactionsTotal: maxSafeInteger,
		DroppedValidEventsTotal: maxSafeInteger, DroppedMalformedLinesTotal: maxSafeInteger, DroppedBytesTotal: maxSafeInteger,
		RetainedEvents: maxSafeInteger, RetainedBytes: maxSafeInteger})
	if err != nil {
		return p, err
	}
	budget := int64(store.TraceTargetBytes) - n - int64(len(reserve))
	var kept int
	var keptBytes int64
	for _, e := range candidates {
		if kept >= store.TraceTargetEvents-2 || keptBytes+e.Bytes > budget {
			break
		}
		kept++
		keptBytes += e.Bytes
	}
	if kept < len(candidates) {
		p.Drop, p.DropThrough = true, candidates[kept].Key
	}
	d := Compaction{
		Version:                    1,
		CompactionsTotal:           satAdd(last.CompactionsTotal, 1),
		DroppedValidEventsTotal:    satAdd(last.DroppedValidEventsTotal, int64(len(candidates)-kept)),
		DroppedMalformedLinesTotal: last.DroppedMalformedLinesTotal,
		DroppedBytesTotal:          satAdd(last.DroppedBytesTotal, candidateBytes-keptBytes),
		DroppedEventCountExact:     last.DroppedEventCountExact,
		RetainedEvents:             int64(kept + 2),
	}
	// The marker states its own size: settle the retained bytes by
	// encoding until the figure no longer changes.
	for i := 0; ; i++ {
		if i == 8 {
			return p, errors.New("compact trace: marker size did not converge")
		}
		if p.MarkerLine, err = markerLine(p.Marker, d); err != nil {
			return p, err
		}
		total := keptBytes + n + int64(len(p.MarkerLine))
		if d.RetainedBytes == total {
			break
		}
		d.RetainedBytes = total
	}
	if d.RetainedBytes > store.TraceTargetBytes || d.RetainedEvents > store.TraceTargetEvents {
		return p, errors.New("compact trace: could not satisfy Trace bounds")
	}
	p.Marker.Data, _ = json.Marshal(d)
	p.RetainedEvents, p.RetainedBytes = d.RetainedEvents, d.RetainedBytes
	return p, nil
}

func markerLine(m store.TraceEvent, d Compaction) ([]byte, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	m.Data = data
	return store.EncodeLine(m)
}

// MarkerData decodes the data of a compaction marker; nil when it cannot.
func MarkerData(m store.TraceEvent) *Compaction {
	d := Compaction{DroppedEventCountExact: true}
	if json.Unmarshal(m.Data, &d) != nil {
		return nil
	}
	return &d
}

package run

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/assent-run/assent/run/recipe"
	"github.com/assent-run/assent/store"
)

// TraceInput is what a producer supplies for one Trace event; the runtime
// assigns its id and timestamp.
type TraceInput struct {
	Kind      string          `json:"kind"`
	Summary   string          `json:"summary,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Level     string          `json:"level,omitempty"`
	Attention string          `json:"attention,omitempty"`
}

var removedTraceFields = map[string]bool{"body": true, "correlation_id": true, "from": true, "metadata": true, "reply_to": true, "to": true, "type": true}

// DecodeTraceInput parses a Trace event request: a JSON object with only
// kind, summary, data, level and attention.
func DecodeTraceInput(raw []byte) (TraceInput, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return TraceInput{}, errorf(CodeInvalidTrace, "Trace event must be an object")
	}
	var removed, unknown []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case removedTraceFields[k]:
			removed = append(removed, k)
		case k == "kind" || k == "summary" || k == "data" || k == "level" || k == "attention":
		default:
			unknown = append(unknown, k)
		}
	}
	if len(removed) > 0 {
		return TraceInput{}, errorf(CodeInvalidTrace, "Trace event fields are removed: %s", strings.Join(removed, ", "))
	}
	if len(unknown) > 0 {
		return TraceInput{}, errorf(CodeInvalidTrace, "Unsupported Trace event fields: %s", strings.Join(unknown, ", "))
	}
	var in TraceInput
	for k, v := range m {
		var dst *string
		switch k {
		case "kind":
			dst = &in.Kind
		case "summary":
			dst = &in.Summary
		case "level":
			dst = &in.Level
		case "attention":
			dst = &in.Attention
		case "data":
			in.Data = v
			continue
		}
		if err := json.Unmarshal(v, dst); err != nil {
			if k == "summary" {
				return TraceInput{}, errorf(CodeInvalidTrace, "Trace event summary must be a string")
			}
			return TraceInput{}, errorf(CodeInvalidTrace, "Trace event %s must be a string", k)
		}
	}
	return in, nil
}

// NewTraceEvent validates in and returns the event to store, with a fresh
// id and the time now. The summary is cut to 1,000 characters; the encoded
// event must fit in 65,536 bytes.
func NewTraceEvent(in TraceInput, now time.Time) (store.TraceEvent, error) {
	ev, _, err := newTraceEvent(in, now, false)
	return ev, err
}

// newTraceEvent validates in and returns the event and its encoded line.
func newTraceEvent(in TraceInput, now time.Time, runtime bool) (store.TraceEvent, []byte, error) {
	if !recipe.IsToken(in.Kind) {
		return store.TraceEvent{}, nil, errorf(CodeInvalidTrace, "Trace event kind must be a lowercase semantic token")
	}
	if in.Kind == store.TraceCompactedKind && !runtime {
		return store.TraceEvent{}, nil, errorf(CodeInvalidTrace, "Trace event kind is runtime-reserved: runtime.trace_compacted")
	}
	switch in.Level {
	case "", "info", "warning", "error":
	default:
		return store.TraceEvent{}, nil, errorf(CodeInvalidTrace, "Trace event level must be info, warning, or error")
	}
	switch in.Attention {
	case "", "notify", "followup", "steer":
	default:
		return store.TraceEvent{}, nil, errorf(CodeInvalidTrace, "Trace event attention must be notify, followup, or steer")
	}
	summary := in.Summary
	if utf8.RuneCountInString(summary) > TraceSummaryMaxChars {
		summary = string([]rune(summary)[:TraceSummaryMaxChars])
	}
	if !utf8.ValidString(summary) {
		summary = strings.ToValidUTF8(summary, "\uFFFD")
	}
	var data json.RawMessage
	if d := bytes.TrimSpace(in.Data); len(d) > 0 {
		c, err := canonicalJSON(d)
		if err != nil {
			return store.TraceEvent{}, nil, errorf(CodeInvalidTrace, "Trace event data must be JSON-serializable")
		}
		data = c
	}
	ev := store.TraceEvent{ID: uuid.NewString(), TS: now.UTC().Truncate(time.Millisecond), Kind: in.Kind,
		Summary: summary, Data: data, Level: in.Level, Attention: in.Attention}
	b, err := store.EncodeLine(ev)
	if err != nil {
		return store.TraceEvent{}, nil, errorf(CodeInvalidTrace, "Trace event data must be JSON-serializable")
	}
	if len(b)-1 > TraceEventMaxBytes {
		return store.TraceEvent{}, nil, errorf(CodeInvalidTrace, "Trace event exceeds 65536 bytes")
	}
	return ev, b, nil
}

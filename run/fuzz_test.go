package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/assent-run/assent/run/recipe"
	"github.com/assent-run/assent/store"
)

func fzRunCollect(v any, vals, keys *[]string) {
	switch x := v.(type) {
	case string:
		*vals = append(*vals, x)
	case []any:
		for _, e := range x {
			fzRunCollect(e, vals, keys)
		}
	case map[string]any:
		for k, e := range x {
			*keys = append(*keys, k)
			fzRunCollect(e, vals, keys)
		}
	}
}

// fzSameJSON reports whether a and b are the same JSON value, numbers
// compared by their text.
func fzSameJSON(a, b []byte) bool {
	dec := func(x []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		return v, d.Decode(&v) == nil
	}
	va, oka := dec(a)
	vb, okb := dec(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}

var traceInputKeys = []string{"kind", "summary", "data", "level", "attention"}

// FuzzDecodeTraceInput feeds arbitrary Trace event requests (the body of
// POST /v1/runs/{id}/trace) to DecodeTraceInput and, when it accepts one,
// to newTraceEvent, and checks:
//   - an error gives the zero TraceInput and an invalid_trace_event *Error
//     whose message never repeats a string value of the request;
//   - success means one JSON object with only kind, summary, data, level
//     and attention, each string field as the request spells it and data
//     as sent;
//   - an event it makes has a token kind that is not runtime-reserved, a
//     known level and attention, a summary of valid UTF-8 of at most 1,000
//     characters that starts the request's summary when that is valid
//     UTF-8, data that is the same JSON as the request's, a stored line
//     within 65,536 bytes, and a line that reads back to the same event.
func FuzzDecodeTraceInput(f *testing.F) {
	for _, s := range []string{
		`{"kind":"progress.update","summary":"ok","data":{"n":1},"level":"info","attention":"notify"}`,
		`[]`,
		`{"kind":"a","from":"x","to":"y"}`,
		`{"kind":"a","id":"x","ts":"y"}`,
		`{"kind":"Bad"}`,
		`{"kind":"runtime.trace_compacted"}`,
		`{"kind":"a","summary":3}`,
		`{"kind":"a","level":"debug"}`,
		`{"kind":"a","attention":"loud"}`,
		`{"kind":"a","attention":"steer"}`,
		`{"kind":"a","data":[1,{"b":null}]}`,
		`{"kind":"a","data":null}`,
		`{"kind":null}`,
		`{"kind":"a","kind":"b"}`,
		`{"Kind":"a"}`,
		`{"kind":"a","data":{"n":123456789012345678901234567890,"f":1e400,"g":-0.0}}`,
		`{"kind":"a","data":{"a":1,"a":2}}`,
		`{"kind":"a","summary":"\xff\xfe\u0000 caf\u00e9"}`,
		`{"kind":"a","summary":"` + strings.Repeat("\u00e9", 1200) + `"}`,
		`{"kind":"a","data":"` + strings.Repeat("x", 65500) + `"}`,
		`{"kind":"a","password":"hunter2-secret-value"}`,
		`{"kind":"a","level":"hunter2-secret-value"}`,
		`{"kind":"a"} `,
		`{"kind":"a"}{}`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := DecodeTraceInput(raw)
		if err != nil {
			var re *Error
			if !errors.As(err, &re) || re.Code != CodeInvalidTrace {
				t.Fatalf("error %#v is not invalid_trace_event", err)
			}
			if !reflect.DeepEqual(in, TraceInput{}) {
				t.Fatalf("error %v came with %+v", err, in)
			}
			var v any
			if json.Unmarshal(raw, &v) == nil {
				var vals, keys []string
				fzRunCollect(v, &vals, &keys)
				for _, s := range vals {
					if len(s) >= 8 && strings.Contains(re.Message, s) && !slices.Contains(keys, s) {
						t.Fatalf("error %q repeats the value %q", re.Message, s)
					}
				}
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			t.Fatalf("accepted %q, which is not a JSON object", raw)
		}
		for k, v := range m {
			if !slices.Contains(traceInputKeys, k) {
				t.Fatalf("accepted the key %q", k)
			}
			if k == "data" {
				if !bytes.Equal(in.Data, v) {
					t.Fatalf("data %s, the request says %s", in.Data, v)
				}
				continue
			}
			var s string
			_ = json.Unmarshal(v, &s)
			got := map[string]string{"kind": in.Kind, "summary": in.Summary, "level": in.Level, "attention": in.Attention}[k]
			if got != s {
				t.Fatalf("%s is %q, the request says %q", k, got, s)
			}
		}

		ev, line, err := newTraceEvent(in, t0, false)
		if err != nil {
			var re *Error
			if !errors.As(err, &re) || re.Code != CodeInvalidTrace {
				t.Fatalf("event error %#v is not invalid_trace_event", err)
			}
			return
		}
		if !recipe.IsToken(ev.Kind) || ev.Kind == store.TraceCompactedKind {
			t.Fatalf("accepted the kind %q", ev.Kind)
		}
		if !slices.Contains([]string{"", "info", "warning", "error"}, ev.Level) ||
			!slices.Contains([]string{"", "notify", "followup", "steer"}, ev.Attention) {
			t.Fatalf("accepted level %q attention %q", ev.Level, ev.Attention)
		}
		if !utf8.ValidString(ev.Summary) || utf8.RuneCountInString(ev.Summary) > TraceSummaryMaxChars {
			t.Fatalf("summary %q", ev.Summary)
		}
		if utf8.ValidString(in.Summary) && !strings.HasPrefix(in.Summary, ev.Summary) {
			t.Fatalf("summary %q is not the start of %q", ev.Summary, in.Summary)
		}
		if d := bytes.TrimSpace(in.Data); len(d) > 0 && !fzSameJSON(d, ev.Data) {
			t.Fatalf("data %s became %s", d, ev.Data)
		}
		if len(line)-1 > TraceEventMaxBytes || !bytes.HasSuffix(line, []byte("\n")) {
			t.Fatalf("stored line of %d bytes", len(line))
		}
		if enc, _ := store.EncodeLine(ev); !bytes.Equal(enc, line) {
			t.Fatalf("line %q is not the event's encoding %q", line, enc)
		}
		var back store.TraceEvent
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatalf("stored line %q doesn't read back: %v", line, err)
		}
		again, _ := store.EncodeLine(back)
		if !bytes.Equal(again, line) {
			t.Fatalf("stored line changed when read back:\n %s\n %s", line, again)
		}
	})
}

// FuzzParseTarget feeds arbitrary targets to ParseTarget and checks:
//   - an error gives no id and an invalid_request or limit_exceeded *Error,
//     limit_exceeded exactly when a run: target's id is over the limit;
//   - an id it returns is what follows "run:" in the trimmed target and is
//     a valid Run id (ValidRunID), so "run:<id>" names only what a Run may
//     be called;
//   - for a target written "run:"+id, it agrees with ValidRunID.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"run:echo1", "run:svc", "run:r1", " run:x \n", "run:", "run", "RUN:x", "runtime", "recipes", "tool:x",
		"run:a/b", "run:a b", "run:-", "run:_", "run:a.b-c_d", "run:\u00e9", "run:\x00", "run:\xff",
		"run:" + strings.Repeat("a", RunIDMaxBytes), "run:" + strings.Repeat("a", RunIDMaxBytes+1),
		"run:" + strings.Repeat("a", 4096), strings.Repeat("x", 4096),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		id, err := ParseTarget(target)
		trimmed := strings.TrimSpace(target)
		rest, hasPrefix := strings.CutPrefix(trimmed, "run:")
		if err != nil {
			var re *Error
			if !errors.As(err, &re) || (re.Code != CodeInvalidRequest && re.Code != CodeLimitExceeded) {
				t.Fatalf("error %#v", err)
			}
			if id != "" {
				t.Fatalf("error %v came with id %q", err, id)
			}
			if (re.Code == CodeLimitExceeded) != (hasPrefix && len(rest) > RunIDMaxBytes) {
				t.Fatalf("%q: code %s", target, re.Code)
			}
		} else {
			if !hasPrefix || id != rest {
				t.Fatalf("%q gave the id %q", target, id)
			}
			if verr := ValidRunID(id); verr != nil {
				t.Fatalf("ParseTarget(%q) returned %q, which ValidRunID refuses: %v", target, id, verr)
			}
		}
		if strings.TrimSpace(target) == target && hasPrefix {
			_, perr := ParseTarget(target)
			if (perr == nil) != (ValidRunID(rest) == nil) {
				t.Fatalf("ParseTarget(%q) = %v but ValidRunID(%q) = %v", target, perr, rest, ValidRunID(rest))
			}
		}
	})
}

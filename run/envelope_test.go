package run

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/assent-run/assent/run/recipe"
)

func TestControlInputBoundary(t *testing.T) {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	tests := []struct {
		name  string
		input string
		ok    bool
	}{
		{"ascii 380", q(strings.Repeat("x", 378)), true},
		{"ascii 381", q(strings.Repeat("x", 379)), false},
		{"utf8 380", q(strings.Repeat("é", 189)), true},
		{"utf8 382", q(strings.Repeat("é", 190)), false},
		{"escaped quotes 380", `"` + strings.Repeat(`\"`, 189) + `"`, true},
		{"escaped quotes 382", `"` + strings.Repeat(`\"`, 190) + `"`, false},
		{"object 380", `{"data":` + q(strings.Repeat("x", 369)) + `}`, true},
		{"object 381", `{"data":` + q(strings.Repeat("x", 370)) + `}`, false},
		{"array 380", `[` + q(strings.Repeat("x", 376)) + `]`, true},
		{"array 381", `[` + q(strings.Repeat("x", 377)) + `]`, false},
		{"spaces do not count", `{ "data" : "x" }`, true},
		{"absent", ``, true},
		{"number", `5`, false},
		{"not json", `{`, false},
		{"trailing data", `"a" "b"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizeControlInput(json.RawMessage(tc.input))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err == nil && len(got) > ControlInputMaxBytes {
				t.Fatalf("accepted %d bytes", len(got))
			}
			if err != nil && err.(*Error).Code != CodeInvalidControl {
				t.Fatalf("code %s", err.(*Error).Code)
			}
		})
	}
}

func TestActionBoundary(t *testing.T) {
	tests := []struct {
		action string
		ok     bool
	}{
		{"pause", true},
		{"review.retry", true},
		{"a" + strings.Repeat("b", 63), true},
		{"a" + strings.Repeat("b", 64), false},
		{"Pause", false},
		{"1pause", false},
		{"pa use", false},
		{"pause.", false},
		{"", false},
		{"a_b-c.d_e", true},
	}
	for _, tc := range tests {
		if err := ValidateAction(tc.action); (err == nil) != tc.ok {
			t.Errorf("ValidateAction(%q) = %v, want ok=%v", tc.action, err, tc.ok)
		}
	}
	if err := ValidateAction(strings.Repeat("a", 65)); err == nil || err.Error() != "control.action exceeds 64 ASCII characters" {
		t.Errorf("65 chars: %v", err)
	}
}

func TestWireRecordBound(t *testing.T) {
	action := "a" + strings.Repeat("b", 63)
	input, _ := json.Marshal(strings.Repeat("x", 378))
	env, err := NewEnvelope(action, input)
	if err != nil {
		t.Fatal(err)
	}
	w := WireRecord("6f1c2d3e-0000-4000-8000-000000000000", env.Action, env.Input)
	if len(w) != 511 {
		t.Fatalf("largest wire record is %d bytes, want 511", len(w))
	}
	if w[len(w)-1] != '\n' || !strings.HasPrefix(string(w), `{"id":"6f1c2d3e-0000-4000-8000-000000000000","action":"`) {
		t.Fatalf("wire %q", w)
	}
	id, a, in, err := DecodeWireRecord(w[:len(w)-1])
	if err != nil || a != action || string(in) != string(input) || id == "" {
		t.Fatalf("round trip: %v", err)
	}
	if w := WireRecord("x", "pause", nil); string(w) != `{"id":"x","action":"pause"}`+"\n" {
		t.Fatalf("input omitted when absent: %q", w)
	}
	// HTML characters are not escaped, so the byte count is the real one.
	in2, _ := NormalizeControlInput(json.RawMessage(`"<&>"`))
	if string(in2) != `"<&>"` {
		t.Fatalf("canonical %s", in2)
	}
}

func TestTruncateError(t *testing.T) {
	for _, unit := range []string{"x", "é", "€", "𝄞"} {
		s := strings.Repeat(unit, 5000)
		got := TruncateError(s)
		if len(got) > 4096 || !utf8.ValidString(got) || !strings.HasSuffix(got, "… [truncated]") {
			t.Errorf("%q: %d bytes, valid=%v", unit, len(got), utf8.ValidString(got))
		}
		if len(got) < 4096-len("… [truncated]")-3 {
			t.Errorf("%q: kept only %d bytes", unit, len(got))
		}
	}
	if s := strings.Repeat("x", 4096); TruncateError(s) != s {
		t.Error("4096 bytes were cut")
	}
}

func TestDecodeTraceInput(t *testing.T) {
	tests := []struct {
		in   string
		want string // error message, "" when ok
	}{
		{`{"kind":"progress.update","summary":"ok","data":{"n":1},"level":"info","attention":"notify"}`, ""},
		{`[]`, "Trace event must be an object"},
		{`{"kind":"a","from":"x","to":"y"}`, "Trace event fields are removed: from, to"},
		{`{"kind":"a","id":"x","ts":"y"}`, "Unsupported Trace event fields: id, ts"},
		{`{"kind":"Bad"}`, "Trace event kind must be a lowercase semantic token"},
		{`{"kind":"runtime.trace_compacted"}`, "Trace event kind is runtime-reserved: runtime.trace_compacted"},
		{`{"kind":"a","summary":3}`, "Trace event summary must be a string"},
		{`{"kind":"a","level":"debug"}`, "Trace event level must be info, warning, or error"},
		{`{"kind":"a","attention":"loud"}`, "Trace event attention must be notify, followup, or steer"},
		{`{"kind":"a","attention":"steer"}`, ""},
		{`{"kind":"a","data":"` + strings.Repeat("x", 65536) + `"}`, "Trace event exceeds 65536 bytes"},
	}
	for _, tc := range tests {
		in, err := DecodeTraceInput([]byte(tc.in))
		if err == nil {
			_, err = NewTraceEvent(in, t0)
		}
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%.60s: %q, want %q", tc.in, got, tc.want)
		}
	}
	in, _ := DecodeTraceInput([]byte(`{"kind":"a","summary":"` + strings.Repeat("é", 1200) + `"}`))
	ev, err := NewTraceEvent(in, t0)
	if err != nil || utf8.RuneCountInString(ev.Summary) != 1000 {
		t.Fatalf("summary cut: %v %d", err, utf8.RuneCountInString(ev.Summary))
	}
}

func TestRedact(t *testing.T) {
	v := Redact(map[string]any{"api_key": "k", "password": "p", "accessToken": "t", "note": "Bearer abc.def token=xyz", "nested": []any{map[string]any{"client_secret": "s"}}, "tokens": "keep"})
	b, _ := json.Marshal(v)
	s := string(b)
	for _, leak := range []string{`"k"`, `"p"`, `"t"`, "abc.def", "xyz", `"s"`} {
		if strings.Contains(s, leak) {
			t.Errorf("leaked %s in %s", leak, s)
		}
	}
	if !strings.Contains(s, `"tokens":"keep"`) {
		t.Errorf("over-redacted: %s", s)
	}
}

func FuzzNewEnvelope(f *testing.F) {
	f.Add("pause", []byte(`{"reason":"operator"}`))
	f.Add("a.b", []byte(`"`+strings.Repeat("x", 378)+`"`))
	f.Add("Bad", []byte(`[1,2`))
	f.Add("volume", []byte(`{"percent":50}`))
	f.Fuzz(func(t *testing.T, action string, input []byte) {
		env, err := NewEnvelope(action, input)
		if err != nil {
			return
		}
		if len(env.Input) > ControlInputMaxBytes || len(env.Action) > ActionMaxLength {
			t.Fatalf("accepted an envelope over the bounds")
		}
		w := WireRecord(wirePlaceholderID, env.Action, env.Input)
		if len(w) > ControlWireMaxBytes {
			t.Fatalf("wire record of %d bytes admitted", len(w))
		}
		if _, a, _, err := DecodeWireRecord(w[:len(w)-1]); err != nil || a != env.Action {
			t.Fatalf("wire record does not round-trip: %v", err)
		}
	})
}

func FuzzDecodeWireRecord(f *testing.F) {
	f.Add([]byte(`{"id":"x","action":"pause","input":{"a":1}}`))
	f.Add([]byte(`{"id":"","action":"pause"}`))
	f.Add([]byte(`{"id":"x","action":"pause","extra":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		_, _, _, _ = DecodeWireRecord(line)
	})
}

func FuzzTraceEvent(f *testing.F) {
	f.Add([]byte(`{"kind":"progress.update","summary":"ok","data":{"n":1},"level":"info","attention":"notify"}`))
	f.Add([]byte(`{"kind":"a","from":"x"}`))
	f.Add([]byte(`{"kind":"a","data":[1,{"b":null}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := DecodeTraceInput(raw)
		if err != nil {
			return
		}
		ev, err := NewTraceEvent(in, t0)
		if err != nil {
			return
		}
		if !recipe.IsToken(ev.Kind) || !utf8.ValidString(ev.Summary) || utf8.RuneCountInString(ev.Summary) > TraceSummaryMaxChars {
			t.Fatalf("accepted an invalid event %+v", ev)
		}
	})
}

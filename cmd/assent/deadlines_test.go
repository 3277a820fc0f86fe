package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDecisionDeadlines(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]time.Duration
		err  string
	}{
		{"", map[string]time.Duration{}, ""},
		{"command=1h", map[string]time.Duration{"command": time.Hour}, ""},
		{" command = 90m , proposal=3d ", map[string]time.Duration{"command": 90 * time.Minute, "proposal": 72 * time.Hour}, ""},
		{"proposal=30d", map[string]time.Duration{"proposal": 30 * 24 * time.Hour}, ""},
		{"command", nil, "not KIND=DURATION"},
		{"command=", nil, "not KIND=DURATION"},
		{"program=1h", nil, "unknown kind"},
		{"command=1h,command=2h", nil, "given twice"},
		{"command=soon", nil, "not a duration"},
		{"command=-1h", nil, "not between"},
		{"command=500ms", nil, "not between"},
		{"proposal=31d", nil, "not between"},
		{"command=1h,", nil, "not KIND=DURATION"},
	} {
		got, err := parseDecisionDeadlines(c.in)
		if c.err != "" {
			var ee *exitError
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "bad_decision_deadline") || !errors.As(err, &ee) {
				t.Errorf("%q: %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%q = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%q: %s = %v, want %v", c.in, k, got[k], v)
			}
		}
	}
}

// FuzzParseDecisionDeadlines checks that any --decision-deadline either
// is refused with bad_decision_deadline or gives known kinds only, each
// between 1s and 30 days.
func FuzzParseDecisionDeadlines(f *testing.F) {
	for _, s := range []string{"", "command=1h", "command=1h,proposal=24h", "proposal=3d", "x=1", "command=1h,command=1h", "command=99999999d", "=,=", "command=1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseDecisionDeadlines(s)
		if err != nil {
			if !strings.Contains(err.Error(), "bad_decision_deadline") {
				t.Fatalf("%q: error without its code: %v", s, err)
			}
			return
		}
		for k, d := range got {
			if _, ok := decisionKinds[k]; !ok || d < minDecisionDeadline || d > maxDecisionDeadline {
				t.Fatalf("%q: accepted %s=%v", s, k, d)
			}
		}
	})
}

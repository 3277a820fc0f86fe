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
		{"runs=1h", nil, "unknown kind"},
		{"program=24h", map[string]time.Duration{"program": 24 * time.Hour}, ""},
		{"question=4h", map[string]time.Duration{"question": 4 * time.Hour}, ""},
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

func TestParseRemindBefore(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []time.Duration
		err  string
	}{
		{"", nil, ""},
		{"1h,10m", []time.Duration{time.Hour, 10 * time.Minute}, ""},
		{" 1d , 30s ", []time.Duration{24 * time.Hour, 30 * time.Second}, ""},
		{"1h,60m", nil, "given twice"},
		{"soon", nil, "not a duration"},
		{"0s", nil, "not between"},
		{"31d", nil, "not between"},
		{"1h,", nil, "not a duration"},
		{"1s,2s,3s,4s,5s,6s,7s,8s,9s,10s,11s", nil, "at most 10"},
	} {
		got, err := parseRemindBefore(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "bad_remind_before") {
				t.Errorf("%q: %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%q = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q = %v, want %v", c.in, got, c.want)
			}
		}
	}
}

// FuzzParseRemindBefore checks that any --remind-before is refused with
// bad_remind_before or gives at most 10 distinct points, each between 1s
// and 30 days.
func FuzzParseRemindBefore(f *testing.F) {
	for _, s := range []string{"", "1h,10m", "1d", "1h,1h", "x", "1s,2s,3s,4s,5s,6s,7s,8s,9s,10s,11s", "-5m", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseRemindBefore(s)
		if err != nil {
			if !strings.Contains(err.Error(), "bad_remind_before") {
				t.Fatalf("%q: error without its code: %v", s, err)
			}
			return
		}
		if len(got) > maxReminders {
			t.Fatalf("%q: %d points", s, len(got))
		}
		seen := map[time.Duration]bool{}
		for _, d := range got {
			if d < minDecisionDeadline || d > maxDecisionDeadline || seen[d] {
				t.Fatalf("%q: accepted %v", s, got)
			}
			seen[d] = true
		}
	})
}

package store_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func bound(f float64) *float64 { return &f }

func TestRuleAllows(t *testing.T) {
	vals := store.Rule{Values: []json.RawMessage{json.RawMessage(`"pro"`), json.RawMessage(`{"a":1,"b":2}`), json.RawMessage(`3`)}}
	rng := store.Rule{Min: bound(10), Max: bound(20)}
	above := store.Rule{Min: bound(10)}
	for _, c := range []struct {
		name string
		r    store.Rule
		v    string
		want bool
	}{
		{"listed string", vals, `"pro"`, true},
		{"unlisted string", vals, `"team"`, false},
		{"object in another key order", vals, `{"b":2,"a":1}`, true},
		{"number as listed", vals, `3.0`, true},
		{"string of a listed number", vals, `"3"`, false},
		{"null", vals, `null`, false},
		{"inside the range", rng, `15`, true},
		{"on the lower bound", rng, `10`, true},
		{"on the upper bound", rng, `20`, true},
		{"below", rng, `9.999`, false},
		{"above", rng, `20.5`, false},
		{"a numeric string is not a number", rng, `"15"`, false},
		{"open above", above, `1e300`, true},
		{"open above, below", above, `-1`, false},
		{"not JSON", rng, `1 2`, false},
	} {
		if got := c.r.Allows(json.RawMessage(c.v)); got != c.want {
			t.Errorf("%s: Allows(%s) = %v, want %v", c.name, c.v, got, c.want)
		}
	}
}

func TestRuleLive(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := store.Rule{Until: now.Add(time.Minute)}
	if !r.Live(now) || r.Live(now.Add(time.Minute)) {
		t.Error("a rule is live until, and not at, its Until")
	}
	r.RevokedAt = now
	if r.Live(now) {
		t.Error("a revoked rule is live")
	}
}

// FuzzRule checks that any stored bounds and any staged value neither
// panic nor let through a value outside them: a rule that passes Check
// allows a number only within its range, and a listed value only when it
// equals one listed.
func FuzzRule(f *testing.F) {
	f.Add(`["pro","team"]`, 0.0, 0.0, false, `"pro"`)
	f.Add(``, 1.0, 5.0, true, `3`)
	f.Add(``, 5.0, 1.0, true, `3`)
	f.Add(`[{"a":[1,2]},null]`, 0.0, 0.0, false, `{"a":[1,2.0]}`)
	f.Add(``, math.Inf(-1), 1.0, true, `-1e999`)
	f.Fuzz(func(t *testing.T, values string, lo, hi float64, ranged bool, v string) {
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		r := store.Rule{ID: "r", CreatedBy: "p", AgentID: "a", FormID: "f", ControlID: "c", CreatedAt: now, Until: now.Add(time.Hour)}
		if ranged {
			r.Min, r.Max = &lo, &hi
		} else if json.Unmarshal([]byte(values), &r.Values) != nil {
			return
		}
		if r.Check() != nil {
			return
		}
		if !r.Allows(json.RawMessage(v)) {
			return
		}
		if ranged {
			var n float64
			if err := json.Unmarshal([]byte(v), &n); err != nil || n < lo || n > hi {
				t.Fatalf("%s allowed outside [%v, %v]", v, lo, hi)
			}
		}
	})
}

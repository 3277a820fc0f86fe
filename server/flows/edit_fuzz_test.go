package flows

import (
	"encoding/json"
	"strconv"
	"testing"
)

// FuzzEditedValues: whatever JSON a person sends as an edited value, it
// is read without panicking, and an accepted one is a string as it is, a
// number as written, or true/false.
func FuzzEditedValues(f *testing.F) {
	for _, seed := range []string{`"1200.00"`, `1200`, `-3.5e2`, `true`, `false`, `null`, `{"v":1}`, `[1]`, `"\u202e"`, ` 7 `, `01`, `1e999`, `"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := editedValues(map[string]json.RawMessage{"amount": raw})
		if err != nil {
			return
		}
		v := got["amount"]
		var s string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			if v != s {
				t.Fatalf("string %s read as %q", raw, v)
			}
		case v == "true" || v == "false":
		default:
			if _, err := strconv.ParseFloat(v, 64); err != nil && !json.Valid([]byte(v)) {
				t.Fatalf("%s accepted as %q, which is no number", raw, v)
			}
		}
	})
}

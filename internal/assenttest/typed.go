package assenttest

import (
	"encoding/json"
	"testing"
)

// As reads an answer already decoded from JSON (a tool's structured
// content, an API body read as a map) as T, the type the server writes it
// from. A test then reads fields by name, and a field the server renames
// breaks the build or the decode instead of reading as nil.
func As[T any](t testing.TB, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("the answer does not read as %T: %v: %v", out, err, v)
	}
	return out
}

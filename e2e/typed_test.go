package e2e

import (
	"encoding/json"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/server/wire"
)

// as reads an answer decoded as JSON (a tool's structured content or an
// API body) as T, the type the server writes it from, so a test reads the
// fields by name and a renamed field fails to compile rather than reading
// as nil.
func as[T any](t testing.TB, v any) T {
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

// prescriptionID returns the id of the prescription of a prescribe
// answer, or "" when the decision prescribed nothing.
func prescriptionID(t testing.TB, v any) string {
	t.Helper()
	if p := as[api.Prescription](t, v); p.Decision.Prescription != nil {
		return p.Decision.Prescription.ID
	}
	return ""
}

// errorCode returns the code of an error answer, or "" when v is none.
func errorCode(t testing.TB, v any) wire.Code {
	t.Helper()
	if b := as[wire.Body](t, v); b.Error != nil {
		return b.Error.Code
	}
	return ""
}

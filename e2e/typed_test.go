package e2e

import (
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/wire"
)

// prescriptionID returns the id of the prescription of a prescribe
// answer, or "" when the decision prescribed nothing.
func prescriptionID(t testing.TB, v any) string {
	t.Helper()
	if p := assenttest.As[api.Prescription](t, v); p.Decision.Prescription != nil {
		return p.Decision.Prescription.ID
	}
	return ""
}

// errorCode returns the code of an error answer, or "" when v is none.
func errorCode(t testing.TB, v any) wire.Code {
	t.Helper()
	if b := assenttest.As[wire.Body](t, v); b.Error != nil {
		return b.Error.Code
	}
	return ""
}

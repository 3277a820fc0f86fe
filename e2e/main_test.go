package e2e

import (
	"os"
	"testing"

	"github.com/assent-run/assent/run"
)

// TestMain lets the test binary serve as a Run's init, as the assent
// binary does, so the servers the tests start give their Runs namespaces
// of their own.
func TestMain(m *testing.M) {
	run.Init()
	os.Exit(m.Run())
}

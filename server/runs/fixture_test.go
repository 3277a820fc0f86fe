package runs_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a running server (see package assenttest).
type fixture struct{ *assenttest.Kit }

func newFixture(t *testing.T, mod func(*server.Config)) *fixture {
	t.Helper()
	return &fixture{assenttest.Start(t, mod)}
}

// newRunsFixture is a server whose BaseURL is its real address, so the
// Runs it starts can call back.
func newRunsFixture(t *testing.T) *fixture {
	t.Helper()
	return &fixture{assenttest.StartListening(t, func(c *server.Config) { c.RateLimit = -1 })}
}

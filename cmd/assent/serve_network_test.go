package main

import (
	"strings"
	"testing"
)

// serve refuses a --run-network it does not know before it opens the
// store or listens, and its help names both choices.
func TestServeRunNetworkFlag(t *testing.T) {
	for _, bad := range []string{"none", "Isolated", ""} {
		code, _, errs := runCLI(t, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--run-network", bad)
		if code == 0 || !strings.Contains(errs, "bad_run_network") {
			t.Errorf("--run-network %q: exit %d, stderr %q; want bad_run_network", bad, code, errs)
		}
	}
	_, out, _ := runCLI(t, "serve", "--help")
	for _, want := range []string{"--run-network", "isolated", "host", "http://127.0.0.1:7410"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
}

package e2e

import (
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// The attacker's Run connects to the machine's ports (the server's own
// listener, a service the test opened on 127.0.0.1) to reach what the
// server reaches: in a network of its own it is refused, and reaches the
// server only at its ASSENT_URL, with its run token. With --run-network
// host it reaches both.
func TestBoundaryRunNetwork(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the probe needs curl")
	}
	for _, tc := range []struct {
		network      string
		reachOutside bool
	}{
		{run.NetworkIsolated, false},
		{run.NetworkHost, true},
	} {
		t.Run(tc.network, func(t *testing.T) {
			outside, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer outside.Close()
			var reached atomic.Int32
			go func() {
				for {
					c, err := outside.Accept()
					if err != nil {
						return
					}
					reached.Add(1)
					c.Close()
				}
			}()
			a := newAppIn(t, t.TempDir(), false, func(c *server.Config) { c.RunNetwork = tc.network })
			if ok, why := a.Srv.Runs().Manager().Isolated(); !ok && tc.network == run.NetworkIsolated {
				t.Skipf("Runs are not isolated here: %s", why)
			}
			if got := a.Srv.Runs().Manager().RunNetwork(); got != tc.network {
				t.Skipf("Runs get network %s here, not %s", got, tc.network)
			}
			rt := runsTarget{url: a.HTTP.URL, dir: a.Dir, attacker: a.issue(store.KindAgent, "attacker", "command.execute")}
			script := strings.Join([]string{
				`curl -sS --max-time 10 ` + rt.url + `/v1/health; echo " server-rc=$?"`,
				`curl -sS --max-time 10 http://` + outside.Addr().String() + `/; echo " outside-rc=$?"`,
				`curl -sS --max-time 10 -H "Authorization: Bearer $ASSENT_RUN_TOKEN" "$ASSENT_URL/v1/runs/$ASSENT_RUN_ID"; echo " api-rc=$?"`,
			}, "\n")
			v, out := rt.spawnAndWait(t, rt.attacker, "netprobe", script)
			if v["status"] != "done" {
				t.Fatalf("the probe ended %v:\n%s", v["status"], out)
			}
			refused := strings.Contains(out, "server-rc=7") && strings.Contains(out, "outside-rc=7") && reached.Load() == 0
			if refused == tc.reachOutside {
				t.Errorf("network %s: the Run reached the server's listener or the port outside: %v, want %v (%d connections arrived):\n%s", tc.network, !refused, tc.reachOutside, reached.Load(), out)
			}
			if !strings.Contains(out, "api-rc=0") || !strings.Contains(out, `"netprobe"`) {
				t.Errorf("network %s: the Run could not read its own status at ASSENT_URL with its token:\n%s", tc.network, out)
			}
		})
	}
}

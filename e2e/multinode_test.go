package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// multiLeaseTTL is the lease time of the nodes of TestMultiNode: short, so
// a dead node's Runs are found lost quickly.
const multiLeaseTTL = 3 * time.Second

// startNode starts `assent serve` as node name on its own data directory
// and the shared store.
func startNode(t *testing.T, exe, storeURL, name string) *serveProc {
	t.Helper()
	t.Setenv("ASSENT_NODE", name)
	t.Setenv("ASSENT_LEASE_TTL", multiLeaseTTL.String())
	return startServe(t, exe, t.TempDir(), storeURL)
}

// TestMultiNode runs three `assent serve` processes on one PostgreSQL
// database and checks that they behave as one assent: events cross nodes
// with one numbering, a Run outlives its node's death as lost (or
// restarted), and the Control journal's bound holds across nodes.
func TestMultiNode(t *testing.T) {
	cl := startCluster(t)
	a, b, c, tok := cl.a, cl.b, cl.c, cl.token
	t.Run("events", func(t *testing.T) { multiNodeEvents(t, a, b, c, tok) })
	t.Run("backpressure", func(t *testing.T) { multiNodeBackpressure(t, []*serveProc{a, b, c}, tok) })
	t.Run("lost", func(t *testing.T) { multiNodeLost(t, a, b, tok) })
}

// cluster is three `assent serve` processes on one new PostgreSQL
// database, started from one build.
type cluster struct {
	exe, store string
	a, b, c    *serveProc
	// token is the agent token node A printed when it bootstrapped the
	// store.
	token string
}

// startCluster starts nodes node-a, node-b and node-c on a new database;
// the test is skipped without PostgreSQL.
func startCluster(t *testing.T) cluster {
	t.Helper()
	u, _ := pgtest.URL(t)
	exe := buildAssent(t)
	// The first start bootstraps the store and prints the agent token.
	cl := cluster{exe: exe, store: u, a: startNode(t, exe, u, "node-a")}
	cl.b, cl.c = startNode(t, exe, u, "node-b"), startNode(t, exe, u, "node-c")
	if cl.token = cl.a.token; cl.token == "" {
		t.Fatal("the first node printed no agent token")
	}
	return cl
}

// sse is a subscription to /v1/events.
type sse struct {
	resp   *http.Response
	events chan sseEvent
}

type sseEvent struct {
	id        int64
	typ, data string
}

// subscribe opens /v1/events on p, resuming after lastID when it is not
// negative.
func subscribe(t *testing.T, p *serveProc, tok string, lastID int64) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /v1/events: %v %v", resp, err)
	}
	s := &sse{resp: resp, events: make(chan sseEvent, 1024)}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				e.id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				e.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case line == "" && e.typ != "":
				s.events <- e
				e = sseEvent{}
			}
		}
	}()
	return s
}

// next returns the first event for which match holds.
func (s *sse) next(t *testing.T, what string, match func(sseEvent) bool) sseEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				t.Fatalf("the event stream ended before %s", what)
			}
			if match(e) {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s within 20s", what)
		}
	}
}

func multiNodeEvents(t *testing.T, a, b, c *serveProc, tok string) {
	sub := subscribe(t, c, tok, -1)
	stage := func(p *serveProc, control, value string) {
		t.Helper()
		if code, _, raw := p.api(t, "POST", "/v1/controls/execute", tok, nil, map[string]any{"action": "stage",
			"identity": map[string]any{"formId": "profile", "controlId": control}, "value": value}); code != http.StatusOK {
			t.Fatalf("stage %s on %s: %d %s", control, p.base, code, raw)
		}
	}
	staged := func(value string) func(sseEvent) bool {
		return func(e sseEvent) bool {
			return e.typ == "control.command" && strings.Contains(e.data, value) && strings.Contains(e.data, `"stage"`)
		}
	}
	// The agent stages on node A, then on node B; node C's subscriber
	// receives both, numbered in that order.
	stage(a, "email", "ada@nodes.example")
	first := sub.next(t, "node A's stage event on node C", staged("ada@nodes.example"))
	stage(b, "displayName", "Ada of Nodes")
	second := sub.next(t, "node B's stage event on node C", staged("Ada of Nodes"))
	if second.id <= first.id {
		t.Errorf("node B's event seq %d on node C does not follow node A's %d", second.id, first.id)
	}
	// The subscriber reconnects to node A after the first event and
	// receives the second again, with the same number.
	resumed := subscribe(t, a, tok, first.id)
	again := resumed.next(t, "node B's event on node A after Last-Event-ID", staged("Ada of Nodes"))
	if again.id != second.id || again.data != second.data {
		t.Errorf("on node A after Last-Event-ID %d: event %d %s; node C gave %d %s", first.id, again.id, again.data, second.id, second.data)
	}

	t.Run("apply_on_other_node", func(t *testing.T) {
		// The person applies on node B what the agent staged on node A.
		who := b.signIn(t)
		// Node B reads the control again when node A's event reaches it.
		var rev float64
		testwait.EventuallyC(t, 5*time.Second, func(c *testwait.C) {
			_, snap, raw := b.api(t, "GET", "/v1/controls/profile/email", tok, nil, nil)
			st, _ := snap["state"].(map[string]any)
			pr, _ := st["staged"].(map[string]any)
			var ok bool
			if rev, ok = pr["revision"].(float64); !ok {
				c.Errorf("%s", raw)
			}
		}, "node B seeing the proposal staged on node A")
		if code, res, raw := b.api(t, "POST", "/web/controls/apply", "", &who, url.Values{"csrf": {who.csrf}, "formId": {"profile"}, "controlId": {"email"},
			"revision": {strconv.FormatInt(int64(rev), 10)}}); code != http.StatusOK || res["ok"] != true {
			t.Fatalf("apply on node B: %d %s", code, raw)
		}
		applied := sub.next(t, "the apply event on node C", func(e sseEvent) bool { return e.typ == "control.command" && strings.Contains(e.data, `"apply"`) })
		if applied.id <= second.id {
			t.Errorf("apply event seq %d on node C does not follow %d", applied.id, second.id)
		}
	})
}

// spawnOn starts a Run on p from an inline template, declaring controls.
func spawnOn(t *testing.T, p *serveProc, tok string, body map[string]any) map[string]any {
	t.Helper()
	code, v, raw := p.api(t, "POST", "/v1/runs", tok, nil, body)
	if code/100 != 2 || v["status"] != "running" {
		t.Fatalf("spawn on %s: %d %s", p.base, code, raw)
	}
	return v
}

func multiNodeBackpressure(t *testing.T, nodes []*serveProc, tok string) {
	// The service holds its FIFO open and never reads it: every admitted
	// Control stays pending.
	writeRecipe(t, nodes[0], "holder", `{"template":"exec 3<>\"$ASSENT_CONTROL_FIFO\"; exec sleep 300","control":["poke"]}`)
	v := spawnOn(t, nodes[0], tok, map[string]any{"recipe": "holder", "run_id": "bp"})
	killRunProcess(t, v)

	const admitters = 76
	var wg sync.WaitGroup
	codes := make([]string, admitters)
	for i := range admitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := nodes[i%len(nodes)]
			code, res, raw := p.api(t, "POST", "/v1/runs/bp/controls", tok, nil, map[string]any{"action": "poke", "input": map[string]any{"n": i}})
			switch {
			case code == http.StatusOK:
				codes[i] = "admitted"
			default:
				e, _ := res["error"].(map[string]any)
				c, _ := e["code"].(string)
				if c == "" {
					c = fmt.Sprintf("%d %s", code, raw)
				}
				codes[i] = c
			}
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for _, c := range codes {
		count[c]++
	}
	if count["admitted"] != 64 || count["control_backpressure"] != 12 || len(count) != 2 {
		t.Errorf("76 admitters over 3 nodes: %v; want 64 admitted and 12 control_backpressure", count)
	}
}

// killRunProcess kills the Run's process group when the test ends: Runs
// outlive the nodes that started them.
func killRunProcess(t *testing.T, v map[string]any) {
	t.Helper()
	if pid, _ := v["pid"].(float64); pid > 0 {
		t.Cleanup(func() { _ = syscall.Kill(-int(pid), syscall.SIGKILL) })
	}
}

// writeRecipe writes a Recipe into the node's data directory.
func writeRecipe(t *testing.T, p *serveProc, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.dataDir(t), "recipes", name+".json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dataDir is the --data argument p was started with.
func (p *serveProc) dataDir(t *testing.T) string {
	t.Helper()
	for i, a := range p.cmd.Args {
		if a == "--data" && i+1 < len(p.cmd.Args) {
			return p.cmd.Args[i+1]
		}
	}
	t.Fatal("no --data argument")
	return ""
}

// multiNodeLost kills node A, which supervises two Runs, with SIGKILL:
// within the lease time another node reports the one lost and restarts
// the other, whose Recipe asks for it.
func multiNodeLost(t *testing.T, a, b *serveProc, tok string) {
	writeRecipe(t, a, "plain", `{"template":"exec sleep 300"}`)
	writeRecipe(t, a, "phoenix", `{"template":"exec sleep 300","restart":"on_lost"}`)
	for _, id := range []string{"plain", "phoenix"} {
		v := spawnOn(t, a, tok, map[string]any{"recipe": id, "run_id": id})
		killRunProcess(t, v)
		if v["node"] != "node-a" {
			t.Errorf("Run %s started on node A names node %v", id, v["node"])
		}
	}
	// Node B sees node A's Runs running.
	if _, v, raw := b.api(t, "GET", "/v1/runs/plain", tok, nil, nil); v["status"] != "running" {
		t.Fatalf("node B before the kill: %s", raw)
	}
	a.kill()
	killed := time.Now()

	// Lost within the lease time, plus one round of the keepers and slack
	// for a loaded machine.
	var plain, phoenix map[string]any
	testwait.EventuallyC(t, time.Until(killed.Add(multiLeaseTTL+multiLeaseTTL/3+10*time.Second)), func(c *testwait.C) {
		_, plain, _ = b.api(t, "GET", "/v1/runs/plain", tok, nil, nil)
		_, phoenix, _ = b.api(t, "GET", "/v1/runs/phoenix", tok, nil, nil)
		if plain["status"] != "lost" || phoenix["generation"] != float64(2) {
			c.Errorf("%s after node A was killed: plain %v, phoenix %v", time.Since(killed), plain, phoenix)
		}
	}, "plain lost and phoenix restarted")
	t.Logf("lost and restarted %s after node A was killed (lease time %s)", time.Since(killed).Round(time.Millisecond), multiLeaseTTL)
	lost, _ := plain["lost"].(map[string]any)
	if lost["node"] != "node-a" || (lost["detected_by"] != "node-b" && lost["detected_by"] != "node-c") || plain["ended_at"] == nil {
		t.Errorf("lost Run = %v; want lost by node-a, found by node B or C, ended", plain)
	}
	if phoenix["status"] != "running" || phoenix["node"] == "node-a" || phoenix["node"] == nil {
		t.Errorf("restarted Run = %v; want its second generation running on node B or C", phoenix)
	}
	killRunProcess(t, phoenix)
}

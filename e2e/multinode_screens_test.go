package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

// TestMultiNodeScreens runs three `assent serve` processes on one
// PostgreSQL database and checks that a screen is one screen on all of
// them: shown through node A, it is served by node B (API and page)
// without a restart; updated through node A, node B serves the new
// version and a follower of its live feed on node C receives the update;
// and a press waiting for confirmation, answered on nodes B and C at the
// same moment, is decided exactly once.
func TestMultiNodeScreens(t *testing.T) {
	cl := startCluster(t)
	a, b, c := cl.a, cl.b, cl.c
	svc := serviceToken(t, cl.exe, cl.store)

	stream := "root = Card([title, status, amount, pay])\ntitle = Heading(\"Across nodes\")\n$s = \"open\"\nstatus = Text($s)\n" +
		"$amount = 42\namount = Text($amount)\npay = Button(\"Pay\", action=\"pay\")\n" +
		"payIt = McpMutation(pay, tool=\"payments.confirm\", params={amount: $amount})\n"
	code, shown, raw := a.api(t, "POST", "/v1/screens", svc, nil, stream)
	id, _ := shown["id"].(string)
	if code != http.StatusCreated || id == "" {
		t.Fatalf("show on node A: %d %s", code, raw)
	}

	// Node B serves the screen at once, through the API and as a page.
	code, got, raw := b.api(t, "GET", "/v1/screens/"+id, svc, nil, nil)
	if code != http.StatusOK || got["id"] != id || !strings.Contains(got["outline"].(string), "Across nodes") {
		t.Fatalf("GET the screen on node B: %d %s", code, raw)
	}
	whoB := b.signIn(t)
	if page := b.page(t, whoB, "/screens/"+id); !strings.Contains(page, "Across nodes") || !strings.Contains(page, "open") {
		t.Errorf("the page on node B lacks the screen")
	}

	// A follower of the live feed on node C, opened before the update.
	live := followLive(t, c, svc, id)

	// The application updates the screen through node A.
	if code, res, raw := a.api(t, "POST", "/v1/screens/"+id+"/updates", svc, nil, `$s = "paid"`); code != http.StatusOK || res["applied"] != true {
		t.Fatalf("update on node A: %d %s", code, raw)
	}
	if u := live.next(t); u.Seq != 1 || u.Text != `$s = "paid"` {
		t.Errorf("the follower on node C received %+v, want seq 1 with the update", u)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		_, got, _ := b.api(t, "GET", "/v1/screens/"+id, svc, nil, nil)
		outline, _ := got["outline"].(string)
		return strings.Contains(outline, "paid")
	}, "node B serving the update")
	if page := b.page(t, whoB, "/screens/"+id); !strings.Contains(page, "paid") {
		t.Errorf("the page on node B does not show the update")
	}

	// The person presses Pay on node A; the press waits for their
	// confirmation, which they give on nodes B and C at the same moment.
	const rounds = 3
	people := []person{whoB, c.signIn(t)}
	whoA := a.signIn(t)
	for round := range rounds {
		_, press, raw := a.api(t, "POST", "/screens/"+id+"/press", "", &whoA, `{"button":"pay"}`)
		pressID, _ := press["press"].(string)
		if press["status"] != "confirm" || pressID == "" {
			t.Fatalf("round %d: press on node A: %s", round, raw)
		}
		var wg sync.WaitGroup
		codes := make([]int, 2)
		answers := make([]map[string]any, 2)
		for i, p := range []*serveProc{b, c} {
			wg.Go(func() {
				who := people[i]
				codes[i], answers[i], _ = p.api(t, "POST", "/screens/"+id+"/confirm", "", &who, `{"press":"`+pressID+`"}`)
			})
		}
		wg.Wait()
		done, gone := 0, 0
		for i := range answers {
			switch {
			case codes[i] == http.StatusOK && answers[i]["status"] == "done":
				done++
			case codes[i] == http.StatusNotFound:
				gone++
			default:
				t.Errorf("round %d: node %d answered %d %v", round, i, codes[i], answers[i])
			}
		}
		if done != 1 || gone != 1 {
			t.Fatalf("round %d: %d confirmations ran and %d found the press gone; want exactly one of each", round, done, gone)
		}
		// Node A no longer offers the decided press.
		if code, _, raw := a.api(t, "POST", "/screens/"+id+"/confirm", "", &whoA, `{"press":"`+pressID+`"}`); code != http.StatusNotFound {
			t.Errorf("round %d: a third answer on node A: %d %s", round, code, raw)
		}
	}
}

// screenFeed is a follower of a screen's /api/live feed.
type screenFeed struct {
	updates chan liveFrame
}

type liveFrame struct {
	Seq  int64  `json:"seq"`
	Text string `json:"text"`
}

// followLive opens the live feed of screen id on p from the start.
func followLive(t *testing.T, p *serveProc, tok, id string) *screenFeed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/api/live?screen="+id+"&after=0", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /api/live on %s: %v %v", p.base, resp, err)
	}
	f := &screenFeed{updates: make(chan liveFrame, 16)}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "update":
				var u liveFrame
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &u) == nil {
					f.updates <- u
				}
			}
		}
	}()
	return f
}

// next returns the next update, failing t after ten seconds.
func (f *screenFeed) next(t *testing.T) liveFrame {
	t.Helper()
	select {
	case u := <-f.updates:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no live update within ten seconds")
		return liveFrame{}
	}
}

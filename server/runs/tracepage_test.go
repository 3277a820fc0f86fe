package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/assent-run/assent/run"
)

// TestRunPageTraceIsPaged: a Run's page shows its Trace oldest first, a
// page of 50 at a time numbered by position, with links to the older and
// newer pages; the newest page is the default.
func TestRunPageTraceIsPaged(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cookie, _ := f.SignIn()
	v, err := f.Srv.Runs().Manager().Spawn(ctx, f.Boot.Agent.ID, run.SpawnRequest{Template: json.RawMessage(`"exec sleep 300"`), RunID: "chatty"})
	if err != nil {
		t.Fatal(err)
	}
	f.killAtEnd(f.Boot.Agent.ID, "chatty")
	for i := 1; i <= 120; i++ {
		if _, err := f.Srv.Runs().Manager().AppendTrace(ctx, f.Boot.Agent.ID, "chatty", v.InstanceID, run.TraceInput{Kind: "work.step", Summary: fmt.Sprintf("step %03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	item := regexp.MustCompile(`<li class="level-[a-z]*" value="(\d+)">.*?</code> (.*?)</li>`)
	type page struct {
		first, last, n int
		firstText      string
		lastText       string
		older, newer   string
	}
	read := func(path string) page {
		t.Helper()
		body := webBody(f.Get(path, cookie))
		ms := item.FindAllStringSubmatch(body, -1)
		if len(ms) == 0 {
			t.Fatalf("%s shows no Trace:\n%s", path, body)
		}
		var p page
		fmt.Sscan(ms[0][1], &p.first)
		fmt.Sscan(ms[len(ms)-1][1], &p.last)
		p.n, p.firstText, p.lastText = len(ms), ms[0][2], ms[len(ms)-1][2]
		if m := regexp.MustCompile(`href="([^"]*)" id="trace-older"`).FindStringSubmatch(body); m != nil {
			p.older = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		if m := regexp.MustCompile(`href="([^"]*)" id="trace-newer"`).FindStringSubmatch(body); m != nil {
			p.newer = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		return p
	}
	newest := read("/runs/chatty")
	// The Trace holds the start event and the 120 steps: 121 events.
	if newest.n != 50 || newest.last != 121 || newest.first != 72 || newest.lastText != "step 120" || newest.newer != "" || newest.older == "" {
		t.Fatalf("newest page: %+v", newest)
	}
	middle := read(newest.older)
	if middle.n != 50 || middle.first != 22 || middle.last != 71 || middle.lastText != "step 070" || middle.older == "" || middle.newer == "" {
		t.Fatalf("middle page: %+v", middle)
	}
	oldest := read(middle.older)
	if oldest.first != 1 || oldest.last != 21 || oldest.older != "" || oldest.newer == "" {
		t.Fatalf("oldest page: %+v", oldest)
	}
	if back := read(oldest.newer); back != middle {
		t.Fatalf("newer from the oldest page: %+v, want %+v", back, middle)
	}
	// The live refresh of an older page keeps it.
	if body := webBody(f.Get(middle.older, cookie)); !strings.Contains(body, `data-refresh="/runs/chatty?partial=1&amp;before=22"`) {
		t.Fatalf("the oldest page's refresh loses its place")
	}
	// Bad bounds show the newest page.
	for _, q := range []string{"?before=0", "?before=-5", "?before=9999", "?before=x"} {
		if p := read("/runs/chatty" + q); p != newest {
			t.Errorf("%s: %+v", q, p)
		}
	}
}

package screens

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

// node is one screens part of a test cluster.
type node struct {
	*Part
	host *host.Host
}

// twoNodes builds two screens parts on one store, sharing one event bus
// as nodes on one PostgreSQL share its event log, and the store's agent.
func twoNodes(t *testing.T) (a, b node, agent store.Principal) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var shared *host.Host
	build := func() node {
		h, err := host.NewHost(host.Config{DataDir: t.TempDir(), Store: db})
		if err != nil {
			t.Fatal(err)
		}
		own := h.Bus
		if shared != nil {
			h.Bus = shared.Bus
		}
		h.SharedBus = true
		ctl, err := controls.New(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(ctx, h, ctl)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Close()
			ctl.Close()
			h.Bus = own
			h.Close()
		})
		return node{p, h}
	}
	a = build()
	shared = a.host
	b = build()
	return a, b, boot.Agent
}

// eventually waits, up to a bound that only a failure reaches, until cond
// holds, waking at every change of sc.
func eventually(t *testing.T, sc *liveScreen, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		sc.mu.RLock()
		changed := sc.changed
		sc.mu.RUnlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: not seen on the other node", what)
		}
	}
}

// stateOf returns the value of $key on sc.
func stateOf(sc *liveScreen, key string) any {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	v, _ := sc.doc.State(key)
	return v
}

const nodesStream = "root = Card([status, note])\n$s = \"open\"\nstatus = Text($s)\n$note = \"\"\nnote = Input($note, label=\"Note\")\n"

func TestScreenLoadedOnMiss(t *testing.T) {
	a, b, agent := twoNodes(t)
	ctx := context.Background()
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		id   string
		want bool
	}{
		{"shown on the other node", id, true},
		{"unknown", "scr_none", false},
		{"empty id", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, ok := b.screenFor(agent, tc.id)
			if ok != tc.want {
				t.Fatalf("screenFor(%q) on B = %v, want %v", tc.id, ok, tc.want)
			}
			if !ok {
				return
			}
			want, _ := a.screenFor(agent, tc.id)
			if got, exp := sc.summary(), want.summary(); got.Outline != exp.Outline || got.Components != exp.Components || !got.Ended {
				t.Errorf("B shows %+v, A %+v", got, exp)
			}
			if again, _ := b.screenFor(agent, tc.id); again != sc {
				t.Error("B read the screen again instead of holding it")
			}
		})
	}
	if got := b.visibleScreens(agent); len(got) != 1 || got[0].id != id {
		t.Errorf("B lists %d screens, want the one shown on A", len(got))
	}
}

func TestScreenFollowsOtherNode(t *testing.T) {
	a, b, agent := twoNodes(t)
	ctx := context.Background()
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	onB, ok := b.screenFor(agent, id)
	if !ok {
		t.Fatal("B does not serve the screen")
	}
	steps := []struct {
		name   string
		update string
		want   string
	}{
		{"first update", `$s = "paid"`, "paid"},
		{"second update", `$s = "shipped"`, "shipped"},
	}
	for i, st := range steps {
		if res, err := a.Update(ctx, id, st.update); err != nil || !res.Applied {
			t.Fatalf("%s on A: %+v, %v", st.name, res, err)
		}
		eventually(t, onB, st.name, func() bool { return stateOf(onB, "$s") == st.want })
		ups, _, closed := onB.updatesAfter(int64(i))
		if closed || len(ups) != 1 || ups[0].Seq != int64(i+1) || ups[0].Text != st.update {
			t.Errorf("%s: B's live feed after %d = %+v (closed %v)", st.name, i, ups, closed)
		}
	}
	if err := a.removeScreen(mustScreen(t, a, agent, id)); err != nil {
		t.Fatal(err)
	}
	eventually(t, onB, "removal", func() bool {
		onB.mu.RLock()
		defer onB.mu.RUnlock()
		return onB.closed
	})
	if _, ok := b.screenFor(agent, id); ok {
		t.Error("B still serves a screen removed on A")
	}
}

func mustScreen(t *testing.T, n node, p store.Principal, id string) *liveScreen {
	t.Helper()
	sc, ok := n.screenFor(p, id)
	if !ok {
		t.Fatalf("screen %s not served", id)
	}
	return sc
}

// TestScreenVersionConflict holds a stale copy on B (B does not follow
// A) and checks that a save from it is refused, that it is read again, and
// that a change made on it is applied to the screen the store holds.
func TestScreenVersionConflict(t *testing.T) {
	a, b, agent := twoNodes(t)
	ctx := context.Background()
	b.stopFollowing()
	b.stopFollowing = nil
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	onA, onB := mustScreen(t, a, agent, id), mustScreen(t, b, agent, id)

	if _, err := a.Update(ctx, id, `$s = "paid"`); err != nil {
		t.Fatal(err)
	}
	// A save from the stale copy names a version the store no longer
	// holds: refused, and the copy is read again.
	onB.mu.Lock()
	_ = onB.doc.SetState("$s", "stale")
	onB.bumpLocked()
	onB.mu.Unlock()
	if err := b.saveScreen(ctx, onB); !isToolCode(err, codeVersionConflict) {
		t.Fatalf("a save from a stale copy = %v, want %s", err, codeVersionConflict)
	}
	if got := stateOf(onB, "$s"); got != "paid" {
		t.Errorf("after the refusal B shows $s = %v, want A's %q", got, "paid")
	}

	// A change on a stale copy runs again on the current screen: what it
	// reads is what A saved, never the older copy's.
	if _, err := a.Update(ctx, id, `$s = "shipped"`); err != nil {
		t.Fatal(err)
	}
	var seen []any
	err = b.change(ctx, onB, func() error {
		seen = append(seen, mustState(onB, "$s"))
		return onB.doc.SetState("$note", "from B")
	})
	if err != nil {
		t.Fatalf("change on B = %v", err)
	}
	if len(seen) != 2 || seen[0] != "paid" || seen[1] != "shipped" {
		t.Errorf("the change read $s as %v; want it run again on A's %q", seen, "shipped")
	}
	rec, err := b.Store.Screens.LoadScreen(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rec.Screen.State), `"from B"`) || !strings.Contains(strings.Join(assignedOf(t, a, rec), "\n"), "shipped") {
		t.Errorf("the store holds %s; want A's update and B's entry", rec.Screen.State)
	}
	// A, in turn, is now the stale one: its next change is applied on top.
	if err := a.change(ctx, onA, func() error { return onA.doc.SetState("$s", "closed") }); err != nil {
		t.Fatalf("change on A = %v", err)
	}
	if got := stateOf(onA, "$note"); got != "from B" {
		t.Errorf("A's change lost B's entry: $note = %v", got)
	}
}

// mustState is stateOf for a caller that holds sc.mu.
func mustState(sc *liveScreen, key string) any {
	v, _ := sc.doc.State(key)
	return v
}

// assignedOf returns the update lines a saved screen applies.
func assignedOf(t *testing.T, n node, ld store.LoadedScreen) []string {
	t.Helper()
	sc, err := n.restoreScreen(context.Background(), ld)
	if err != nil || sc == nil {
		t.Fatalf("restoreScreen = %v", err)
	}
	out := make([]string, 0, len(sc.order))
	for _, k := range sc.order {
		out = append(out, sc.latest[k])
	}
	return out
}

// TestConfirmationDecidedOnce answers one waiting press on both nodes at
// once, many times over: each time exactly one node takes it.
func TestConfirmationDecidedOnce(t *testing.T) {
	a, b, agent := twoNodes(t)
	ctx := context.Background()
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	onA, onB := mustScreen(t, a, agent, id), mustScreen(t, b, agent, id)
	answer := func(n node, sc *liveScreen, press string) (int, *pendingPress) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/screens/"+id+"/confirm", strings.NewReader(fmt.Sprintf(`{"press":%q}`, press)))
		r.SetPathValue("id", id)
		_, pp := n.pressOf(w, r, host.Page{Principal: &agent})
		return w.Code, pp
	}
	for i := range 20 {
		press := fmt.Sprintf("press_%d", i)
		rec := store.ScreenPending{ScreenID: id, ID: press, Button: "pay", Tool: "pay", Params: []byte(`{"n":1}`), Sentence: "Pay?", CreatedAt: time.Now()}
		if err := a.Store.Screens.AddScreenPending(ctx, rec); err != nil {
			t.Fatal(err)
		}
		var (
			wg    sync.WaitGroup
			codes [2]int
			got   [2]*pendingPress
		)
		for j, n := range []node{a, b} {
			sc := []*liveScreen{onA, onB}[j]
			wg.Go(func() { codes[j], got[j] = answer(n, sc, press) })
		}
		wg.Wait()
		won := 0
		for j := range got {
			switch {
			case got[j] != nil:
				won++
				if got[j].tool != "pay" || got[j].sentence != "Pay?" {
					t.Errorf("round %d: node %d took %+v", i, j, got[j])
				}
			case codes[j] != http.StatusNotFound:
				t.Errorf("round %d: the losing node answered %d, want 404", i, codes[j])
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d nodes decided the press, want exactly 1", i, won)
		}
	}
	if _, err := a.Store.Screens.TakeScreenPending(ctx, id, "press_0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a decided press is still waiting: %v", err)
	}
}

// TestIdempotencyKeyOfAnotherNodeNotRunAgain checks that a key another
// node began before this node started, and has not finished, is not taken
// over: where nodes share the store, that node may still be running it.
func TestIdempotencyKeyOfAnotherNodeNotRunAgain(t *testing.T) {
	a, b, _ := twoNodes(t)
	fp := [32]byte{1}
	ea, state, werr := a.idemBegin(context.Background(), "scope", "k1", fp)
	if werr != nil || state != idemNew {
		t.Fatalf("node A begins the key: state %v, %v", state, werr)
	}
	defer a.idem.finish(ea, 0, nil, false)
	// Node B started after node A began the key.
	b.Started = time.Now().Add(time.Minute)
	_, state, werr = b.idemBegin(context.Background(), "scope", "k1", fp)
	if werr != nil || state != idemInProgress {
		t.Fatalf("node B: state %v, %v; want the key in progress, not run again", state, werr)
	}
}

// TestSecretValueKeptWhenFollowing checks that a secret value entered on
// one node, which the store never holds, survives that node reading the
// screen again after another node changed it.
func TestSecretValueKeptWhenFollowing(t *testing.T) {
	a, b, agent := twoNodes(t)
	ctx := context.Background()
	stream := "root = Card([status, pin])\n$s = \"open\"\nstatus = Text($s)\n$pin = \"\"\npin = Input(\"PIN\", value=$pin)\n"
	id, err := a.Show(ctx, agent, stream, Options{Secret: []string{"$pin"}})
	if err != nil {
		t.Fatal(err)
	}
	onB, ok := b.screenFor(agent, id)
	if !ok {
		t.Fatal("B does not serve the screen")
	}
	onB.mu.Lock()
	if err := onB.doc.SetState("$pin", "4321"); err != nil {
		onB.mu.Unlock()
		t.Fatal(err)
	}
	onB.mu.Unlock()
	if res, err := a.Update(ctx, id, `$s = "paid"`); err != nil || !res.Applied {
		t.Fatalf("update on A: %+v, %v", res, err)
	}
	eventually(t, onB, "the update", func() bool { return stateOf(onB, "$s") == "paid" })
	if got := stateOf(onB, "$pin"); got != "4321" {
		t.Errorf("B's secret value after following = %v, want it kept", got)
	}
}

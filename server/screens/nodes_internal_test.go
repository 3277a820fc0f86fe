package screens

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/internal/host"
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
		h, err := host.NewHost(t.Context(), host.Config{DataDir: t.TempDir(), Store: db})
		if err != nil {
			t.Fatal(err)
		}
		own := h.Bus
		if shared != nil {
			h.Bus = shared.Bus
		}
		h.SharedBus = true
		ctl, err := controls.New(ctx, hostControlsDeps(h))
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(ctx, hostDeps(h, ctl))
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
			sc, ok := b.screenFor(ctx, agent, tc.id)
			if ok != tc.want {
				t.Fatalf("screenFor(%q) on B = %v, want %v", tc.id, ok, tc.want)
			}
			if !ok {
				return
			}
			want, _ := a.screenFor(ctx, agent, tc.id)
			if got, exp := sc.summary(), want.summary(); got.Outline != exp.Outline || got.Components != exp.Components || !got.Ended {
				t.Errorf("B shows %+v, A %+v", got, exp)
			}
			if again, _ := b.screenFor(ctx, agent, tc.id); again != sc {
				t.Error("B read the screen again instead of holding it")
			}
		})
	}
	if got := b.visibleScreens(ctx, agent); len(got) != 1 || got[0].id != id {
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
	onB, ok := b.screenFor(ctx, agent, id)
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
		testwait.Eventually(t, 10*time.Second, func() bool { return stateOf(onB, "$s") == st.want }, st.name)
		ups, _, closed := onB.updatesAfter(int64(i))
		if closed || len(ups) != 1 || ups[0].Seq != int64(i+1) || ups[0].Text != st.update {
			t.Errorf("%s: B's live feed after %d = %+v (closed %v)", st.name, i, ups, closed)
		}
	}
	if err := a.removeScreen(ctx, mustScreen(t, a, agent, id)); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		onB.mu.RLock()
		defer onB.mu.RUnlock()
		return onB.closed
	}, "removal")
	if _, ok := b.screenFor(ctx, agent, id); ok {
		t.Error("B still serves a screen removed on A")
	}
}

func mustScreen(t *testing.T, n node, p store.Principal, id string) *liveScreen {
	t.Helper()
	sc, ok := n.screenFor(t.Context(), p, id)
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
	onB, ok := b.screenFor(ctx, agent, id)
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
	testwait.Eventually(t, 10*time.Second, func() bool { return stateOf(onB, "$s") == "paid" }, "the update")
	if got := stateOf(onB, "$pin"); got != "4321" {
		t.Errorf("B's secret value after following = %v, want it kept", got)
	}
}

// hookedScreens is a store of screens that runs a test's hooks inside
// some of its calls, to hold a node at one point of a change. Each hook
// runs once.
type hookedScreens struct {
	store.Screens
	mu sync.Mutex
	// beforeAppend and afterAppend run around AppendScreenUpdate,
	// afterLoad once LoadScreen has read.
	beforeAppend, afterAppend, afterLoad func()
	// update answers UpdateScreen in the store's place.
	update func() error
}

// take returns the hook *f and clears it.
func (h *hookedScreens) take(f *func()) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := *f
	*f = nil
	if g == nil {
		g = func() {}
	}
	return g
}

func (h *hookedScreens) AppendScreenUpdate(ctx context.Context, id, text string) (int64, error) {
	h.take(&h.beforeAppend)()
	seq, err := h.Screens.AppendScreenUpdate(ctx, id, text)
	h.take(&h.afterAppend)()
	return seq, err
}

func (h *hookedScreens) LoadScreen(ctx context.Context, id string) (store.LoadedScreen, error) {
	ld, err := h.Screens.LoadScreen(ctx, id)
	h.take(&h.afterLoad)()
	return ld, err
}

func (h *hookedScreens) UpdateScreen(ctx context.Context, sc store.Screen, prev int64) error {
	h.mu.Lock()
	update := h.update
	h.update = nil
	h.mu.Unlock()
	if update != nil {
		return update()
	}
	return h.Screens.UpdateScreen(ctx, sc, prev)
}

// hooked stops n following the other node, so that the test decides when
// n reads a screen again, and puts hooks into n's store of screens.
func hooked(n node) *hookedScreens {
	n.stopFollowing()
	n.stopFollowing = nil
	hs := &hookedScreens{Screens: n.Store.Screens}
	n.Store.Screens = hs
	return hs
}

// checkFeed checks that a follower of sc's live feed from its start gets
// every update the store numbered, once each, in order.
func checkFeed(t *testing.T, n node, sc *liveScreen) {
	t.Helper()
	want, err := n.Store.Screens.ScreenUpdates(context.Background(), sc.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := sc.updatesAfter(0)
	show := func(seq int64, text string) string { return fmt.Sprintf("%d:%s", seq, text) }
	var g, w []string
	for _, u := range got {
		g = append(g, show(u.Seq, u.Text))
	}
	for _, u := range want {
		w = append(w, show(u.Seq, u.Text))
	}
	if strings.Join(g, " | ") != strings.Join(w, " | ") {
		t.Errorf("the live feed gives %q; the store numbered %q", g, w)
	}
	if len(want) > 0 && sc.Seq() != want[len(want)-1].Seq {
		t.Errorf("the feed's seq is %d, want the store's %d", sc.Seq(), want[len(want)-1].Seq)
	}
}

// TestReadAgainDuringLiveUpdate reads a screen again from the store at
// each point of a live update applied on the same node, and once lets
// another node number an update in between: the feed gives each update
// once, with the store's number, in order.
func TestReadAgainDuringLiveUpdate(t *testing.T) {
	cases := []struct {
		name string
		// arm sets hooks before the second update on B; the function it
		// returns runs once that update returned.
		arm func(t *testing.T, a, b node, hs *hookedScreens, id string, onB *liveScreen) func()
	}{
		{"read again between the store numbering the update and the feed showing it",
			func(t *testing.T, a, b node, hs *hookedScreens, id string, onB *liveScreen) func() {
				hs.afterAppend = func() {
					if err := b.reload(context.Background(), onB); err != nil {
						t.Error(err)
					}
				}
				return func() {}
			}},
		{"read before the store numbered the update, applied after the feed showed it",
			func(t *testing.T, a, b node, hs *hookedScreens, id string, onB *liveScreen) func() {
				loaded, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
				hs.beforeAppend = func() {
					hs.afterLoad = func() {
						close(loaded)
						<-release
					}
					go func() {
						defer close(done)
						if err := b.reload(context.Background(), onB); err != nil {
							t.Error(err)
						}
					}()
					<-loaded
				}
				return func() {
					close(release)
					<-done
				}
			}},
		{"another node numbered an update in between",
			func(t *testing.T, a, b node, hs *hookedScreens, id string, onB *liveScreen) func() {
				hs.beforeAppend = func() {
					if res, err := a.Update(context.Background(), id, `status = Text("from A")`); err != nil || !res.Applied {
						t.Errorf("update on A: %+v, %v", res, err)
					}
				}
				return func() {}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b, agent := twoNodes(t)
			hs := hooked(b)
			ctx := context.Background()
			id, err := a.Show(ctx, agent, nodesStream, Options{})
			if err != nil {
				t.Fatal(err)
			}
			onB := mustScreen(t, b, agent, id)
			if _, err := b.Update(ctx, id, `$s = "paid"`); err != nil {
				t.Fatal(err)
			}
			finish := tc.arm(t, a, b, hs, id, onB)
			if res, err := b.Update(ctx, id, `$s = "shipped"`); err != nil || !res.Applied {
				t.Fatalf("second update on B: %+v, %v", res, err)
			}
			finish()
			checkFeed(t, b, onB)
			if got := stateOf(onB, "$s"); got != "shipped" {
				t.Errorf("B shows $s = %v, want %q", got, "shipped")
			}
		})
	}
}

// TestRemovedScreenNotServedAgain removes a screen on one node while the
// other reads it from the store: the reading node hears the removal
// before it holds the screen, and must not serve it.
func TestRemovedScreenNotServedAgain(t *testing.T) {
	cases := []struct {
		name        string
		removeOther bool
		want        bool
	}{
		{"the screen read is removed meanwhile", false, false},
		{"another screen is removed meanwhile", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b, agent := twoNodes(t)
			hs := hooked(b)
			ctx := context.Background()
			id, err := a.Show(ctx, agent, nodesStream, Options{})
			if err != nil {
				t.Fatal(err)
			}
			other, err := a.Show(ctx, agent, nodesStream, Options{})
			if err != nil {
				t.Fatal(err)
			}
			removed := id
			if tc.removeOther {
				removed = other
			}
			hs.afterLoad = func() {
				if err := a.removeScreen(ctx, mustScreen(t, a, agent, removed)); err != nil {
					t.Error(err)
				}
				// The removal reaches B now, between its read and its
				// holding the screen.
				b.follow(ctx, screenEvent{Screen: removed, Origin: a.Origin, Closed: true})
			}
			sc, ok := b.getScreen(ctx, id)
			if ok != tc.want {
				t.Fatalf("getScreen on B = %v, want %v", ok, tc.want)
			}
			b.scrMu.Lock()
			_, held := b.screens[id]
			b.scrMu.Unlock()
			if held != tc.want {
				t.Errorf("B holds the screen: %v, want %v", held, tc.want)
			}
			if _, ok := b.screenFor(ctx, agent, id); ok != tc.want {
				t.Errorf("B serves the screen: %v, want %v", ok, tc.want)
			}
			if sc != nil && tc.want {
				if got := sc.summary(); !got.Ended {
					t.Errorf("B serves %+v, want the whole screen", got)
				}
			}
		})
	}
}

// TestFieldSetOnScreenRemovedElsewhere sets a screen's field through its
// control on a node whose copy is stale, while another node removes the
// screen: the control's change ends, refused, and the node drops the
// screen and its fields.
func TestFieldSetOnScreenRemovedElsewhere(t *testing.T) {
	a, b, agent := twoNodes(t)
	hs := hooked(b)
	ctx := context.Background()
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	onB := mustScreen(t, b, agent, id)
	note := control.Identity{FormID: id, ControlID: "note"}
	if _, ok := b.controls.Registry().Get(ctx, note); !ok {
		t.Fatal("B did not register the screen's field as a control")
	}
	// B's save finds its copy stale; by the time B reads the screen
	// again, A has removed it.
	hs.update = func() error {
		if err := a.removeScreen(ctx, mustScreen(t, a, agent, id)); err != nil {
			t.Error(err)
		}
		return store.ErrConflict
	}
	done := make(chan control.Result, 1)
	go func() {
		done <- b.controls.Registry().Execute(ctx, control.Command{Action: control.Apply, Identity: note, Value: "late"},
			control.CommandContext{Source: control.SourceUser, Confirmed: true})
	}()
	select {
	case res := <-done:
		if res.OK {
			t.Errorf("setting a field of a removed screen = %+v, want it refused", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("setting the field never returned: dropping the screen waits for the control's own change")
	}
	hs.mu.Lock()
	hooked := hs.update == nil
	hs.mu.Unlock()
	if !hooked {
		t.Fatal("the field was not saved through the store: the test did not reach the removed screen")
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		onB.mu.RLock()
		defer onB.mu.RUnlock()
		return onB.closed
	}, "the screen dropped")
	testwait.Eventually(t, 10*time.Second, func() bool {
		_, ok := b.controls.Registry().Get(ctx, note)
		return !ok
	}, "the removed screen's field no longer a control on B")
	if _, ok := b.screenFor(ctx, agent, id); ok {
		t.Error("B still serves a screen removed on A")
	}
}

// TestFeedNumbering checks how the live feed takes updates from the store
// and from this node: each seq once, in order, never going back.
func TestFeedNumbering(t *testing.T) {
	ups := func(seqs ...int64) []liveUpdate {
		var out []liveUpdate
		for _, n := range seqs {
			out = append(out, newLiveUpdate(n, fmt.Sprint("u", n)))
		}
		return out
	}
	type add struct {
		seq    int64
		stored bool
	}
	cases := []struct {
		name    string
		feed    []liveUpdate
		merge   []liveUpdate // read from the store, then merged
		add     *add         // then added as this node's update
		want    []int64
		wantSeq int64
	}{
		{"store ahead", ups(1, 2), ups(1, 2, 3, 4), nil, []int64{1, 2, 3, 4}, 4},
		{"store behind: never back", ups(1, 2, 3), ups(1, 2), nil, []int64{1, 2, 3}, 3},
		{"store trimmed what the feed lacks: restart from the kept", ups(1), ups(5, 6), nil, []int64{5, 6}, 6},
		{"update a reading already added", ups(1), ups(1, 2), &add{2, true}, []int64{1, 2}, 2},
		{"update after the feed", ups(1, 2), nil, &add{3, true}, []int64{1, 2, 3}, 3},
		{"update the store did not number", ups(1, 2), nil, &add{0, false}, []int64{1, 2, 3}, 3},
		{"store's number taken by a local update", append(ups(1), liveUpdate{Seq: 2, local: true}), nil, &add{2, true}, []int64{1, 2, 3}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := &liveScreen{updates: tc.feed, seq: tc.feed[len(tc.feed)-1].Seq}
			if len(tc.merge) > 0 {
				sc.mergeFeedLocked(tc.merge, tc.merge[len(tc.merge)-1].Seq)
			}
			if tc.add != nil {
				sc.addUpdateLocked(tc.add.seq, tc.add.stored, "added")
			}
			var got []int64
			for _, u := range sc.updates {
				got = append(got, u.Seq)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || sc.seq != tc.wantSeq {
				t.Errorf("feed %v seq %d, want %v seq %d", got, sc.seq, tc.want, tc.wantSeq)
			}
		})
	}
}

// TestChangeToScreenRemovedUnheard changes, on one node, a screen another
// node removed without this one hearing it: the change is refused with
// not_found and the node stops serving the screen.
func TestChangeToScreenRemovedUnheard(t *testing.T) {
	a, b, agent := twoNodes(t)
	ctx := context.Background()
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustScreen(t, b, agent, id)
	hooked(b) // b hears nothing from now on
	if err := a.Store.Screens.DeleteScreen(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = b.Update(ctx, id, `$s = "paid"`)
	if !isToolCode(err, "not_found") {
		t.Fatalf("update of a removed screen: %v; want not_found", err)
	}
	if _, ok := b.screenFor(ctx, agent, id); ok {
		t.Error("the node still serves a screen the store no longer keeps")
	}
}

// TestListingFollowsTheStore lists, on one node that hears nothing from
// the other, the screens the other showed and then removed: the listing
// gains the screen it does not hold and loses the one the store dropped.
func TestListingFollowsTheStore(t *testing.T) {
	a, b, agent := twoNodes(t)
	hooked(b) // b hears nothing from a
	ctx := context.Background()
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		var out []string
		for _, sc := range b.visibleScreens(ctx, agent) {
			out = append(out, sc.id)
		}
		return out
	}
	if got := listed(); !slices.Contains(got, id) {
		t.Fatalf("b lists %v; want %s, shown on a", got, id)
	}
	if err := a.Store.Screens.DeleteScreen(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := listed(); slices.Contains(got, id) {
		t.Errorf("b lists %v after the store dropped %s", got, id)
	}
}

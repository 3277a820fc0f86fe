package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// testScreens checks the store of screens: records and their versions, the
// per-owner bound, pending confirmations, live feeds and idempotency keys.
func testScreens(t *testing.T, open func(*testing.T) store.Store) {
	cases := []struct {
		name string
		test func(*testing.T, store.Screens)
	}{
		{"Records", testScreenRecords},
		{"VersionCheck", testScreenVersionCheck},
		{"Load", testScreenLoad},
		{"OwnerBound", testScreenOwnerBound},
		{"Pending", testScreenPending},
		{"Feed", testScreenFeed},
		{"Idempotency", testIdempotency},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t).Screens()) })
	}
}

func newScreen(t *testing.T, s store.Screens, id, owner string, created time.Duration) store.Screen {
	t.Helper()
	sc := store.Screen{ID: id, OwnerID: owner, Document: "Text(\"hi\")", Version: 1, State: json.RawMessage(`{"touched":["a"]}`),
		CreatedAt: at(created), UpdatedAt: at(created)}
	if ev, err := s.CreateScreen(ctx(t), sc); err != nil || len(ev) != 0 {
		t.Fatalf("CreateScreen(%s) = %v, %v", id, ev, err)
	}
	return sc
}

func testScreenRecords(t *testing.T, s store.Screens) {
	sc := newScreen(t, s, "scr_b", "p1", time.Second)
	newScreen(t, s, "scr_a", "p1", 2*time.Second)
	newScreen(t, s, "scr_c", "p2", 3*time.Second)

	got, err := s.Screen(ctx(t), "scr_b")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != sc.ID || got.OwnerID != "p1" || got.Document != sc.Document || got.Version != 1 || string(got.State) != string(sc.State) ||
		got.LastSeq != 0 || !got.CreatedAt.Equal(sc.CreatedAt) || !got.UpdatedAt.Equal(sc.UpdatedAt) {
		t.Errorf("screen read back as %+v, want %+v", got, sc)
	}
	refused := []struct {
		name string
		sc   store.Screen
		want error
	}{
		{"existing id", store.Screen{ID: "scr_b", OwnerID: "p3", CreatedAt: epoch}, store.ErrConflict},
		{"no id", store.Screen{OwnerID: "p3"}, store.ErrInvalid},
		{"no owner", store.Screen{ID: "scr_x"}, store.ErrInvalid},
		{"state not JSON", store.Screen{ID: "scr_y", OwnerID: "p3", State: json.RawMessage(`{`)}, store.ErrInvalid},
	}
	for _, tc := range refused {
		if _, err := s.CreateScreen(ctx(t), tc.sc); !errors.Is(err, tc.want) {
			t.Errorf("%s: CreateScreen = %v, want %v", tc.name, err, tc.want)
		}
	}

	mine, err := s.ListScreens(ctx(t), "p1")
	if err != nil || len(mine) != 2 || mine[0].ID != "scr_b" || mine[1].ID != "scr_a" {
		t.Errorf("ListScreens(p1) = %v, %v; want scr_b, scr_a (oldest first)", ids(mine), err)
	}
	all, err := s.ListScreens(ctx(t), "")
	if err != nil || len(all) != 3 {
		t.Errorf("ListScreens() = %v, %v; want all three", ids(all), err)
	}
	if got, err := s.ScreenIDs(ctx(t)); err != nil || !slices.Equal(got, ids(all)) {
		t.Errorf("ScreenIDs() = %v, %v; want %v, the ids ListScreens gives", got, err, ids(all))
	}

	next := sc
	next.Version, next.Document, next.State, next.UpdatedAt = 3, "Text(\"bye\")", json.RawMessage(`{}`), at(time.Minute)
	if err := s.UpdateScreen(ctx(t), next, 1); err != nil {
		t.Fatalf("UpdateScreen = %v", err)
	}
	old := sc
	old.Version = 2
	if err := s.UpdateScreen(ctx(t), old, 1); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an update from a version no longer stored = %v, want ErrConflict", err)
	}
	if err := s.UpdateScreen(ctx(t), store.Screen{ID: "scr_none", OwnerID: "p1", Version: 9}, 8); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an update of an unknown screen = %v, want ErrNotFound", err)
	}
	got, _ = s.Screen(ctx(t), "scr_b")
	if got.Version != 3 || got.Document != next.Document || string(got.State) != `{}` || !got.UpdatedAt.Equal(next.UpdatedAt) || !got.CreatedAt.Equal(sc.CreatedAt) {
		t.Errorf("after the update: %+v", got)
	}
	// A save of the state alone keeps the stored document, whatever
	// Document holds.
	same := next
	same.Version, same.Document, same.State, same.SameDocument = 4, "", json.RawMessage(`{"n":1}`), true
	if err := s.UpdateScreen(ctx(t), same, 3); err != nil {
		t.Fatalf("UpdateScreen of the state alone = %v", err)
	}
	if got, _ = s.Screen(ctx(t), "scr_b"); got.Version != 4 || got.Document != next.Document || string(got.State) != `{"n":1}` || got.SameDocument {
		t.Errorf("after an update of the state alone: %+v, want document %q kept", got, next.Document)
	}
	same.Version = 5
	if err := s.UpdateScreen(ctx(t), same, 3); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an update of the state alone from a version no longer stored = %v, want ErrConflict", err)
	}

	if err := s.DeleteScreen(ctx(t), "scr_b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Screen(ctx(t), "scr_b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted screen reads as %v", err)
	}
	if err := s.DeleteScreen(ctx(t), "scr_b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice = %v, want ErrNotFound", err)
	}
}

// testScreenVersionCheck checks that a write names the version it read:
// a write from any other version is refused, and of writers that read the
// same version exactly one succeeds.
func testScreenVersionCheck(t *testing.T, s store.Screens) {
	sc := newScreen(t, s, "scr_v", "p1", 0)
	write := func(version, prev int64, doc string) error {
		next := sc
		next.Version, next.Document, next.UpdatedAt = version, doc, at(time.Duration(version)*time.Second)
		return s.UpdateScreen(ctx(t), next, prev)
	}
	steps := []struct {
		name          string
		version, prev int64
		want          error
	}{
		{"from the stored version", 5, 1, nil},
		{"from a version read before it", 9, 1, store.ErrConflict},
		{"from a version never stored", 9, 7, store.ErrConflict},
		{"a higher version from an old read", 100, 4, store.ErrConflict},
		{"not past the version it read", 5, 5, store.ErrInvalid},
		{"from the stored version again", 6, 5, nil},
	}
	for _, st := range steps {
		if err := write(st.version, st.prev, st.name); !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Errorf("%s: UpdateScreen(version %d, prev %d) = %v, want %v", st.name, st.version, st.prev, err, st.want)
		}
	}
	if got, err := s.Screen(ctx(t), "scr_v"); err != nil || got.Version != 6 || got.Document != "from the stored version again" {
		t.Errorf("after the writes: version %d, document %q, %v; want version 6 from the last accepted write", got.Version, got.Document, err)
	}

	// Writers that read the same version race: exactly one is saved.
	errs := race(6, func(i int) error { return write(int64(7+i), 6, fmt.Sprintf("writer %d", i)) })
	winner := exactlyOne(t, "UpdateScreen", errs, store.ErrConflict)
	if got, _ := s.Screen(ctx(t), "scr_v"); winner >= 0 && (got.Version != int64(7+winner) || got.Document != fmt.Sprintf("writer %d", winner)) {
		t.Errorf("stored version %d %q, want the winner's (writer %d)", got.Version, got.Document, winner)
	}
}

// testScreenLoad checks that LoadScreen returns a screen with its pending
// presses and kept feed, and that a taken press carries the screen's
// version.
func testScreenLoad(t *testing.T, s store.Screens) {
	sc := newScreen(t, s, "scr_l", "p1", 0)
	newScreen(t, s, "scr_other", "p1", time.Second)
	for i, id := range []string{"press_a", "press_b"} {
		p := store.ScreenPending{ScreenID: "scr_l", ID: id, Button: "b", Tool: "t", Params: json.RawMessage(`{"n":1}`), CreatedAt: at(time.Duration(i) * time.Second)}
		if err := s.AddScreenPending(ctx(t), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddScreenPending(ctx(t), store.ScreenPending{ScreenID: "scr_other", ID: "press_x", Button: "b", Tool: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"a = 1", "b = 2"} {
		if _, err := s.AppendScreenUpdate(ctx(t), "scr_l", text); err != nil {
			t.Fatal(err)
		}
	}
	next := sc
	next.Version, next.Document = 4, "Text(\"two\")"
	if err := s.UpdateScreen(ctx(t), next, 1); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadScreen(ctx(t), "scr_l")
	if err != nil {
		t.Fatal(err)
	}
	if got.Screen.ID != "scr_l" || got.Screen.Version != 4 || got.Screen.Document != next.Document || got.Screen.LastSeq != 2 {
		t.Errorf("loaded screen = %+v, want version 4, LastSeq 2", got.Screen)
	}
	if len(got.Pending) != 2 || got.Pending[0].ID != "press_a" || got.Pending[1].ID != "press_b" || string(got.Pending[0].Params) != `{"n":1}` {
		t.Errorf("loaded presses = %+v, want press_a, press_b", got.Pending)
	}
	if len(got.Updates) != 2 || got.Updates[0] != (store.ScreenUpdate{Seq: 1, Text: "a = 1"}) || got.Updates[1].Seq != 2 {
		t.Errorf("loaded feed = %+v", got.Updates)
	}
	if _, err := s.LoadScreen(ctx(t), "scr_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LoadScreen of an unknown screen = %v, want ErrNotFound", err)
	}
	taken, err := s.TakeScreenPending(ctx(t), "scr_l", "press_a")
	if err != nil || taken.ID != "press_a" || taken.ScreenVersion != 4 {
		t.Errorf("TakeScreenPending = %+v, %v; want press_a with ScreenVersion 4", taken, err)
	}
	if got, _ := s.LoadScreen(ctx(t), "scr_l"); len(got.Pending) != 1 || got.Pending[0].ID != "press_b" {
		t.Errorf("presses after a take = %+v, want press_b only", got.Pending)
	}
}

func ids(ss []store.Screen) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

func testScreenOwnerBound(t *testing.T, s store.Screens) {
	for i := range store.ScreensPerOwner {
		newScreen(t, s, fmt.Sprintf("scr_%03d", i), "p1", time.Duration(i)*time.Second)
	}
	newScreen(t, s, "other", "p2", 0)
	if _, err := s.AppendScreenUpdate(ctx(t), "scr_000", "x = 1"); err != nil {
		t.Fatal(err)
	}
	ev, err := s.CreateScreen(ctx(t), store.Screen{ID: "scr_new", OwnerID: "p1", Version: 1, CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)})
	if err != nil || len(ev) != 1 || ev[0] != "scr_000" {
		t.Fatalf("CreateScreen past the bound = %v, %v; want scr_000 evicted", ev, err)
	}
	if _, err := s.Screen(ctx(t), "scr_000"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the evicted screen is still there: %v", err)
	}
	if u, err := s.ScreenUpdates(ctx(t), "scr_000", 0); err != nil || len(u) != 0 {
		t.Errorf("the evicted screen's feed = %v, %v", u, err)
	}
	mine, _ := s.ListScreens(ctx(t), "p1")
	if len(mine) != store.ScreensPerOwner {
		t.Errorf("p1 holds %d screens, want %d", len(mine), store.ScreensPerOwner)
	}
	if _, err := s.Screen(ctx(t), "other"); err != nil {
		t.Errorf("another owner's screen was touched: %v", err)
	}
}

func testScreenPending(t *testing.T, s store.Screens) {
	newScreen(t, s, "scr_1", "p1", 0)
	first := store.ScreenPending{ScreenID: "scr_1", ID: "press_0", Button: "pay", Tool: "pay_invoice",
		Params: json.RawMessage(`{"invoice":"INV-1"}`), Sentence: "Pay invoice INV-1?", CreatedAt: at(time.Second)}
	if err := s.AddScreenPending(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < store.ScreenPendingLimit; i++ {
		p := store.ScreenPending{ScreenID: "scr_1", ID: fmt.Sprintf("press_%d", i), Button: "b", Tool: "t", CreatedAt: at(time.Duration(i+1) * time.Second)}
		if err := s.AddScreenPending(ctx(t), p); err != nil {
			t.Fatalf("press %d: %v", i, err)
		}
	}
	refused := []struct {
		name string
		p    store.ScreenPending
		want error
	}{
		{"over the limit", store.ScreenPending{ScreenID: "scr_1", ID: "press_x", Button: "b", Tool: "t"}, store.ErrInvalid},
		{"unknown screen", store.ScreenPending{ScreenID: "scr_none", ID: "press_y", Button: "b", Tool: "t"}, store.ErrNotFound},
	}
	for _, tc := range refused {
		if err := s.AddScreenPending(ctx(t), tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: AddScreenPending = %v, want %v", tc.name, err, tc.want)
		}
	}
	list, err := s.ListScreenPending(ctx(t), "scr_1")
	if err != nil || len(list) != store.ScreenPendingLimit || list[0].ID != "press_0" {
		t.Fatalf("ListScreenPending = %d presses, %v", len(list), err)
	}
	if got := list[0]; got.Button != "pay" || got.Tool != "pay_invoice" || string(got.Params) != string(first.Params) ||
		got.Sentence != first.Sentence || !got.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("press read back as %+v, want %+v", got, first)
	}
	if err := s.AddScreenPending(ctx(t), first); !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a press added twice = %v", err)
	}

	// Of concurrent confirmations of one press, exactly one takes it.
	errs := race(6, func(int) error { _, err := s.TakeScreenPending(ctx(t), "scr_1", "press_0"); return err })
	exactlyOne(t, "TakeScreenPending", errs, store.ErrNotFound)
	if err := s.AddScreenPending(ctx(t), store.ScreenPending{ScreenID: "scr_1", ID: "press_z", Button: "b", Tool: "t"}); err != nil {
		t.Errorf("a press after one was taken = %v", err)
	}
	if err := s.DeleteScreen(ctx(t), "scr_1"); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListScreenPending(ctx(t), "scr_1"); err != nil || len(list) != 0 {
		t.Errorf("a deleted screen keeps %d presses (%v)", len(list), err)
	}
}

func testScreenFeed(t *testing.T, s store.Screens) {
	newScreen(t, s, "scr_1", "p1", 0)
	n := store.ScreenUpdatesKept + 10
	for i := 1; i <= n; i++ {
		seq, err := s.AppendScreenUpdate(ctx(t), "scr_1", fmt.Sprintf("n = %d", i))
		if err != nil || seq != int64(i) {
			t.Fatalf("update %d: seq %d, %v", i, seq, err)
		}
	}
	all, err := s.ScreenUpdates(ctx(t), "scr_1", 0)
	if err != nil || len(all) != store.ScreenUpdatesKept || all[0].Seq != 11 || all[len(all)-1].Seq != int64(n) || all[0].Text != "n = 11" {
		t.Fatalf("kept updates: %d (first %+v), %v", len(all), all[0], err)
	}
	tail, _ := s.ScreenUpdates(ctx(t), "scr_1", int64(n-2))
	if len(tail) != 2 || tail[0].Seq != int64(n-1) {
		t.Errorf("updates after %d = %+v", n-2, tail)
	}
	if sc, _ := s.Screen(ctx(t), "scr_1"); sc.LastSeq != int64(n) {
		t.Errorf("LastSeq = %d, want %d", sc.LastSeq, n)
	}
	if _, err := s.AppendScreenUpdate(ctx(t), "scr_none", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an update of an unknown screen = %v", err)
	}
	// Concurrent appends get distinct, consecutive numbers.
	seqs := make([]int64, 8)
	errs := race(8, func(i int) error {
		var err error
		seqs[i], err = s.AppendScreenUpdate(ctx(t), "scr_1", "y")
		return err
	})
	seen := map[int64]bool{}
	for i, err := range errs {
		if err != nil || seqs[i] <= int64(n) || seqs[i] > int64(n+8) || seen[seqs[i]] {
			t.Errorf("concurrent append %d: seq %d, %v", i, seqs[i], err)
		}
		seen[seqs[i]] = true
	}
}

func testIdempotency(t *testing.T, s store.Screens) {
	rec := store.Idempotency{Key: "k1", Fingerprint: hash("req-1"), CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	got, created, err := s.BeginIdempotent(ctx(t), rec, at(0))
	if err != nil || !created || got.Done {
		t.Fatalf("BeginIdempotent (new) = %+v, %v, %v", got, created, err)
	}
	got, created, err = s.BeginIdempotent(ctx(t), store.Idempotency{Key: "k1", Fingerprint: hash("req-2"), CreatedAt: at(time.Second), ExpiresAt: at(time.Hour)}, at(time.Second))
	if err != nil || created || got.Done || string(got.Fingerprint) != string(rec.Fingerprint) {
		t.Fatalf("BeginIdempotent (in progress) = %+v, %v, %v; want the first record", got, created, err)
	}
	if err := s.FinishIdempotent(ctx(t), "k1", 201, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	got, created, _ = s.BeginIdempotent(ctx(t), rec, at(time.Minute))
	if created || !got.Done || got.Status != 201 || string(got.Body) != `{"ok":true}` || !got.ExpiresAt.Equal(rec.ExpiresAt) {
		t.Errorf("BeginIdempotent (done) = %+v, %v", got, created)
	}
	if err := s.FinishIdempotent(ctx(t), "k_none", 200, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("finishing an unknown key = %v", err)
	}
	// An expired key starts afresh.
	if _, created, _ := s.BeginIdempotent(ctx(t), store.Idempotency{Key: "k1", Fingerprint: hash("req-3"), CreatedAt: at(time.Hour), ExpiresAt: at(2 * time.Hour)}, at(time.Hour)); !created {
		t.Error("an expired key was not replaced")
	}
	if err := s.ForgetIdempotent(ctx(t), "k1"); err != nil {
		t.Fatal(err)
	}
	if _, created, _ := s.BeginIdempotent(ctx(t), rec, at(0)); !created {
		t.Error("a forgotten key was still known")
	}
	if err := s.ForgetIdempotent(ctx(t), "k_none"); err != nil {
		t.Errorf("forgetting an unknown key = %v", err)
	}
	// Concurrent first uses of one key: exactly one creates it.
	errs := race(6, func(i int) error {
		_, created, err := s.BeginIdempotent(ctx(t), store.Idempotency{Key: "k2", Fingerprint: hash("r"), CreatedAt: at(0), ExpiresAt: at(time.Hour)}, at(0))
		if err != nil {
			return err
		}
		if !created {
			return store.ErrConflict
		}
		return nil
	})
	exactlyOne(t, "BeginIdempotent", errs, store.ErrConflict)
}

package screens

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Several nodes share one store and one event log. Each node holds the
// screens it has served in memory and writes every change through to the
// store, naming the version it read: a write from a version the store no
// longer holds is refused, and the node reads the screen again. A screen
// a node does not hold is read from the store when it is asked for. A
// change one node makes reaches the others as its screen.update event,
// stamped with the changing process's origin, and the nodes that hold the
// screen read it again from the store.

// codeVersionConflict is the code of a change refused because another node
// saved the screen first; the screen has been read again, so sending the
// change again applies it to the current screen.
const codeVersionConflict = "screen_version_conflict"

// conflictRetries is how many times a change is applied again to a screen
// read again after another node's write before it is refused.
const conflictRetries = 3

// errVersionConflict is the refusal of a change another node's write beat
// three times over.
func errVersionConflict() *tool.Error {
	return tool.Errorf(codeVersionConflict, "the screen was changed on another node at the same moment, so this change was not saved; the screen now shows the other change: look at it and try again")
}

// versionConflictError is errVersionConflict on the wire: a 409 worth
// retrying.
func versionConflictError() *wire.Error {
	te := errVersionConflict()
	e := wire.New(wire.Code(te.Code), te.Message)
	e.Status, e.Retryable = http.StatusConflict, true
	return e
}

// screenEvent is what following another node's change needs from a
// screen.update event.
type screenEvent struct {
	Screen string `json:"screen"`
	Origin string `json:"origin"`
	// Stored and Seq are the screen's stored version and feed sequence
	// after the change; a copy that has both is current.
	Stored int64 `json:"stored"`
	Seq    int64 `json:"seq"`
	// Press is set when a press started or stopped waiting.
	Press  bool `json:"press"`
	Closed bool `json:"closed"`
}

// followOtherNodes starts reading again the screens that other nodes
// change. It returns at once; Close stops it.
func (s *Part) followOtherNodes() {
	s.stopFollowing = s.FollowOtherNodes(func(e event.Event) bool {
		return e.Type == "screen.update" || e.Type == event.Lagged
	}, func(ctx context.Context, e event.Event) {
		if e.Type == event.Lagged {
			s.reloadAll(ctx)
			return
		}
		var se screenEvent
		if json.Unmarshal(e.Data, &se) != nil || se.Origin == "" || se.Origin == s.Origin {
			return
		}
		s.follow(ctx, se)
	})
}

// follow brings this node's copy of the screen another node changed up to
// date: it is dropped when the screen closed, and read again unless it
// already has the version and feed the change left.
func (s *Part) follow(ctx context.Context, se screenEvent) {
	s.scrMu.Lock()
	sc, ok := s.screens[se.Screen]
	if se.Closed {
		// Counted even when not held: a read of the screen from the
		// store may be under way (getScreen).
		s.closes++
	}
	s.scrMu.Unlock()
	if !ok {
		return
	}
	if se.Closed {
		s.forget(sc)
		return
	}
	sc.mu.RLock()
	current := !se.Press && se.Stored == sc.saved && se.Seq == sc.seq
	sc.mu.RUnlock()
	if current {
		return
	}
	if err := s.reload(ctx, sc); err != nil && ctx.Err() == nil {
		s.Log.Warn("a screen another node changed could not be read again", "screen", sc.id, "err", err)
	}
}

// reloadAll reads again every screen this node holds, after events were
// missed.
func (s *Part) reloadAll(ctx context.Context) {
	s.scrMu.Lock()
	// A missed event may be a close: a screen being read from the store
	// now is looked up once more before it is served (getScreen).
	s.closes++
	all := make([]*liveScreen, 0, len(s.screens))
	for _, sc := range s.screens {
		all = append(all, sc)
	}
	s.scrMu.Unlock()
	for _, sc := range all {
		if err := s.reload(ctx, sc); err != nil && ctx.Err() == nil {
			s.Log.Warn("a screen could not be read again", "screen", sc.id, "err", err)
		}
	}
}

// forget drops sc from this node, without touching the store: another
// node removed it. Closing sc unregisters its fields, which waits for
// their controls' changes under way: the caller holds none of sc's locks
// and is not running one of those changes.
func (s *Part) forget(sc *liveScreen) {
	s.scrMu.Lock()
	if s.screens[sc.id] == sc {
		delete(s.screens, sc.id)
	}
	s.closes++
	s.scrMu.Unlock()
	sc.close()
}

// getScreen returns the screen id: the copy this node holds, or else the
// one the store keeps, read now and held from then on. An unknown id, or
// a screen whose state is damaged, gives false.
func (s *Part) getScreen(ctx context.Context, id string) (*liveScreen, bool) {
	s.scrMu.Lock()
	sc, ok := s.screens[id]
	s.scrMu.Unlock()
	if ok {
		return sc, true
	}
	// Alone on its store, a node holds every screen from its start: a
	// miss is an unknown id. Only ids of the form screens are given are
	// looked up, so a caller probing ids costs no store read.
	if !s.SharedBus || !validScreenID(id) {
		return nil, false
	}
	s.scrMu.Lock()
	closes := s.closes
	s.scrMu.Unlock()
	ld, err := s.Store.Screens.LoadScreen(ctx, id)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.Log.Error("a screen could not be read", "screen", id, "err", err)
		}
		return nil, false
	}
	sc, err = s.restoreScreen(ctx, ld)
	if err != nil || sc == nil {
		return nil, false
	}
	s.scrMu.Lock()
	if held, ok := s.screens[id]; ok {
		// Another request read it first.
		s.scrMu.Unlock()
		return held, true
	}
	s.screens[id] = sc
	closedMeanwhile := s.closes != closes
	s.scrMu.Unlock()
	if closedMeanwhile {
		// A screen closed while this one was read: if it was this one,
		// its removal was heard before it was held, and nothing else
		// would drop it. A removal is in the store before it is heard,
		// so the store tells. A close heard from now on finds it held.
		if _, err := s.Store.Screens.Screen(context.WithoutCancel(ctx), id); errors.Is(err, store.ErrNotFound) {
			s.forget(sc)
			return nil, false
		}
	}
	s.syncScreenControls(sc)
	return sc, true
}

// validScreenID reports whether id has the form newScreenID gives.
func validScreenID(id string) bool {
	h, ok := strings.CutPrefix(id, "scr_")
	if !ok || len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// syncList makes this node hold every screen the store keeps, and drop
// those another node removed, before a listing.
func (s *Part) syncList(ctx context.Context) {
	saved, err := s.Store.Screens.ScreenIDs(ctx)
	if err != nil {
		s.Log.Error("the saved screens could not be listed", "err", err)
		return
	}
	kept := make(map[string]bool, len(saved))
	for _, id := range saved {
		kept[id] = true
		s.getScreen(ctx, id)
	}
	s.scrMu.Lock()
	var gone []*liveScreen
	for id, sc := range s.screens {
		if !kept[id] {
			gone = append(gone, sc)
		}
	}
	s.scrMu.Unlock()
	for _, sc := range gone {
		// Read it once more: it may have been created after the listing.
		if _, err := s.Store.Screens.Screen(ctx, sc.id); errors.Is(err, store.ErrNotFound) {
			s.forget(sc)
		}
	}
}

// errScreenGone is reloadSaving's answer for a screen the store no
// longer keeps; the caller forgets it once its locks are released.
var errScreenGone = errors.New("the screen was removed")

// reload reads sc again from the store and replaces this node's copy with
// it, in place, so requests and followers holding sc see the current
// screen. A screen the store no longer keeps is dropped. The caller must
// not be running a change of one of sc's fields through its control:
// dropping sc waits for those (see changeFromControl).
func (s *Part) reload(ctx context.Context, sc *liveScreen) error {
	sc.saveMu.Lock()
	err := s.reloadSaving(ctx, sc)
	sc.saveMu.Unlock()
	switch {
	case errors.Is(err, errScreenGone):
		s.forget(sc)
		return nil
	case err == nil:
		s.syncScreenControls(sc)
	}
	return err
}

// reloadSaving is reload with sc.saveMu held; the caller registers the
// fields again (syncScreenControls) once it has released sc.saveMu, and
// forgets the screen when the answer is errScreenGone.
//
// The live feed is not replaced but brought up to the store's
// (mergeFeedLocked): an update applied here meanwhile, which holds
// sc.feedMu but not sc.saveMu, keeps its number, and no update is
// numbered twice.
func (s *Part) reloadSaving(ctx context.Context, sc *liveScreen) error {
	ld, err := s.Store.Screens.LoadScreen(context.WithoutCancel(ctx), sc.id)
	if errors.Is(err, store.ErrNotFound) {
		return errScreenGone
	}
	if err != nil {
		return err
	}
	fresh, err := s.restoreScreen(ctx, ld)
	if err != nil {
		return err
	}
	if fresh == nil {
		return errors.New("the saved state of the screen is damaged")
	}
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return nil
	}
	// The owner, the secret $keys and the options are fixed when a screen
	// is shown, and read without the lock; the rest is replaced.
	// Secret values are never saved: what was entered here is carried
	// over to the copy read from the store, which has none.
	for k := range sc.secret {
		if v, ok := sc.doc.State(k); ok {
			_ = fresh.doc.SetState(k, v)
		}
	}
	sc.stream.Reset()
	sc.stream.WriteString(fresh.stream.String())
	sc.storedDoc = fresh.storedDoc
	sc.parser, sc.doc = fresh.parser, fresh.doc
	sc.version, sc.saved = fresh.version, fresh.saved
	sc.touched = fresh.touched
	// A press this node prepared keeps its preparation while it waits.
	for id, pp := range sc.presses {
		if np, ok := fresh.presses[id]; ok && pp.pending != nil {
			np.pending = pp.pending
			continue
		}
		pp.cancel()
	}
	sc.presses = fresh.presses
	sc.mergeFeedLocked(fresh.updates, fresh.seq)
	sc.latest, sc.order = fresh.latest, fresh.order
	close(sc.changed)
	sc.changed = make(chan struct{})
	sc.mu.Unlock()
	return nil
}

// errNoChange stops a change without saving anything; the caller has
// its own answer.
var errNoChange = errors.New("no change")

// change applies fn to sc (sc.mu held), records the change and saves it,
// naming the version this copy read. When another node saved the screen
// since, the copy is read again and fn applied to it again, up to
// conflictRetries times, so a change never lands on a screen older than
// the store's. fn's error stops the change unsaved and is returned. The
// other errors are *tool.Error: not_found for a closed screen,
// screen_version_conflict, store_unavailable.
func (s *Part) change(ctx context.Context, sc *liveScreen, fn func() error) error {
	return s.changeThen(ctx, sc, fn, func(f func()) { f() })
}

// changeFromControl is change for a control's handle, which the control
// registry calls while it holds that control. What a screen read again
// asks of the registry, registering its fields again or, when another
// node removed it, unregistering them, runs apart: unregistering waits for
// the control's change under way, which is this one.
func (s *Part) changeFromControl(ctx context.Context, sc *liveScreen, fn func() error) error {
	return s.changeThen(ctx, sc, fn, func(f func()) { go f() })
}

// changeThen is change, handing to after, once sc.saveMu is released,
// what a reading again of the screen leaves to do: registering its fields
// again, or forgetting a screen the store no longer keeps.
func (s *Part) changeThen(ctx context.Context, sc *liveScreen, fn func() error, after func(func())) error {
	sc.saveMu.Lock()
	reloaded, gone := false, false
	defer func() {
		sc.saveMu.Unlock()
		switch {
		case gone:
			after(func() { s.forget(sc) })
		case reloaded:
			after(func() { s.syncScreenControls(sc) })
		}
	}()
	for attempt := 0; ; attempt++ {
		sc.mu.Lock()
		if sc.closed {
			sc.mu.Unlock()
			return tool.Errorf("not_found", "the screen %q is closed", sc.id)
		}
		if fn != nil {
			if err := fn(); err != nil {
				sc.mu.Unlock()
				return err
			}
			sc.bumpLocked()
		}
		if sc.version <= sc.saved {
			// Nothing new to write: a save before this one wrote it.
			sc.mu.Unlock()
			return nil
		}
		rec, err := s.screenRecordLocked(sc)
		prev := sc.saved
		sc.mu.Unlock()
		if err != nil {
			return err
		}
		err = s.Store.Screens.UpdateScreen(context.WithoutCancel(ctx), rec, prev)
		switch {
		case err == nil:
			sc.mu.Lock()
			sc.saved = rec.Version
			sc.storedDoc = len(rec.Document)
			if sc.version < rec.Version {
				sc.version = rec.Version
			}
			sc.mu.Unlock()
			return nil
		case errors.Is(err, store.ErrNotFound):
			// Removed meanwhile, here or on another node: the change
			// went nowhere, and the screen is dropped.
			gone = true
			return tool.Errorf("not_found", "the screen %q is closed", sc.id)
		case errors.Is(err, store.ErrConflict):
			rerr := s.reloadSaving(ctx, sc)
			if errors.Is(rerr, errScreenGone) {
				gone = true
				return tool.Errorf("not_found", "the screen %q is closed", sc.id)
			}
			if rerr != nil {
				s.Log.Error("a screen changed on another node could not be read again", "screen", sc.id, "err", rerr)
				return storeUnavailable("the screen")
			}
			reloaded = true
			if fn == nil || attempt+1 >= conflictRetries {
				return errVersionConflict()
			}
		default:
			s.Log.Error("a screen could not be saved", "screen", sc.id, "err", err)
			return storeUnavailable("the screen")
		}
	}
}

// isToolCode reports whether err is a *tool.Error with code.
func isToolCode(err error, code string) bool {
	var te *tool.Error
	return errors.As(err, &te) && te.Code == code
}

// writeChangeError writes the refusal of a change: a version conflict is a
// 409 worth retrying, the other errors as host.WriteToolError writes them.
func writeChangeError(w http.ResponseWriter, err error) {
	if isToolCode(err, codeVersionConflict) {
		host.WriteAPIError(w, versionConflictError())
		return
	}
	host.WriteToolError(w, err)
}

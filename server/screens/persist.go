package screens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// savedState is the state of a screen as the store keeps it, beside the
// document (the stream the screen was shown with).
type savedState struct {
	// OwnerKind and OwnerName describe the owner when the store no longer
	// knows it.
	OwnerKind string `json:"ownerKind,omitempty"`
	OwnerName string `json:"ownerName,omitempty"`
	// Tools and Assets are what the stream was allowed to use.
	Tools  []string `json:"tools,omitempty"`
	Assets []string `json:"assets,omitempty"`
	// Secret lists the $keys the application made secret.
	Secret []string `json:"secret,omitempty"`
	// Values are the state's values, the person's entries included,
	// except those of secret $keys, which are never saved.
	Values map[string]any `json:"values,omitempty"`
	// Touched lists the fields whose message shows.
	Touched []string `json:"touched,omitempty"`
	// Assigned holds, for each id and $key the live updates assigned, the
	// latest line that assigned it, in first-assignment order: applied
	// after the document, they give the screen as the updates left it.
	Assigned []string `json:"assigned,omitempty"`
}

// screenRecordLocked returns sc as the store keeps it; sc.mu is held.
func (s *Part) screenRecordLocked(sc *liveScreen) (store.Screen, error) {
	st := savedState{
		OwnerKind: sc.owner.Kind, OwnerName: sc.owner.Name,
		Tools: sc.opts.Tools, Assets: sc.opts.Assets,
		Secret:  slices.Sorted(maps.Keys(sc.secret)),
		Touched: slices.Sorted(maps.Keys(sc.touched)),
	}
	secret := s.secretKeysLocked(sc)
	for _, k := range sc.doc.StateKeys() {
		if secret[k] {
			continue
		}
		if v, ok := sc.doc.State(k); ok {
			if st.Values == nil {
				st.Values = map[string]any{}
			}
			st.Values[k] = v
		}
	}
	for _, k := range sc.order {
		st.Assigned = append(st.Assigned, sc.latest[k])
	}
	b, err := json.Marshal(st)
	if err != nil {
		return store.Screen{}, storeUnavailable(fmt.Sprintf("the state of the screen (%v)", err))
	}
	return store.Screen{
		ID: sc.id, OwnerID: sc.owner.ID, Document: sc.stream.String(), Version: sc.version,
		State: b, CreatedAt: sc.created, UpdatedAt: s.Now(),
		SameDocument: sc.stream.Len() == sc.storedDoc,
	}, nil
}

// saveScreen writes sc's document and state to the store, naming the
// version this copy last read or wrote. A screen deleted meanwhile is not
// written. When another node saved the screen since, the copy is read
// again and the error is screen_version_conflict; the other errors are
// store_unavailable. Both are *tool.Error.
func (s *Part) saveScreen(ctx context.Context, sc *liveScreen) error {
	return s.change(ctx, sc, nil)
}

// saveScreenLogged saves sc where no caller waits for the outcome: a
// failure is logged, and the next save of the screen writes the change.
func (s *Part) saveScreenLogged(ctx context.Context, sc *liveScreen) {
	if err := s.saveScreen(ctx, sc); err != nil {
		s.Log.Warn("a screen change was not saved", "screen", sc.id, "err", err)
	}
}

// restoreScreens lists again the screens the store keeps, each with its
// state, its live feed and the presses waiting on it, and registers their
// fields as controls, which find their proposals again.
func (s *Part) restoreScreens(ctx context.Context) error {
	recs, err := s.Store.Screens.ListScreens(ctx, "")
	if err != nil {
		return fmt.Errorf("screens: the saved screens could not be read: %w; check the store and start again", err)
	}
	restored := make([]*liveScreen, 0, len(recs))
	for _, rec := range recs {
		ld, err := s.Store.Screens.LoadScreen(ctx, rec.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue // removed since the listing
		}
		if err != nil {
			return fmt.Errorf("screens: screen %s could not be read: %w; check the store and start again", rec.ID, err)
		}
		sc, err := s.restoreScreen(ctx, ld)
		if err != nil {
			return err
		}
		if sc != nil {
			restored = append(restored, sc)
		}
	}
	s.scrMu.Lock()
	for _, sc := range restored {
		s.screens[sc.id] = sc
	}
	s.scrMu.Unlock()
	for _, sc := range restored {
		s.syncScreenControls(sc)
	}
	return nil
}

// restoreScreen rebuilds one saved screen with its live feed and the
// presses waiting on it. A screen whose state is damaged is logged and left
// out (nil, nil).
func (s *Part) restoreScreen(ctx context.Context, ld store.LoadedScreen) (*liveScreen, error) {
	rec := ld.Screen
	var st savedState
	if len(rec.State) > 0 {
		if err := json.Unmarshal(rec.State, &st); err != nil {
			s.Log.Error("a saved screen is damaged and is not shown", "screen", rec.ID, "err", err)
			return nil, nil
		}
	}
	owner := store.Principal{ID: rec.OwnerID, Kind: st.OwnerKind, Name: st.OwnerName}
	if p, err := s.Store.Principal(ctx, rec.OwnerID); err == nil {
		owner = p
	}
	sc := &liveScreen{
		id:      rec.ID,
		owner:   owner,
		created: rec.CreatedAt,
		secret:  map[string]bool{},
		opts:    screen.Options{Tools: st.Tools, Assets: st.Assets},
		touched: map[string]bool{},
		presses: map[string]*pendingPress{},
		latest:  map[string]string{},
		changed: make(chan struct{}),
		version: rec.Version,
		saved:   rec.Version,
		seq:     rec.LastSeq,
	}
	for _, k := range st.Secret {
		sc.secret[k] = true
	}
	for _, id := range st.Touched {
		sc.touched[id] = true
	}
	sc.stream.WriteString(rec.Document)
	sc.storedDoc = len(rec.Document)
	sc.parser = screen.NewParser(sc.opts)
	_, _ = sc.parser.WriteString(rec.Document)
	sc.doc = sc.parser.End()
	if len(st.Assigned) > 0 {
		// The lines went in as updates, each applied whole; applied
		// together they normally apply again. When they do not, each
		// line that still fits is applied on its own.
		if res, err := sc.parser.Update(strings.Join(st.Assigned, "\n")); err != nil || !res.Applied {
			for _, line := range st.Assigned {
				_, _ = sc.parser.Update(line)
			}
		}
		sc.noteAssignedLocked(strings.Join(st.Assigned, "\n"))
	}
	for k, v := range st.Values {
		if err := sc.doc.SetState(k, v); err != nil {
			s.Log.Warn("a saved screen value no longer fits its screen", "screen", sc.id, "key", k)
		}
	}
	for _, u := range ld.Updates {
		sc.updates = append(sc.updates, newLiveUpdate(u.Seq, u.Text))
	}
	for _, p := range ld.Pending {
		pp, ok := pressFromStore(p)
		if !ok {
			s.Log.Warn("a saved press is damaged and no longer waits", "screen", sc.id, "press", p.ID)
			continue
		}
		sc.presses[p.ID] = pp
	}
	return sc, nil
}

// pressFromStore returns the press p as it waits, not yet prepared; false
// when its params are damaged.
func pressFromStore(p store.ScreenPending) (*pendingPress, bool) {
	pp := &pendingPress{button: p.Button, tool: p.Tool, sentence: p.Sentence, created: p.CreatedAt, params: map[string]any{}}
	if len(p.Params) > 0 {
		if err := json.Unmarshal(p.Params, &pp.params); err != nil {
			return nil, false
		}
	}
	return pp, true
}

// wordPressAgain is what a person sees when a press restored after a
// restart can no longer run as they were asked.
const wordPressAgain = "This action can no longer run as it was asked. Press the button again."

// preparePress prepares again a press restored from the store: the
// button must still call the same tool, the params must still pass its
// schema, and the sentence must read as the person was asked. Otherwise it
// returns nil and what to tell the person.
func (s *Part) preparePress(ctx context.Context, sc *liveScreen, pp *pendingPress) (*confirm.Pending, string) {
	sc.mu.Lock()
	m := sc.doc.Mutation(pp.button)
	var display map[string]string
	if m != nil {
		display = s.shownParams(pp.tool, pp.params)
	}
	sc.mu.Unlock()
	if m == nil || m.Tool != pp.tool {
		return nil, render.WordBlocked
	}
	pend, err := s.screenTools.Prepare(confirm.WithDisplay(ctx, display), pp.tool, maps.Clone(pp.params), nil)
	if err != nil {
		code := "tool_failed"
		if ce, ok := err.(*confirm.Error); ok {
			code = ce.Code
		}
		s.Log.Warn("a restored press could not be prepared again", "screen", sc.id, "tool", pp.tool, "code", code)
		return nil, wordPressAgain
	}
	if pend.Sentence() != pp.sentence {
		pend.Cancel()
		s.Log.Warn("a restored press reads differently now", "screen", sc.id, "tool", pp.tool)
		return nil, wordPressAgain
	}
	return pend, ""
}

// idemBegin looks up the idempotency key of scope, first in the cache,
// then in the store, where a new key is recorded before the request runs.
// A key the store holds in progress since before this server started was
// left by a process that stopped before answering: it runs again.
func (s *Part) idemBegin(ctx context.Context, scope, key string, fp [32]byte) (*idemEntry, idemState, *wire.Error) {
	// Keys hold no space, so scope and key stay apart.
	full := scope + " " + key
	now := s.Now()
	e, state := s.idem.begin(full, fp, now)
	if state != idemNew {
		return e, state, nil
	}
	ctx = context.WithoutCancel(ctx)
	rec := store.Idempotency{Key: full, Fingerprint: fp[:], CreatedAt: now, ExpiresAt: now.Add(s.idem.ttl)}
	got, created, err := s.Store.Screens.BeginIdempotent(ctx, rec, now)
	// A key begun before this process started and never finished was
	// left by a process that died, when this process is the store's only
	// user. Where nodes share the store, another node may still be running
	// it: it is left to finish or expire, never run twice.
	if err == nil && !created && !got.Done && got.CreatedAt.Before(s.Started) && !s.SharedBus {
		if err = s.Store.Screens.ForgetIdempotent(ctx, full); err == nil {
			got, created, err = s.Store.Screens.BeginIdempotent(ctx, rec, now)
		}
	}
	if err != nil {
		s.idem.finish(e, 0, nil, false)
		s.Log.Error("an idempotency key could not be recorded", "err", err)
		return nil, 0, wire.New(wire.StoreUnavailable, "the idempotency key could not be recorded, so nothing ran; try again when the store is reachable")
	}
	switch {
	case created:
		return e, idemNew, nil
	case !bytes.Equal(got.Fingerprint, fp[:]):
		s.idem.finish(e, 0, nil, false)
		return e, idemConflict, nil
	case !got.Done:
		s.idem.finish(e, 0, nil, false)
		return e, idemInProgress, nil
	}
	s.idem.finish(e, got.Status, got.Body, true)
	return e, idemReplay, nil
}

// idemFinish settles e with its answer in the cache and the store, or
// forgets it in both when keep is false, so a retry runs again.
func (s *Part) idemFinish(ctx context.Context, e *idemEntry, status int, body []byte, keep bool) {
	s.idem.finish(e, status, body, keep)
	ctx = context.WithoutCancel(ctx)
	var err error
	if keep {
		err = s.Store.Screens.FinishIdempotent(ctx, e.key, status, body)
	} else {
		err = s.Store.Screens.ForgetIdempotent(ctx, e.key)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.Log.Error("the answer to an idempotency key could not be saved", "err", err)
	}
}

package screens

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// wordFailed is what a person sees when a press fails: plain text, never
// the stream's.
const wordFailed = "The action failed. Nothing was changed that you can see; try again."

func (s *Part) routesScreensWeb(mux *host.Mux) {
	mux.Handle("GET /screens", s.WebPage(s.handleScreensPage))
	mux.Handle("GET /screens/{id}", s.WebPage(s.handleScreenPage))
	mux.Handle("POST /screens/{id}/state", s.WebPage(s.handleScreenState))
	mux.Handle("POST /screens/{id}/press", s.WebPage(s.handleScreenPress))
	mux.Handle("POST /screens/{id}/confirm", s.WebPage(s.handleScreenConfirm))
	mux.Handle("POST /screens/{id}/cancel", s.WebPage(s.handleScreenCancel))
	mux.Handle("POST /web/screens/{id}/presses/{press}/{decision}", s.WebPage(s.handleInboxPress))
	mux.Handle("GET /screen-pictures/{name}", s.WebPage(s.handlePicture))
}

// screenListItem is one row of the screens page.
type screenListItem struct {
	ID, Title, Owner, Created string
	Components                int
	Ended                     bool
}

func (s *Part) handleScreensPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	names := s.PrincipalNames(r.Context())
	var items []screenListItem
	for _, sc := range s.visibleScreens(r.Context(), *pg.Principal) {
		sc.mu.Lock()
		title := render.Title(sc.doc)
		n := len(sc.doc.Nodes())
		ended := sc.doc.Ended()
		sc.mu.Unlock()
		owner := sc.owner.Name
		if n, ok := names[sc.owner.ID]; ok {
			owner = n
		}
		items = append(items, screenListItem{ID: sc.id, Title: title, Owner: owner, Created: sc.created.UTC().Format(time.RFC3339), Components: n, Ended: ended})
	}
	pg.Title = "Screens"
	pg.Data = map[string]any{"Screens": items}
	if r.URL.Query().Get("partial") == "1" {
		s.Web.RenderPartial(w, "screens", "screen-list", pg)
		return
	}
	s.Web.Render(w, http.StatusOK, "screens", pg)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (s *Part) handleScreenPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	sc, ok := s.screenFor(r.Context(), *pg.Principal, r.PathValue("id"))
	if !ok {
		pg.Title = "Screen not found"
		pg.Data = &screenView{NotFound: true}
		s.Web.Render(w, http.StatusNotFound, "screen", pg)
		return
	}
	view := s.buildScreenView(r.Context(), sc, pg.CSRF)
	if id := r.URL.Query().Get("press"); id != "" {
		// A press filed from a view in an agent's host: the page opens the
		// runtime's dialog for it, only while the press matches the screen
		// the page shows, with what neither the app's sentence nor the
		// page's fields show.
		sc.mu.Lock()
		if pp, ok := sc.presses[id]; ok && !pressStaleLocked(sc, pp) {
			view.Press, view.PressSentence = id, s.pressQuestionLocked(sc, pp, true)
		}
		sc.mu.Unlock()
	}
	pg.Title = view.Title
	pg.Data = view
	if r.URL.Query().Get("partial") == "1" {
		s.Web.RenderPartial(w, "screen", "screen-region", pg)
		return
	}
	s.Web.Render(w, http.StatusOK, "screen", pg)
}

// screenView is what the screen template draws.
type screenView struct {
	ID, Title, Owner string
	Version          int64
	Ended            bool
	NotFound         bool
	// Newer holds the notice shown when the stream declared a newer format.
	Newer    string
	Root     *render.Node
	Rejected int
	// Marks is a JSON object mapping the element id of each field an
	// agent highlighted to the milliseconds its highlight has left.
	Marks string
	// Press and PressSentence name a press waiting for the person's
	// confirmation, which the page asks about when it opens, and what the
	// dialog asks (see pressQuestionLocked).
	Press, PressSentence string
}

// buildScreenView draws the document into views: under the screen's lock,
// then the proposals staged on its fields (which read the screen again
// through their handles, so after the lock is released).
func (s *Part) buildScreenView(ctx context.Context, sc *liveScreen, csrf string) *screenView {
	sc.mu.Lock()
	rv := render.Build(sc.doc, render.Options{
		Secret: s.secretKeysLocked(sc),
		Tool: func(name string) bool {
			_, ok := s.screenTools.Lookup(name)
			return ok
		},
		Picture: func(name string) template.URL {
			if !s.hasPicture(name) {
				return ""
			}
			return template.URL("/screen-pictures/" + url.PathEscape(name))
		},
		Message: func(n *screen.Node, key string) string {
			f := fieldInfo{id: n.ID, typ: n.Type, key: key, props: n.Props}
			if p := sc.problemLocked(f); p != nil && sc.touched[n.ID] {
				return s.screenMessages.Text(p)
			}
			return ""
		},
		OnPanic: func(n *screen.Node, r any) {
			s.Log.Error("a screen component failed to draw", "screen", sc.id, "component", n.ID, "type", n.Type, "panic", fmt.Sprint(r))
		},
	})
	revealTexts(rv.Root)
	v := &screenView{ID: sc.id, Owner: sc.owner.Name, Version: sc.version, Ended: rv.Ended, Title: host.RevealText(rv.Title), Newer: rv.Newer, Root: rv.Root, Rejected: rv.Rejected}
	if marks := markedFields(sc.marks, time.Now()); len(marks) > 0 {
		b, _ := json.Marshal(marks)
		v.Marks = string(b)
	}
	sc.mu.Unlock()
	if len(rv.Fields) > 0 {
		names := s.PrincipalNames(ctx)
		for _, nv := range rv.Fields {
			snap, ok := s.controls.Registry().Get(ctx, control.Identity{FormID: sc.id, ControlID: nv.ID})
			if !ok || snap.State.Staged == nil {
				continue
			}
			st := snap.State
			nv.Staged = &render.Staged{
				Value:    host.DisplayValue(st.StagedValue, st.StagedValueRedacted || st.ValueRedacted || nv.Secret),
				By:       fmt.Sprintf("%s (%s)", host.NameOr(names, st.Staged.Provenance.PrincipalID), st.Staged.Provenance.Source),
				Revision: strconv.FormatInt(st.Staged.Revision, 10),
				Stale:    st.Staged.Stale,
				FormID:   sc.id, ControlID: nv.ID, CSRF: csrf, Back: "/screens/" + sc.id,
			}
		}
	}
	return v
}

// whether they left it (so its message shows from then on). It answers with
// the field's message, in the runtime's words, or none.
func (s *Part) handleScreenState(w http.ResponseWriter, r *http.Request, pg host.Page) {
	sc, ok := s.screenFor(r.Context(), *pg.Principal, r.PathValue("id"))
	if !ok {
		host.WriteError(w, wire.NotFound, "no such screen is open for you")
		return
	}
	var req struct {
		Field   string `json:"field"`
		Value   any    `json:"value"`
		Touched bool   `json:"touched"`
	}
	if !host.DecodeJSON(w, r, 64<<10, &req) {
		return
	}
	var (
		msg    string
		redraw bool
		v      int64
		bad    *wire.Error
	)
	err := s.change(r.Context(), sc, func() error {
		var f *fieldInfo
		for _, fi := range sc.fieldsLocked() {
			if fi.id == req.Field {
				f = &fi
				break
			}
		}
		if f == nil {
			bad = wire.New(wire.NotFound, "the screen has no such field")
			return errNoChange
		}
		if err := checkFieldValue(f.typ, req.Value); err != nil {
			bad = wire.New(wire.InvalidRequest, err.Error())
			return errNoChange
		}
		if err := sc.doc.SetState(f.key, req.Value); err != nil {
			bad = wire.New(wire.InvalidRequest, err.Error())
			return errNoChange
		}
		if req.Touched {
			sc.touched[f.id] = true
		}
		msg = ""
		if p := sc.problemLocked(*f); sc.touched[f.id] && p != nil {
			msg = s.screenMessages.Text(p)
		}
		redraw = shownElsewhereLocked(sc.doc, f.id, f.key)
		v = sc.version + 1
		return nil
	})
	switch {
	case bad != nil:
		host.WriteAPIError(w, bad)
		return
	case isToolCode(err, "not_found"):
		host.WriteError(w, wire.NotFound, "the screen has no such field")
		return
	case isToolCode(err, codeVersionConflict):
		host.WriteAPIError(w, versionConflictError())
		return
	case err != nil:
		// The store refused: the page shows the entry, and the next save
		// of the screen writes it.
		s.Log.Warn("a screen change was not saved", "screen", sc.id, "err", err)
	}
	s.publishScreen(sc, map[string]any{"screen": sc.id, "version": v})
	host.WriteJSON(w, http.StatusOK, map[string]any{"message": msg, "invalid": msg != "", "version": v, "redraw": redraw})
}

// shownElsewhereLocked reports whether a component other than the field
// fieldID shows key, so the page that typed it must redraw; the screen's lock
// is held.
func shownElsewhereLocked(d *screen.Document, fieldID, key string) bool {
	for _, n := range d.Nodes() {
		if n.ID == fieldID {
			continue
		}
		for _, v := range n.Props {
			if ref, ok := v.(screen.StateRef); ok && string(ref) == key {
				return true
			}
		}
	}
	return false
}

// handleScreenPress runs a person's press of a governed Button: the fields
// its params read, then the tool and params against the registry, then the
// application's confirmation (answered with the sentence for the runtime's
// own dialog), and only then the handler.
func (s *Part) handleScreenPress(w http.ResponseWriter, r *http.Request, pg host.Page) {
	sc, ok := s.screenFor(r.Context(), *pg.Principal, r.PathValue("id"))
	if !ok {
		host.WriteError(w, wire.NotFound, "no such screen is open for you")
		return
	}
	var req struct {
		Button string `json:"button"`
	}
	if !host.DecodeJSON(w, r, 4<<10, &req) {
		return
	}
	if err := s.Routed(r.Context(), *pg.Principal, sc.owner.ID, ""); err != nil {
		host.WriteToolError(w, err)
		return
	}
	var (
		problems []confirm.FieldProblem
		params   map[string]any
		display  map[string]string
		toolName string
	)
	// read takes what the press needs from the screen; sc.mu is held.
	read := func() error {
		m := pressableLocked(sc, req.Button)
		if m == nil {
			return errNoChange
		}
		problems = problems[:0]
		for _, fn := range sc.doc.FieldsReadBy(m) {
			f := fieldInfo{id: fn.ID, typ: fn.Type, key: sc.doc.Edits(fn.ID), app: fn.App, props: fn.Props}
			p := sc.problemLocked(f)
			problems = append(problems, confirm.FieldProblem{FieldID: fn.ID, Problem: p})
			if p != nil {
				sc.touched[fn.ID] = true
			}
		}
		params = pressParamsLocked(sc, m)
		display = s.shownParams(m.Tool, params)
		toolName = m.Tool
		return nil
	}
	var err error
	if s.SharedBus {
		// Another node may have changed the screen: the press is saved
		// first, naming the version this copy read, so it reads the
		// fields as the store holds them, never an older copy's.
		err = s.change(r.Context(), sc, read)
	} else {
		sc.mu.Lock()
		if err = read(); err == nil {
			sc.bumpLocked()
		}
		sc.mu.Unlock()
		if err == nil && len(problems) > 0 {
			// The fields the press read now show their messages.
			s.saveScreenLogged(r.Context(), sc)
		}
	}
	switch {
	case errors.Is(err, errNoChange) || isToolCode(err, "not_found"):
		host.WriteJSON(w, http.StatusOK, map[string]any{"status": "refused", "message": render.WordBlocked})
		return
	case err != nil:
		writeChangeError(w, err)
		return
	}

	pend, err := s.screenTools.Prepare(confirm.WithDisplay(r.Context(), display), toolName, params, problems)
	if err == nil {
		if e := s.checkAccess(*pg.Principal, toolName); e != nil {
			pend.Cancel()
			err = &confirm.Error{Code: confirm.CodeUnknownTool, Tool: toolName, Message: e.Message}
		}
	}
	if err != nil {
		ce, _ := err.(*confirm.Error)
		if ce != nil && ce.Code == confirm.CodeMutationBlocked {
			s.publishScreen(sc, map[string]any{"screen": sc.id})
			host.WriteJSON(w, http.StatusOK, map[string]any{"status": "blocked", "focus": ce.Focus})
			return
		}
		code := "tool_failed"
		if ce != nil {
			code = ce.Code
		}
		s.Log.Warn("screen press blocked", "screen", sc.id, "button", req.Button, "tool", toolName, "code", code)
		host.WriteJSON(w, http.StatusOK, map[string]any{"status": "refused", "message": render.WordBlocked})
		return
	}
	if !pend.NeedsConfirmation() && !s.mustAskPress(sc, req.Button, toolName, params) {
		s.finishPress(r.Context(), w, sc, req.Button, pend)
		return
	}
	id, err := s.addPress(r.Context(), sc, req.Button, pend)
	if err != nil {
		pend.Cancel()
		host.WriteToolError(w, err)
		return
	}
	// "sentence" is what the runtime's dialog shows: the app's sentence
	// and the values neither it nor the page's fields show.
	sc.mu.Lock()
	question := pend.Sentence()
	if pp, ok := sc.presses[id]; ok {
		question = s.pressQuestionLocked(sc, pp, true)
	}
	sc.mu.Unlock()
	host.WriteJSON(w, http.StatusOK, map[string]any{"status": "confirm", "press": id, "sentence": question})
}

// addPress saves a press that waits for a person's confirmation and keeps
// it, and returns its id; past the bound, the oldest waiting press is
// cancelled first. The error, a *tool.Error, is store_unavailable when
// the store refused the press.
func (s *Part) addPress(ctx context.Context, sc *liveScreen, button string, pend *confirm.Pending) (string, error) {
	ctx = context.WithoutCancel(ctx)
	pp := &pendingPress{button: button, tool: pend.Tool(), sentence: pend.Sentence(), params: pend.Params(), created: s.Now(), pending: pend}
	if t, ok := s.screenTools.Lookup(pp.tool); ok {
		for _, name := range t.Secret {
			delete(pp.params, name)
		}
	}
	params, err := json.Marshal(pp.params)
	if err != nil {
		return "", tool.Errorf("invalid_params", "the params have no JSON form: %v", err)
	}
	id := newPressID()
	sc.feedMu.Lock()
	defer sc.feedMu.Unlock()
	sc.mu.Lock()
	var oldest string
	if len(sc.presses) >= maxPendingPresses {
		for k, old := range sc.presses {
			if oldest == "" || old.created.Before(sc.presses[oldest].created) {
				oldest = k
			}
		}
	}
	sc.mu.Unlock()
	if oldest != "" {
		if _, err := s.Store.Screens.TakeScreenPending(ctx, sc.id, oldest); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.Log.Error("a press waiting for confirmation could not be dropped", "screen", sc.id, "err", err)
			return "", storeUnavailable("the press")
		}
		if old := sc.takePress(oldest); old != nil {
			old.cancel()
		}
	}
	rec := store.ScreenPending{ScreenID: sc.id, ID: id, Button: button, Tool: pp.tool, Params: params, Sentence: pp.sentence, CreatedAt: pp.created}
	if err := s.Store.Screens.AddScreenPending(ctx, rec); err != nil {
		s.Log.Error("a press waiting for confirmation could not be saved", "screen", sc.id, "err", err)
		return "", storeUnavailable("the press")
	}
	sc.mu.Lock()
	sc.presses[id] = pp
	sc.mu.Unlock()
	s.publishScreen(sc, map[string]any{"screen": sc.id, "press": true})
	return id, nil
}

func newPressID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// takePress removes and returns the press id waiting on sc.
func (sc *liveScreen) takePress(id string) *pendingPress {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	pp := sc.presses[id]
	delete(sc.presses, id)
	return pp
}

// handleScreenConfirm is the person's Confirm of a press on the screen's
// page: the tool runs once with the values the person confirmed.
func (s *Part) handleScreenConfirm(w http.ResponseWriter, r *http.Request, pg host.Page) {
	s.handlePressAnswer(w, r, pg, true)
}

// handleScreenCancel is the person's Cancel: nothing runs.
func (s *Part) handleScreenCancel(w http.ResponseWriter, r *http.Request, pg host.Page) {
	s.handlePressAnswer(w, r, pg, false)
}

// handlePressAnswer answers the press named in the JSON body of r on the
// screen of r's path.
func (s *Part) handlePressAnswer(w http.ResponseWriter, r *http.Request, pg host.Page, confirm bool) {
	var req struct {
		Press string `json:"press"`
	}
	if !host.DecodeJSON(w, r, 4<<10, &req) {
		return
	}
	// A press on an agent's screen is decided by the people the screen's
	// decisions are routed to, as in the inbox.
	if sc, ok := s.screenFor(r.Context(), *pg.Principal, r.PathValue("id")); ok {
		if err := s.Routed(r.Context(), *pg.Principal, sc.owner.ID, ""); err != nil {
			host.WriteToolError(w, err)
			return
		}
	}
	res, err := s.AnswerPress(r.Context(), *pg.Principal, r.PathValue("id"), req.Press, confirm)
	if err != nil {
		host.WriteToolError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, res)
}

// PressAnswer is what became of a person's answer to a press waiting for
// confirmation: Status is done (the tool ran), failed (it ran and
// failed), refused (it could not run; Message says why) or cancelled.
type PressAnswer struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// AnswerPress confirms (the tool runs once) or declines the press waiting
// on the screen id, as person p, and records the outcome of a press filed
// from a view for inbox_wait. A press no longer waiting is not_found.
func (s *Part) AnswerPress(ctx context.Context, p store.Principal, id, press string, confirm bool) (PressAnswer, error) {
	sc, pp, err := s.takePress(ctx, p, id, press)
	if err != nil {
		return PressAnswer{}, err
	}
	var res PressAnswer
	if confirm {
		res = s.confirmPress(ctx, sc, pp)
	} else {
		pp.cancel()
		res = PressAnswer{Status: "cancelled"}
	}
	status := ""
	switch res.Status {
	case "done":
		status = PressConfirmed
	case "failed":
		status = PressFailed
	case "cancelled":
		status = PressDeclined
	}
	if status != "" && s.decideViewPress(sc.id, press, status, p.ID) {
		s.publishScreen(sc, map[string]any{"screen": sc.id, "decided": press})
	}
	return res, nil
}

// confirmPress runs a taken press, unless the screen changed under it.
func (s *Part) confirmPress(ctx context.Context, sc *liveScreen, pp *pendingPress) PressAnswer {
	sc.mu.RLock()
	stale := pressStaleLocked(sc, pp)
	sc.mu.RUnlock()
	if stale {
		pp.cancel()
		return PressAnswer{Status: "refused", Message: wordScreenChanged}
	}
	pend := pp.pending
	if pend == nil {
		var refusal string
		if pend, refusal = s.preparePress(ctx, sc, pp); pend == nil {
			return PressAnswer{Status: "refused", Message: refusal}
		}
	}
	return s.runPress(ctx, sc, pp.button, pend)
}

// pressOf takes the press named in r's JSON body on the screen of r's
// path, writing the refusal when it cannot.
func (s *Part) pressOf(w http.ResponseWriter, r *http.Request, pg host.Page) (*liveScreen, *pendingPress) {
	var req struct {
		Press string `json:"press"`
	}
	if !host.DecodeJSON(w, r, 4<<10, &req) {
		return nil, nil
	}
	sc, pp, err := s.takePress(r.Context(), *pg.Principal, r.PathValue("id"), req.Press)
	if err != nil {
		host.WriteToolError(w, err)
		return nil, nil
	}
	return sc, pp
}

// takePress takes the press waiting on the screen id for p's answer. The
// store decides who takes a press: of two answers, one finds it, on
// whichever node each is given.
func (s *Part) takePress(ctx context.Context, p store.Principal, id, press string) (*liveScreen, *pendingPress, error) {
	sc, ok := s.screenFor(ctx, p, id)
	if !ok {
		return nil, nil, tool.Errorf(string(wire.NotFound), "no such screen is open for you")
	}
	rec, err := s.Store.Screens.TakeScreenPending(context.WithoutCancel(ctx), sc.id, press)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if pp := sc.takePress(press); pp != nil {
				pp.cancel()
			}
			return nil, nil, tool.Errorf(string(wire.NotFound), "that press is no longer waiting; press the button again")
		}
		s.Log.Error("a press waiting for confirmation could not be taken", "screen", sc.id, "err", err)
		return nil, nil, storeUnavailable("the answer")
	}
	sc.mu.RLock()
	stale := rec.ScreenVersion != sc.saved
	sc.mu.RUnlock()
	if stale {
		// Another node changed the screen: the press is prepared against
		// the screen as the store holds it.
		if err := s.reload(ctx, sc); err != nil {
			s.Log.Error("a screen changed on another node could not be read again", "screen", sc.id, "err", err)
			return nil, nil, storeUnavailable("the answer")
		}
	}
	pp := sc.takePress(press)
	if pp == nil {
		// The press was made on another node, or this copy was read again
		// (which drops the presses no longer waiting): it is prepared
		// again from what the store kept.
		var ok bool
		if pp, ok = pressFromStore(rec); !ok {
			s.Log.Warn("a saved press is damaged and no longer waits", "screen", sc.id, "press", rec.ID)
			return nil, nil, tool.Errorf(string(wire.NotFound), "that press is no longer waiting; press the button again")
		}
	}
	s.publishScreen(sc, map[string]any{"screen": sc.id, "press": true})
	return sc, pp, nil
}

// finishPress runs the handler once and writes what became of it.
func (s *Part) finishPress(ctx context.Context, w http.ResponseWriter, sc *liveScreen, button string, pend *confirm.Pending) {
	host.WriteJSON(w, http.StatusOK, s.runPress(ctx, sc, button, pend))
}

// runPress runs the handler once and applies its update to the screen.
func (s *Part) runPress(ctx context.Context, sc *liveScreen, button string, pend *confirm.Pending) PressAnswer {
	res, err := pend.Confirm(ctx)
	if err != nil {
		code := "tool_failed"
		if ce, ok := err.(*confirm.Error); ok {
			code = ce.Code
		}
		s.Log.Warn("screen press failed", "screen", sc.id, "button", button, "tool", pend.Tool(), "code", code)
		return PressAnswer{Status: "failed", Message: wordFailed}
	}
	if res.Update != "" {
		if _, err := s.applyUpdate(ctx, sc, res.Update); err != nil {
			s.Log.Warn("screen update from a press failed", "screen", sc.id, "tool", pend.Tool(), "err", err)
		}
	}
	return PressAnswer{Status: "done"}
}

// markedFields returns the element id of each field whose highlight is
// still on at now, with the milliseconds it has left.
func markedFields(marks map[string]time.Time, now time.Time) map[string]int64 {
	var out map[string]int64
	for id, until := range marks {
		if left := until.Sub(now).Milliseconds(); left > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out["n-"+id] = left
		}
	}
	return out
}

// revealTexts writes every character of the text n and its children
// show that a person could not see, or that reorders the text around it
// (bidirectional controls, zero-width and other format characters), as a
// visible escape such as ⟨U+202E⟩: a screen's stream is an agent's, and
// the page must read as what it says. Field values are left as they are,
// since the person edits them and the tool gets them.
func revealTexts(n *render.Node) {
	if n == nil {
		return
	}
	for _, p := range []*string{&n.Text, &n.Title, &n.Label, &n.Detail, &n.Trailing, &n.Placeholder, &n.Message} {
		*p = host.RevealText(*p)
	}
	for i := range n.Columns {
		n.Columns[i] = host.RevealText(n.Columns[i])
	}
	for i := range n.Cells {
		n.Cells[i].Text = host.RevealText(n.Cells[i].Text)
	}
	for _, c := range n.Children {
		revealTexts(c)
	}
}

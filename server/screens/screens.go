package screens

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/field"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Limits of the screens part.
const (
	// maxScreenChars is the longest stream show_screen accepts, in
	// characters.
	maxScreenChars = 200_000
	// maxScreenBytes bounds a stream posted to /v1/screens.
	maxScreenBytes = 4 << 20
	// maxPendingPresses bounds the presses waiting for a person's answer on
	// one screen. (The store bounds the screens one principal keeps to
	// store.ScreensPerOwner, closing the oldest.)
	maxPendingPresses = store.ScreenPendingLimit
	// keptUpdates is how many live updates a screen keeps for followers
	// that reconnect; older ones are replaced by one catch-up update.
	keptUpdates = store.ScreenUpdatesKept
)

// Access says who may run a screen tool.
type Access string

// Access rules of a screen tool.
const (
	// AccessSignedIn admits any authenticated principal (the default).
	AccessSignedIn Access = "signed-in"
	// AccessPeople admits only people (human principals).
	AccessPeople Access = "people"
	// AccessPublic admits requests without credentials too.
	AccessPublic Access = "public"
)

// Tool is an application's backend action that a screen's governed
// Button may call: the tool (name, params schema, secret params, the
// optional confirmation in the application's words, and the handler) and who
// may run it.
//
// A handler that finds what the params name missing, or not the caller's,
// returns a *tool.Error with code not_found; any other *tool.Error code is
// the tool's own conflict (409); any other error is tool_failed.
type Tool struct {
	confirm.Tool
	// Access says who may run the tool; empty means AccessSignedIn.
	Access Access
	// Currency maps each param that is an amount of money to the ISO 4217
	// code of the currency the handler reads it in ({"amount": "USD"}).
	// The confirmation sentence shows such a param as money ("$42.50");
	// any other number shows as the number. A screen never decides the
	// currency of a sentence, whatever currency it shows the amount in.
	Currency map[string]string
}

// Part is the screens part of the server: the screens shown to people,
// their documents and state, the tools their buttons call, and the
// idempotency keys of /api/mutate. It serves /v1/screens, /api/mutate,
// /api/live, show_screen and the screen view's tools, and the screen pages.
type Part struct {
	Deps
	// controls holds the screens' fields as private forms.
	controls Controls

	screenTools *confirm.Registry
	// screenMessages are the sentences shown for field problems.
	screenMessages field.Messages

	scrMu   sync.Mutex
	screens map[string]*liveScreen
	// closes counts the screens this node saw close, here or on another
	// node; a screen read from the store while it grew is looked up once
	// more before it is served (see getScreen). scrMu guards it.
	closes     uint64
	toolAccess map[string]Access
	// toolCurrency holds each tool's Currency; scrMu guards it.
	toolCurrency map[string]map[string]string
	generator    Generator
	pictures     map[string]picture

	idem *idemCache
	// viewPresses remembers what became of presses filed from views.
	viewPresses viewPresses

	// stopFollowing ends following other nodes' changes (see nodes.go).
	stopFollowing func()
}

// New builds the screens part on d, with the screens' fields held as
// private forms of d.Controls, and registers its tools.
func New(ctx context.Context, d Deps) (*Part, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	s := &Part{
		Deps:         d,
		controls:     d.Controls,
		screenTools:  &confirm.Registry{},
		screens:      map[string]*liveScreen{},
		toolAccess:   map[string]Access{},
		toolCurrency: map[string]map[string]string{},
		pictures:     map[string]picture{},
		idem:         newIdemCache(10_000, 24*time.Hour),
	}
	if err := s.Web.AddPages(templateFS, "templates/screens.html"); err != nil {
		return nil, err
	}
	// A screen is drawn by the renderer shared with the view.
	if err := s.Web.AddPages(templateFS, "templates/screen.html", render.Template); err != nil {
		return nil, err
	}
	if err := s.Tools.Register(s.showScreenTool()); err != nil {
		return nil, err
	}
	if s.Config.DataDir != "" {
		if err := s.loadToolsFile(filepath.Join(s.Config.DataDir, "tools.json")); err != nil {
			return nil, err
		}
	}
	if err := s.restoreScreens(ctx); err != nil {
		return nil, err
	}
	s.followOtherNodes()
	return s, nil
}

//go:embed templates/*.html
var templateFS embed.FS

// Name names the part.
func (s *Part) Name() string { return "screens" }

// Close ends every live screen's feed. The store keeps the screens, so
// the next start shows them again.
func (s *Part) Close() {
	if s.stopFollowing != nil {
		s.stopFollowing()
	}
	s.scrMu.Lock()
	all := make([]*liveScreen, 0, len(s.screens))
	for _, sc := range s.screens {
		all = append(all, sc)
	}
	s.screens = map[string]*liveScreen{}
	s.scrMu.Unlock()
	for _, sc := range all {
		sc.close()
	}
}

// Routes registers the part's routes and pages on mux.
func (s *Part) Routes(mux *host.Mux) {
	mux.Handle("POST /v1/screens", s.Authed(http.HandlerFunc(s.handleScreenCreate)))
	mux.Handle("GET /v1/screens", s.Authed(http.HandlerFunc(s.handleScreenList)))
	mux.Handle("GET /v1/screens/{id}", s.Authed(http.HandlerFunc(s.handleScreenGet)))
	mux.Handle("DELETE /v1/screens/{id}", s.Authed(http.HandlerFunc(s.handleScreenDelete)))
	mux.Handle("POST /v1/screens/{id}/updates", s.Authed(http.HandlerFunc(s.handleScreenUpdate)))
	mux.HandleFunc("POST /api/mutate", s.handleMutate)
	mux.Handle("POST /api/generate", s.Authed(http.HandlerFunc(s.handleGenerate)))
	mux.Handle("GET /api/live", s.Authed(http.HandlerFunc(s.handleLive)))
	s.routesScreensWeb(mux)
}

// RegisterTool adds a tool that screens' governed Buttons may call.
// Its name follows the Omni IR tool-name rule and is compared byte for byte.
// The tool is also offered over MCP for screen views, with
// _meta.ui.visibility ["app"]; every call is checked on the server like a
// press (schema, caller, confirmation) before anything runs.
func (s *Part) RegisterTool(t Tool) error {
	switch t.Access {
	case "":
		t.Access = AccessSignedIn
	case AccessSignedIn, AccessPeople, AccessPublic:
	default:
		return &confirm.Error{Code: confirm.CodeInvalidTool, Tool: t.Name, Message: fmt.Sprintf("access %q is not one of signed-in, people, public", t.Access)}
	}
	if err := checkCurrency(t); err != nil {
		return err
	}
	if err := s.screenTools.Register(t.Tool); err != nil {
		return err
	}
	if err := s.Tools.Register(s.viewTool(t.Tool)); err != nil {
		s.screenTools.Remove(t.Name)
		return fmt.Errorf("tool %q can't be offered over MCP: %w", t.Name, err)
	}
	s.scrMu.Lock()
	s.toolAccess[t.Name] = t.Access
	s.toolCurrency[t.Name] = maps.Clone(t.Currency)
	s.scrMu.Unlock()
	if err := s.Tools.Replace(s.showScreenTool()); err != nil {
		s.Log.Warn("show_screen's description could not be refreshed", "err", err)
	}
	return nil
}

// ToolNames returns the names of the registered screen tools.
func (s *Part) ToolNames() []string { return s.screenTools.Names() }

func (s *Part) accessOf(name string) Access {
	s.scrMu.Lock()
	defer s.scrMu.Unlock()
	if a, ok := s.toolAccess[name]; ok {
		return a
	}
	return AccessSignedIn
}

// screenOptions are what the server allows in a screen.
func (s *Part) screenOptions() screen.Options {
	s.scrMu.Lock()
	assets := make([]string, 0, len(s.pictures))
	for name := range s.pictures {
		assets = append(assets, name)
	}
	s.scrMu.Unlock()
	slices.Sort(assets)
	return screen.Options{Tools: s.screenTools.Names(), Assets: assets}
}

// picture is one entry of the asset registry.
type picture struct {
	data        []byte
	contentType string
}

// maxPictureBytes bounds one registered picture.
const maxPictureBytes = 2 << 20

// RegisterPicture adds a picture to the asset registry under name
// (lowercase letters, digits and hyphens, at most 64 characters), so screens
// may show it with Image("name", alt=…). contentType is image/png,
// image/jpeg, image/gif, image/webp or image/svg+xml. Pictures are served
// from this server only; a stream can never name a location.
func (s *Part) RegisterPicture(name string, data []byte, contentType string) error {
	if !validPictureName(name) {
		return fmt.Errorf("picture name %q must be 1 to 64 lowercase letters, digits and hyphens", name)
	}
	switch contentType {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml":
	default:
		return fmt.Errorf("picture %q: content type %q is not a picture type assent serves", name, contentType)
	}
	if len(data) == 0 || len(data) > maxPictureBytes {
		return fmt.Errorf("picture %q must be 1 byte to %d bytes", name, maxPictureBytes)
	}
	s.scrMu.Lock()
	s.pictures[name] = picture{data: slices.Clone(data), contentType: contentType}
	s.scrMu.Unlock()
	return nil
}

func validPictureName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (s *Part) hasPicture(name string) bool {
	s.scrMu.Lock()
	defer s.scrMu.Unlock()
	_, ok := s.pictures[name]
	return ok
}

// handlePicture serves a registered picture to signed-in people.
func (s *Part) handlePicture(w http.ResponseWriter, r *http.Request, pg host.Page) {
	s.scrMu.Lock()
	p, ok := s.pictures[r.PathValue("name")]
	s.scrMu.Unlock()
	if !ok {
		host.WriteError(w, wire.NotFound, "no picture of that name is registered; use a name from the app's asset registry")
		return
	}
	h := w.Header()
	h.Set("Content-Type", p.contentType)
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	w.Write(p.data)
}

// Options are an application's choices for one screen, never the
// stream's.
type Options struct {
	// Secret lists $keys (with the $) whose values are secret: their fields
	// are secret controls and their values are never shown to agents.
	Secret []string
}

// liveScreen is one screen: its parser and document, the person's field
// state, presses waiting for confirmation, and its live feed.
type liveScreen struct {
	id      string
	owner   store.Principal
	created time.Time
	secret  map[string]bool // $keys whose values are secret
	// opts are what the screen's stream may use, as allowed when it was
	// shown; a restored screen is read again with them.
	opts screen.Options

	mu sync.RWMutex
	// stream is the text written before the stream ended: the document
	// the store keeps.
	stream strings.Builder
	// storedDoc is the length of the stream the store holds. The stream
	// only grows, except when read again from the store, so a stream of
	// that length is the stored document and a save leaves it out.
	storedDoc int
	parser    *screen.Parser
	doc       *screen.Document
	// version grows with every change of this copy; saved is the version
	// the store held when this copy last read or wrote it, which a save
	// names so that it never overwrites another node's newer write.
	version int64
	saved   int64
	// saveMu serializes the saves of the screen and its reading again
	// from the store, so a change is applied and saved as one step.
	saveMu  sync.Mutex
	touched map[string]bool // fields whose message shows
	presses map[string]*pendingPress
	closed  bool
	// marks holds the fields an agent highlighted, with the time each
	// highlight ends, so a page opened or redrawn meanwhile shows it.
	marks map[string]time.Time
	// syncMu serializes the registration of the fields as controls.
	syncMu sync.Mutex
	// fields is the signature of the fields registered as controls.
	fields         string
	removeControls func()

	// The live feed: updates applied after the stream ended, numbered
	// from 1.
	seq     int64
	updates []liveUpdate
	latest  map[string]string // id or $key → the latest update line that assigned it
	order   []string          // keys of latest, in first-assignment order
	changed chan struct{}     // closed and replaced at every change
	// feedMu orders live updates, so the feed's sequence numbers, handed
	// out by the store, follow the order the updates were applied in.
	feedMu sync.Mutex
}

type liveUpdate struct {
	Seq  int64  `json:"seq"`
	Text string `json:"text"`
	// frame is the update's server-sent event, written once for every
	// follower.
	frame []byte
	// local is set on an update numbered by this node, because the store
	// did not record it or had given its number to another update.
	local bool
}

// newLiveUpdate returns the update seq with its event frame.
func newLiveUpdate(seq int64, text string) liveUpdate {
	u := liveUpdate{Seq: seq, Text: text}
	b, _ := json.Marshal(u)
	u.frame = fmt.Appendf(nil, "event: update\ndata: %s\n\n", b)
	return u
}

// pendingPress is a press waiting for a person's confirmation.
type pendingPress struct {
	button   string
	tool     string
	sentence string
	// params are the checked params without the secret ones: what the
	// store keeps.
	params  map[string]any
	created time.Time
	// pending is the prepared press; nil for a press restored from the
	// store, which is prepared again when the person confirms it.
	pending *confirm.Pending
}

// cancel drops the prepared press, if there is one.
func (pp *pendingPress) cancel() {
	if pp.pending != nil {
		pp.pending.Cancel()
	}
}

func newScreenID() string {
	var b [16]byte
	rand.Read(b[:])
	return "scr_" + hex.EncodeToString(b[:])
}

// newScreen starts a screen owned by p, saves it and lists it. When the
// owner then has more screens than the bound, the store drops the oldest,
// which close. The error, a *tool.Error, is store_unavailable when the
// store refused the screen.
func (s *Part) newScreen(ctx context.Context, p store.Principal, opts Options) (*liveScreen, error) {
	sc := &liveScreen{
		id:      newScreenID(),
		owner:   p,
		created: s.Now(),
		secret:  map[string]bool{},
		opts:    s.screenOptions(),
		touched: map[string]bool{},
		presses: map[string]*pendingPress{},
		latest:  map[string]string{},
		changed: make(chan struct{}),
	}
	sc.parser = screen.NewParser(sc.opts)
	sc.doc = sc.parser.Document()
	for _, k := range opts.Secret {
		sc.secret[k] = true
	}
	sc.mu.Lock()
	rec, err := s.screenRecordLocked(sc)
	sc.mu.Unlock()
	if err != nil {
		return nil, err
	}
	evicted, err := s.Store.Screens.CreateScreen(context.WithoutCancel(ctx), rec)
	if err != nil {
		s.Log.Error("a screen could not be saved", "screen", sc.id, "err", err)
		return nil, storeUnavailable("the screen")
	}
	sc.storedDoc = len(rec.Document)
	s.scrMu.Lock()
	s.screens[sc.id] = sc
	var gone []*liveScreen
	for _, id := range evicted {
		s.closes++
		if o, ok := s.screens[id]; ok {
			gone = append(gone, o)
			delete(s.screens, id)
		}
	}
	s.scrMu.Unlock()
	for _, o := range gone {
		o.close()
		s.publishScreen(o, map[string]any{"screen": o.id, "closed": true})
	}
	return sc, nil
}

// storeUnavailable is the refusal of a change the store could not save.
// updateUnsaved is the answer to a live update the store refused: 503
// store_unavailable with data.committed saying whether the screen kept it
// (true: saved with the screen, but not in the live feed other nodes read;
// false: not saved, so send it again).
func updateUnsaved(committed bool) *tool.Error {
	msg := "the update could not be saved, so it is not applied for good; send it again when the store is reachable"
	if committed {
		msg = "the update was saved with the screen, but followers on other nodes may not see it until they reload; do not send it again"
	}
	e := tool.Errorf(string(wire.StoreUnavailable), "%s", msg)
	e.Data = map[string]any{"committed": committed}
	return e
}

func storeUnavailable(what string) *tool.Error {
	return tool.Errorf(string(wire.StoreUnavailable), "%s could not be saved, so nothing changed; try again when the store is reachable", what)
}

// screenFor returns the screen id if p may see it: its owner and the
// people who oversee the owner.
func (s *Part) screenFor(ctx context.Context, p store.Principal, id string) (*liveScreen, bool) {
	sc, ok := s.getScreen(ctx, id)
	if !ok || !s.Oversees(ctx, p, sc.owner.ID) {
		return nil, false
	}
	return sc, true
}

// visibleScreens lists the screens p may see, newest first.
func (s *Part) visibleScreens(ctx context.Context, p store.Principal) []*liveScreen {
	if s.SharedBus {
		// Other nodes show screens too: list what the store keeps.
		s.syncList(ctx)
	}
	s.scrMu.Lock()
	var out []*liveScreen
	for _, sc := range s.screens {
		if sc.owner.ID == p.ID || p.Kind == store.KindHuman {
			out = append(out, sc)
		}
	}
	s.scrMu.Unlock()
	// Whom a person oversees is decided outside the lock: it may read the
	// store.
	out = slices.DeleteFunc(out, func(sc *liveScreen) bool { return !s.Oversees(ctx, p, sc.owner.ID) })
	slices.SortFunc(out, func(a, b *liveScreen) int { return b.created.Compare(a.created) })
	return out
}

// removeScreen deletes a screen from the store, then closes it and forgets
// it. When the store refuses, the screen stays and the error is
// store_unavailable.
func (s *Part) removeScreen(ctx context.Context, sc *liveScreen) error {
	if err := s.Store.Screens.DeleteScreen(ctx, sc.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.Log.Error("a screen could not be deleted", "screen", sc.id, "err", err)
		return storeUnavailable("the removal of the screen")
	}
	s.scrMu.Lock()
	delete(s.screens, sc.id)
	s.closes++
	s.scrMu.Unlock()
	sc.close()
	s.publishScreen(sc, map[string]any{"screen": sc.id, "closed": true})
	return nil
}

// close ends the screen's live feed and unregisters its fields.
func (sc *liveScreen) close() {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	sc.closed = true
	remove := sc.removeControls
	sc.removeControls = nil
	for id, pp := range sc.presses {
		pp.cancel()
		delete(sc.presses, id)
	}
	close(sc.changed)
	sc.mu.Unlock()
	if remove != nil {
		remove()
	}
}

// bumpLocked records a change; sc.mu is held.
func (sc *liveScreen) bumpLocked() {
	sc.version++
	sc.notifyLocked()
}

// notifyLocked wakes the screen's followers; sc.mu is held.
func (sc *liveScreen) notifyLocked() {
	if !sc.closed {
		close(sc.changed)
		sc.changed = make(chan struct{})
	}
}

// write feeds stream bytes to the screen's parser.
func (s *Part) writeScreen(sc *liveScreen, b []byte) {
	sc.mu.Lock()
	if !sc.doc.Ended() {
		sc.stream.Write(b)
	}
	_, _ = sc.parser.Write(b)
	sc.bumpLocked()
	sc.mu.Unlock()
	s.screenChanged(sc)
}

// endScreen ends the screen's stream and saves the screen. The error, a
// *tool.Error, is store_unavailable when the store refused it: the screen
// shows, but a restart would lose what its stream wrote.
func (s *Part) endScreen(ctx context.Context, sc *liveScreen) error {
	sc.mu.Lock()
	sc.doc = sc.parser.End()
	sc.bumpLocked()
	sc.mu.Unlock()
	err := s.saveScreen(ctx, sc)
	s.screenChanged(sc)
	return err
}

// screenChanged keeps the screen's fields registered as controls and tells
// those who may see the screen that it changed.
func (s *Part) screenChanged(sc *liveScreen) {
	s.syncScreenControls(sc)
	sc.mu.Lock()
	v := sc.version
	sc.mu.Unlock()
	s.publishScreen(sc, map[string]any{"screen": sc.id, "version": v})
}

// publishScreen publishes a screen.update event to the screen's owner and
// to the people who oversee it. It carries the screen's id only, never its content.
//
// It also carries this process's origin with the screen's stored version
// and feed sequence, so other nodes holding the screen know whether their
// copy is current (see nodes.go).
func (s *Part) publishScreen(sc *liveScreen, data map[string]any) {
	sc.mu.RLock()
	data["origin"], data["stored"], data["seq"] = s.Origin, sc.saved, sc.seq
	sc.mu.RUnlock()
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	s.Bus.Publish(s.OwnedEvent("screen.update", sc.owner.ID, b))
}

// screenSummary is the outcome of reading a stream.
type screenSummary = api.ScreenSummary

func (sc *liveScreen) summary() screenSummary {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := screenSummary{ID: sc.id, Components: len(sc.doc.Nodes()) + len(sc.doc.Mutations()), Rejected: []screen.Issue{}, Outline: screen.Describe(sc.doc, false), Ended: sc.doc.Ended(), URL: "/screens/" + sc.id}
	for _, is := range sc.doc.Issues() {
		if is.Severity == screen.SeverityError {
			out.Rejected = append(out.Rejected, is)
		}
	}
	return out
}

// Show shows a whole stream as a screen owned by owner and returns its
// id. It is how a Go application shows a screen.
func (s *Part) Show(ctx context.Context, owner store.Principal, stream string, opts Options) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	sc, err := s.newScreen(ctx, owner, opts)
	if err != nil {
		return "", err
	}
	s.writeScreen(sc, []byte(stream))
	if err := s.endScreen(ctx, sc); err != nil {
		return "", err
	}
	return sc.id, nil
}

// LiveScreen describes a screen this node shows (see LiveScreens).
type LiveScreen struct {
	// ID is the screen's id.
	ID string
	// Owner is the id of the principal that showed it.
	Owner string
	// Title is its heading: the text of its first Heading, or "Untitled
	// screen".
	Title string
	// Stream is the text written to it so far.
	Stream string
}

// LiveScreens returns the screens this node shows, in no particular
// order. An application reads it at start to show its screens only when
// the store did not keep them from an earlier start.
func (s *Part) LiveScreens() []LiveScreen {
	s.scrMu.Lock()
	open := make([]*liveScreen, 0, len(s.screens))
	for _, sc := range s.screens {
		open = append(open, sc)
	}
	s.scrMu.Unlock()
	out := make([]LiveScreen, 0, len(open))
	for _, sc := range open {
		// The document is read under the write lock, as summaries read it.
		sc.mu.Lock()
		out = append(out, LiveScreen{ID: sc.id, Owner: sc.owner.ID, Title: render.Title(sc.doc), Stream: sc.stream.String()})
		sc.mu.Unlock()
	}
	return out
}

// Update applies a live update, written by the application's code, to
// the screen id (SPEC 10.29–10.34), and sends it to the screen's followers.
func (s *Part) Update(ctx context.Context, id, text string) (screen.UpdateResult, error) {
	if err := ctx.Err(); err != nil {
		return screen.UpdateResult{}, err
	}
	sc, ok := s.getScreen(ctx, id)
	if !ok {
		return screen.UpdateResult{}, tool.Errorf("not_found", "no screen %q is open", id)
	}
	return s.applyUpdate(ctx, sc, text)
}

// applyUpdate applies text to sc, saves the screen and, when applied,
// records it in the live feed, numbered by the store. A rejected update is
// logged by issue code only. When another node saved the screen meanwhile,
// the update is applied to the screen as the store holds it.
func (s *Part) applyUpdate(ctx context.Context, sc *liveScreen, text string) (_ screen.UpdateResult, err error) {
	sc.feedMu.Lock()
	defer sc.feedMu.Unlock()
	var res screen.UpdateResult
	err = s.change(ctx, sc, func() error {
		var perr error
		res, perr = sc.parser.Update(text)
		if perr != nil {
			return tool.Errorf("invalid_request", "%v", perr)
		}
		if !res.Applied {
			return errNoChange
		}
		sc.noteAssignedLocked(text)
		return nil
	})
	var te *tool.Error
	switch {
	case errors.Is(err, errNoChange):
		codes := make([]string, 0, len(res.Issues))
		for _, is := range res.Issues {
			codes = append(codes, is.Code)
		}
		s.Log.Warn("screen update rejected", "screen", sc.id, "issues", strings.Join(codes, ","))
		return res, nil
	case errors.As(err, &te) && te.Code != string(wire.StoreUnavailable):
		return res, err
	case err != nil:
		// Not saved: the update is not acknowledged, and followers are
		// not told of it.
		s.Log.Error("a screen update could not be saved", "screen", sc.id, "err", err)
		return res, updateUnsaved(false)
	}
	seq, serr := s.Store.Screens.AppendScreenUpdate(context.WithoutCancel(ctx), sc.id, text)
	if serr != nil {
		// The screen saved with the update keeps it over a restart, but
		// the live feed that other nodes' followers read does not have
		// it: say so rather than acknowledge it.
		s.Log.Error("a screen update was saved but not added to the live feed", "screen", sc.id, "err", serr)
		defer func() { err = updateUnsaved(true) }()
	}
	// Updates other nodes numbered between this copy's last and this one
	// join the feed first, so its followers never skip one. The store is
	// read holding feedMu only, which no control's write waits on.
	var between []liveUpdate
	sc.mu.RLock()
	last := sc.seq
	sc.mu.RUnlock()
	if serr == nil && seq > last+1 {
		ups, err := s.Store.Screens.ScreenUpdates(context.WithoutCancel(ctx), sc.id, last)
		if err != nil {
			s.Log.Warn("the updates other nodes made to a screen could not be read", "screen", sc.id, "err", err)
		}
		for _, u := range ups {
			between = append(between, newLiveUpdate(u.Seq, u.Text))
		}
	}
	sc.mu.Lock()
	if len(between) > 0 {
		sc.mergeFeedLocked(between, between[len(between)-1].Seq)
	}
	sc.addUpdateLocked(seq, serr == nil, text)
	sc.notifyLocked()
	sc.mu.Unlock()
	s.screenChanged(sc)
	return res, nil
}

// addUpdateLocked adds the update text to the live feed, numbered seq by
// the store when stored is set. An update a reading of the screen already
// added keeps its place and is not added twice; one the store did not
// number, or numbered as an update this node numbered itself, takes the
// next number here. sc.mu is held.
func (sc *liveScreen) addUpdateLocked(seq int64, stored bool, text string) {
	if stored && seq <= sc.seq && sc.hasStoredUpdateLocked(seq) {
		return
	}
	local := !stored || seq <= sc.seq
	if local {
		seq = sc.seq + 1
	}
	u := newLiveUpdate(seq, text)
	u.local = local
	sc.seq = seq
	sc.updates = append(sc.updates, u)
	sc.trimFeedLocked()
}

// hasStoredUpdateLocked reports whether the feed holds the update the
// store numbered seq, or has dropped it as too old; sc.mu is held.
func (sc *liveScreen) hasStoredUpdateLocked(seq int64) bool {
	i, found := slices.BinarySearchFunc(sc.updates, seq, cmpSeq)
	if found {
		return !sc.updates[i].local
	}
	return i == 0
}

// mergeFeedLocked brings the live feed up to the store's: ups are updates
// the store holds, in order, and last is the store's latest seq. Updates
// the feed already has keep their place and are not sent again, and the
// feed's seq never goes back. When the store no longer keeps some updates
// the feed lacks, the feed restarts from the kept ones and its followers
// catch up (updatesAfter). sc.mu is held.
func (sc *liveScreen) mergeFeedLocked(ups []liveUpdate, last int64) {
	if last <= sc.seq {
		return
	}
	i, _ := slices.BinarySearchFunc(ups, sc.seq+1, cmpSeq)
	if i < len(ups) && ups[i].Seq == sc.seq+1 {
		sc.updates = append(sc.updates, ups[i:]...)
	} else {
		sc.updates = slices.Clone(ups[i:])
	}
	sc.seq = last
	sc.trimFeedLocked()
}

// trimFeedLocked keeps the newest keptUpdates updates; sc.mu is held.
func (sc *liveScreen) trimFeedLocked() {
	if len(sc.updates) > keptUpdates {
		sc.updates = slices.Delete(sc.updates, 0, len(sc.updates)-keptUpdates)
	}
}

// cmpSeq orders an update against a seq.
func cmpSeq(u liveUpdate, seq int64) int { return cmp.Compare(u.Seq, seq) }

// noteAssignedLocked records the latest line of each id and $key text
// assigns, for followers that catch up; sc.mu is held.
func (sc *liveScreen) noteAssignedLocked(text string) {
	for _, line := range strings.Split(text, "\n") {
		k := assignedName(line)
		if k == "" {
			continue
		}
		if _, seen := sc.latest[k]; !seen {
			sc.order = append(sc.order, k)
		}
		sc.latest[k] = strings.TrimSuffix(line, "\r")
	}
}

// assignedName returns the id or $key a statement line assigns, or "".
func assignedName(line string) string {
	t := strings.TrimSpace(line)
	if t == "" || t[0] == '#' {
		return ""
	}
	i := strings.IndexByte(t, '=')
	if i <= 0 {
		return ""
	}
	return strings.TrimSpace(t[:i])
}

// handleScreenCreate serves POST /v1/screens: the body is an Omni IR stream,
// read and shown as it arrives, so a slow writer's screen appears line by
// line in the web UI.
func (s *Part) handleScreenCreate(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	var opts Options
	for _, k := range r.URL.Query()["secret"] {
		if !strings.HasPrefix(k, "$") {
			k = "$" + k
		}
		opts.Secret = append(opts.Secret, k)
	}
	rc := http.NewResponseController(w)
	// The stream may take a while: lift the server's read deadline.
	_ = rc.SetReadDeadline(time.Time{})
	sc, err := s.newScreen(r.Context(), p, opts)
	if err != nil {
		host.WriteToolError(w, err)
		return
	}
	body := http.MaxBytesReader(w, r.Body, maxScreenBytes)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			s.writeScreen(sc, buf[:n])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				_ = s.removeScreen(r.Context(), sc)
				host.WriteError(w, wire.TooLarge, fmt.Sprintf("a screen's stream may be at most %d bytes", maxScreenBytes))
				return
			}
			// The writer went away: end the stream with what arrived.
			break
		}
	}
	// The screen is saved even when the writer went away.
	ctx := context.WithoutCancel(r.Context())
	if err := s.endScreen(ctx, sc); err != nil {
		_ = s.removeScreen(ctx, sc)
		host.WriteToolError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusCreated, sc.summary())
}

func (s *Part) handleScreenList(w http.ResponseWriter, r *http.Request) {
	out := api.ScreenList{Screens: []api.ScreenRow{}}
	for _, sc := range s.visibleScreens(r.Context(), host.PrincipalOf(r)) {
		sum := sc.summary()
		out.Screens = append(out.Screens, api.ScreenRow{ID: sc.id, Owner: sc.owner.ID, Created: sc.created.UTC(), Components: sum.Components, Ended: sum.Ended, URL: sum.URL})
	}
	host.WriteJSON(w, http.StatusOK, out)
}

func (s *Part) handleScreenGet(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.screenFor(r.Context(), host.PrincipalOf(r), r.PathValue("id"))
	if !ok {
		host.WriteError(w, wire.NotFound, "no such screen is open for you; list your screens with GET /v1/screens")
		return
	}
	host.WriteJSON(w, http.StatusOK, sc.summary())
}

func (s *Part) handleScreenDelete(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	sc, ok := s.screenFor(r.Context(), p, r.PathValue("id"))
	if !ok || sc.owner.ID != p.ID {
		host.WriteError(w, wire.NotFound, "you have no such screen open; list your screens with GET /v1/screens")
		return
	}
	if err := s.removeScreen(r.Context(), sc); err != nil {
		host.WriteToolError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleScreenUpdate serves POST /v1/screens/{id}/updates: the screen's
// owner (the application's code) sends a live update as the body.
func (s *Part) handleScreenUpdate(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	sc, ok := s.screenFor(r.Context(), p, r.PathValue("id"))
	if !ok || sc.owner.ID != p.ID {
		host.WriteError(w, wire.NotFound, "you have no such screen open; only the screen's owner updates it")
		return
	}
	if p.Kind == store.KindAgent {
		host.WriteError(w, wire.Forbidden, "updates come from the application's code, never from a model; use a service token")
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		host.WriteError(w, wire.TooLarge, "an update may be at most 1 MiB")
		return
	}
	res, err := s.applyUpdate(r.Context(), sc, string(b))
	if err != nil {
		writeChangeError(w, err)
		return
	}
	issues := res.Issues
	if issues == nil {
		issues = []screen.Issue{}
	}
	status := http.StatusOK
	if !res.Applied {
		status = http.StatusUnprocessableEntity
	}
	sc.mu.Lock()
	seq := sc.seq
	sc.mu.Unlock()
	body := api.ScreenUpdate{Applied: res.Applied, Issues: issues, Seq: seq}
	if !res.Applied {
		// A rejected update keeps its answer's fields and carries the one
		// error object beside them.
		body.Error = wire.New(wire.UpdateRejected, "the update was rejected and nothing changed; fix the lines its issues name and send it again").
			WithData(map[string]any{"issues": issues})
	}
	host.WriteJSON(w, status, body)
}

// showScreenTool is the MCP tool show_screen (SPEC 10.25–10.27). Its
// description teaches the format and lists the tools a screen's buttons may
// call, so it is replaced whenever a screen tool is registered.
func (s *Part) showScreenTool() tool.Tool {
	var desc strings.Builder
	desc.WriteString("Show the person a screen written in Omni-IR (stream format " + screen.FormatVersion + "): one statement per line, " +
		"`id = Component(args)` or `$key = value`; the top component is `root`; children are lists of ids, each defined on its own line; " +
		"strings use double quotes; positional args come first, in the order shown, then name=value. A Button with action=\"…\" runs only through `McpMutation(button, tool=\"…\", params={key: $state, …})` naming a tool below, " +
		"with params that match the tool's input schema; the person confirms where the app asks them to. " +
		"A screen with any error is not shown: the result is an error listing each line's error; fix them all and call again with the whole screen. " +
		"To replace a screen you showed, pass its id as replaces. Components and their props:\n" + screen.CatalogText() +
		"Example:\n" + screenExample + "\n")
	names := s.screenTools.Names()
	if len(names) > 0 {
		desc.WriteString(" Tools:")
		for _, n := range names {
			t, _ := s.screenTools.Lookup(n)
			fmt.Fprintf(&desc, " %s", n)
			if t.Description != "" {
				fmt.Fprintf(&desc, " (%s)", oneLine(t.Description))
			}
			desc.WriteString(";")
		}
	}
	return tool.New(tool.Spec[showScreenArgs]{
		Name:         "show_screen",
		Title:        "Show a screen",
		Description:  desc.String(),
		OutputSchema: showScreenOutput(),
		Annotations:  tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: false, OpenWorld: false},
		Meta:         showScreenMeta,
		Example:      showScreenArgs{Screen: screenExample},
	}, func(ctx context.Context, c tool.Call, args showScreenArgs) (*tool.Reply[any], error) {
		if args.Replaces != "" {
			if old, ok := s.screenFor(ctx, c.Principal, args.Replaces); !ok || old.owner.ID != c.Principal.ID {
				return nil, tool.Errorf("not_found", "you have no screen %q open to replace; pass the screen id a show_screen result gave you, or leave replaces out", args.Replaces)
			}
		}
		if issues := s.checkScreen(ctx, args.Screen); len(issues) > 0 {
			return refusedScreen(issues), nil
		}
		id, err := s.Show(ctx, c.Principal, args.Screen, Options{})
		if err != nil {
			return nil, err
		}
		if args.Replaces != "" && args.Replaces != id {
			if err := s.replaceScreen(ctx, c.Principal, args.Replaces); err != nil {
				s.Log.Warn("a replaced screen could not be removed", "screen", args.Replaces, "err", err)
			}
		}
		sc, _ := s.screenFor(ctx, c.Principal, id)
		sum := sc.summary()
		url := strings.TrimRight(s.Config.BaseURL, "/") + "/screens/" + id
		return &tool.Reply[any]{Text: showScreenText(sum) + "\n\nA person sees it at " + url, Out: shownScreen{
			Screen: id, URL: url, Components: sum.Components, Rejected: sum.Rejected, Outline: sum.Outline,
		}}, nil
	})
}

// showScreenArgs are show_screen's arguments. Screen's maxLength is
// maxScreenChars (a test holds them equal).
type showScreenArgs struct {
	Screen   string `json:"screen" minLength:"1" maxLength:"200000" jsonschema:"the screen as Omni-IR text"`
	Replaces string `json:"replaces,omitempty" maxLength:"128" jsonschema:"the id of a screen of yours that this one replaces; it is removed once this one is shown"`
}

// showScreenText writes show_screen's text result.
func showScreenText(sum screenSummary) string {
	var b strings.Builder
	if sum.Components == 1 {
		b.WriteString("Shown: 1 component.")
	} else {
		fmt.Fprintf(&b, "Shown: %d components.", sum.Components)
	}
	if len(sum.Rejected) > 0 {
		b.WriteString(" These lines were rejected; call show_screen again with the whole screen, fixed:")
		for _, is := range sum.Rejected {
			if is.Line > 0 {
				fmt.Fprintf(&b, "\n- line %d: %s: %s", is.Line, is.Code, is.Message)
			} else {
				fmt.Fprintf(&b, "\n- at the end: %s: %s", is.Code, is.Message)
			}
		}
	}
	b.WriteString("\n\nThe screen as text:\n")
	b.WriteString(sum.Outline)
	return b.String()
}

// runTool runs a screen tool for a request that did not come through a
// screen's own press (/api/mutate and MCP views): access, schema, then the
// handler. A tool that needs a person's confirmation is refused here: its
// confirmation is shown only by the web UI's press of a screen's button.
func (s *Part) runTool(ctx context.Context, p store.Principal, name string, params map[string]any) (confirm.Result, *wire.Error) {
	if _, ok := s.screenTools.Lookup(name); !ok {
		return confirm.Result{}, wire.New(wire.UnknownTool, "no tool of that name is registered (names are compared byte for byte)")
	}
	if e := s.checkAccess(p, name); e != nil {
		return confirm.Result{}, e
	}
	pend, err := s.screenTools.Prepare(ctx, name, params, nil)
	if err != nil {
		return confirm.Result{}, pressError(err)
	}
	if pend.NeedsConfirmation() {
		pend.Cancel()
		return confirm.Result{}, wire.New(wire.ConfirmationRequired, "this tool runs only after a person confirms it: press its button on a screen in the assent web UI")
	}
	res, err := pend.Confirm(ctx)
	if err != nil {
		return confirm.Result{}, pressError(err)
	}
	return res, nil
}

// checkAccess applies the tool's access rule to p (the zero principal is a
// request without credentials).
func (s *Part) checkAccess(p store.Principal, name string) *wire.Error {
	switch s.accessOf(name) {
	case AccessPublic:
		return nil
	case AccessPeople:
		if p.Kind != store.KindHuman {
			return wire.New(wire.SignInRequired, "this tool is for people: sign in to the assent web UI")
		}
	default:
		if p.ID == "" {
			return wire.New(wire.SignInRequired, "this tool is for signed-in principals: send a bearer token or sign in")
		}
	}
	return nil
}

// pressError maps an error of the press pipeline to an API error.
func pressError(err error) *wire.Error {
	var ce *confirm.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return wire.New(wire.ToolFailed, "the request ended before the tool ran; try again")
		}
		return wire.New(wire.ToolFailed, "the tool failed; try again")
	}
	switch ce.Code {
	case confirm.CodeUnknownTool:
		return wire.New(wire.UnknownTool, ce.Message)
	case confirm.CodeInvalidParams:
		issues := ce.Issues
		if issues == nil {
			issues = []confirm.ParamIssue{}
		}
		return wire.New(wire.InvalidParams, ce.Message).WithData(map[string]any{"issues": issues})
	case confirm.CodeMutationBlocked:
		return wire.New(wire.MutationBlocked, ce.Message)
	case confirm.CodeToolChanged:
		return wire.New(wire.ToolChanged, ce.Message)
	case confirm.CodeHandlerFailed:
		var te *tool.Error
		if errors.As(ce.Err, &te) {
			if te.Code == "not_found" {
				return wire.New(wire.NotFound, te.Message)
			}
			// A tool's own refusal is a conflict, whatever its code
			// (SPEC 10.14).
			e := wire.New(wire.Code(te.Code), te.Message)
			e.Status = http.StatusConflict
			return e
		}
		return wire.New(wire.ToolFailed, "the tool's handler failed; try again")
	}
	return wire.New(wire.ToolFailed, ce.Message)
}

// loadToolsFile registers the tools of a tools.json file, if there is one.
func (s *Part) loadToolsFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tools.json: %w", err)
	}
	tools, err := parseToolsFile(b, s.callbackClient())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range tools {
		if err := s.RegisterTool(t); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

package server

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/server/wire"
	"github.com/assent-run/assent/store"
)

//go:embed web/templates/*.html
var templateFS embed.FS

//go:embed web/static
var staticFS embed.FS

// webUI renders the server's pages.
type webUI struct {
	pages map[string]*template.Template
}

func newWebUI() (*webUI, error) {
	funcs := template.FuncMap{
		"version": func() string { return assent.Version },
	}
	names, err := fs.Glob(templateFS, "web/templates/*.html")
	if err != nil {
		return nil, err
	}
	ui := &webUI{pages: map[string]*template.Template{}}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "web/templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "web/templates/layout.html", n)
		if err != nil {
			return nil, err
		}
		if base == "screen" {
			// A screen is drawn by the renderer shared with the view.
			if t, err = t.Parse(render.Template); err != nil {
				return nil, err
			}
		}
		ui.pages[base] = t
	}
	return ui, nil
}

// page is the data every page gets.
type page struct {
	Title     string
	Principal *store.Principal
	CSRF      string
	Open      int
	Data      any
}

func (ui *webUI) render(w http.ResponseWriter, status int, name string, p page) {
	t, ok := ui.pages[name]
	if !ok {
		writeError(w, wire.Internal, "the page is missing from this build; report it")
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		writeError(w, wire.Internal, "the page could not be drawn; reload it, and report it if it persists")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// webPrincipal returns the signed-in person of r, if any.
func (s *Server) webSession(r *http.Request) (store.Principal, store.Session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return store.Principal{}, store.Session{}, false
	}
	sess, err := s.store.Session(r.Context(), auth.Hash(c.Value), s.now())
	if err != nil {
		return store.Principal{}, store.Session{}, false
	}
	p, err := s.store.Principal(r.Context(), sess.PrincipalID)
	if err != nil || p.Revoked {
		return store.Principal{}, store.Session{}, false
	}
	return p, sess, true
}

// webPage wraps a page handler that needs a signed-in person. Unsafe
// methods get the Origin and CSRF checks.
func (s *Server) webPage(h func(w http.ResponseWriter, r *http.Request, pg page)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, sess, ok := s.webSession(r)
		if !ok {
			s.web.render(w, http.StatusUnauthorized, "signedout", page{Title: "Sign in"})
			return
		}
		if unsafeMethod(r.Method) {
			if e := s.checkWebChange(r, sess); e != nil {
				writeAPIError(w, e)
				return
			}
		}
		if !s.allow(w, p) {
			return
		}
		ctx := auth.WithPrincipal(r.Context(), p)
		ctx = context.WithValue(ctx, transportKey{}, viaWeb)
		total := 0
		for _, n := range s.openItems(ctx, p) {
			total += n
		}
		h(w, r.WithContext(ctx), page{Principal: &p, CSRF: sess.CSRF, Open: total})
	})
}

func (s *Server) routesWeb(mux *routeMux) {
	static, _ := fs.Sub(staticFS, "web/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := s.webSession(r); ok {
			http.Redirect(w, r, "/inbox", http.StatusSeeOther)
			return
		}
		s.web.render(w, http.StatusOK, "signedout", page{Title: "Sign in"})
	})
	mux.HandleFunc("GET /signin/{link}", s.handleSignInPage)
	mux.HandleFunc("POST /signin", s.handleSignIn)
	mux.Handle("POST /signout", s.webPage(s.handleSignOut))
	mux.Handle("GET /inbox", s.webPage(s.handleInbox))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.handleNotFound(w, r, mux.ServeMux) })
}

// handleNotFound answers requests no other route matches. A path that
// other methods serve gets method_not_allowed with an Allow header, as the
// mux would answer; API and MCP clients get the JSON error; people get a
// page with a way back.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, wire.MethodNotAllowed, "this path does not take "+r.Method+"; use "+strings.Join(allow, " or "))
		return
	}
	if p := r.URL.Path; strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/mcp") || strings.HasPrefix(p, "/static/") {
		writeError(w, wire.NotFound, "no such path; see docs/http.md for the API's paths")
		return
	}
	pg := page{Title: "Not found"}
	if p, sess, ok := s.webSession(r); ok {
		pg.Principal, pg.CSRF = &p, sess.CSRF
	}
	s.web.render(w, http.StatusNotFound, "notfound", pg)
}

func (s *Server) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	link := r.PathValue("link")
	if !strings.HasPrefix(link, auth.SignInPrefix) {
		s.web.render(w, http.StatusNotFound, "signin", page{Title: "Sign in", Data: map[string]any{"Invalid": true}})
		return
	}
	s.web.render(w, http.StatusOK, "signin", page{Title: "Sign in", Data: map[string]any{"Link": link}})
}

// handleSignIn consumes a one-time link and starts a session. Attempts are
// rate-limited per client address (Config.SignInRate).
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if s.signInLimits != nil {
		if d := s.signInLimits.reserve(clientIP(r), s.now()); d > 0 {
			retryAfter(w, d)
			writeError(w, wire.RateLimited, "too many sign-in attempts from this address; wait a minute and open the link again")
			return
		}
	}
	if !s.sameOrigin(r) {
		writeError(w, wire.BadOrigin, "sign in from the link's own page")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	link := r.PostFormValue("link")
	id, err := s.store.ConsumeSignInLink(r.Context(), auth.Hash(link), s.now())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Error("sign-in failed", "err", err)
		}
		s.web.render(w, http.StatusUnauthorized, "signin", page{Title: "Sign in", Data: map[string]any{"Used": true}})
		return
	}
	cookie := auth.NewSecret(auth.SessionPrefix)
	sess := store.Session{PrincipalID: id, CSRF: auth.NewSecret(""), ExpiresAt: s.now().Add(sessionTTL)}
	if err := s.store.CreateSession(r.Context(), auth.Hash(cookie), sess); err != nil {
		s.log.Error("create session failed", "err", err)
		writeError(w, wire.Unavailable, "the session could not be stored; try the link again")
		return
	}
	s.log.Info("signed in", "principal", id)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || strings.HasPrefix(s.cfg.BaseURL, "https:"),
		Expires: sess.ExpiresAt,
	})
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request, pg page) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		_ = s.store.DeleteSession(r.Context(), auth.Hash(c.Value))
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// inboxSection is one kind of open item in a person's inbox.
type inboxSection struct {
	ID    string
	Title string
	Empty string
	Items []inboxItem
}

// inboxItem is one thing waiting for a person.
type inboxItem struct {
	Title   string
	Fields  []inboxField
	Note    string
	Warn    string
	Actions []inboxAction

	// Summary, when set, is the card's first line: the decision in a
	// person's words; Lines add detail under it.
	Summary string
	Lines   []string
	// Link, when set, is a page with more about the item; LinkLabel
	// names it.
	Link, LinkLabel string
}

type inboxField struct{ Label, Value string }

// inboxAction is a button that posts a form to URL.
type inboxAction struct {
	Label   string
	URL     string
	Values  map[string]string
	Primary bool
	Danger  bool
	// Input, when set, names a text field the person fills in before
	// pressing the button (for example a reason); InputLabel labels it.
	Input, InputLabel string
}

// inboxSources lists the parts that contribute inbox sections, in order.
func (s *Server) inboxSources() []func(context.Context, store.Principal) ([]inboxSection, error) {
	return []func(context.Context, store.Principal) ([]inboxSection, error){
		s.inboxControls, s.inboxFlows, s.inboxRunProposals,
	}
}

func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request, pg page) {
	var sections []inboxSection
	for _, src := range s.inboxSources() {
		secs, err := src(r.Context(), *pg.Principal)
		if err != nil {
			s.log.Error("inbox section failed", "err", err)
			continue
		}
		sections = append(sections, secs...)
	}
	pg.Title = "Inbox"
	pg.Data = map[string]any{"Sections": sections}
	if r.URL.Query().Get("partial") == "1" {
		s.web.renderPartial(w, "inbox", "sections", pg)
		return
	}
	pg.Data = map[string]any{"Sections": sections, "Notice": s.takeNotice(w, r)}
	s.web.render(w, http.StatusOK, "inbox", pg)
}

func (ui *webUI) renderPartial(w http.ResponseWriter, name, block string, p page) {
	t, ok := ui.pages[name]
	if !ok {
		writeError(w, wire.Internal, "the page is missing from this build; report it")
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, block, p); err != nil {
		writeError(w, wire.Internal, "the page could not be drawn; reload it, and report it if it persists")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}

// Bounds of the one-shot banners kept for web sessions.
const (
	noticeTTL      = 5 * time.Minute
	maxNotices     = 4096
	maxNoticeBytes = 1024
)

// noticeBox keeps at most one pending banner per web session, keyed by the
// hash of the session cookie. Banners live only in the server, so no URL
// or cookie a third party can craft puts text on a person's page.
type noticeBox struct {
	mu sync.Mutex
	m  map[string]notice
}

type notice struct {
	msg     string
	expires time.Time
}

func newNoticeBox() *noticeBox { return &noticeBox{m: map[string]notice{}} }

func (b *noticeBox) put(key, msg string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[key]; !ok && len(b.m) >= maxNotices {
		for k, n := range b.m {
			if now.After(n.expires) {
				delete(b.m, k)
			}
		}
		if len(b.m) >= maxNotices {
			// Drop an arbitrary banner rather than grow: a banner is a
			// courtesy, never the record of a decision.
			for k := range b.m {
				delete(b.m, k)
				break
			}
		}
	}
	b.m[key] = notice{msg: msg, expires: now.Add(noticeTTL)}
}

func (b *noticeBox) take(key string, now time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.m[key]
	if !ok {
		return ""
	}
	delete(b.m, key)
	if now.After(n.expires) {
		return ""
	}
	return n.msg
}

// noticeKey identifies r's web session, or "" when r has none.
func noticeKey(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return ""
	}
	return string(auth.Hash(c.Value))
}

// setNotice keeps msg as the banner the person behind r sees on the next
// page that shows banners. Without a web session it does nothing.
func (s *Server) setNotice(w http.ResponseWriter, r *http.Request, msg string) {
	key := noticeKey(r)
	if key == "" || msg == "" {
		return
	}
	if len(msg) > maxNoticeBytes {
		msg = strings.ToValidUTF8(msg[:maxNoticeBytes], "") + "…"
	}
	s.notices.put(key, msg, s.now())
}

// takeNotice returns and forgets the banner pending for r's web session.
func (s *Server) takeNotice(w http.ResponseWriter, r *http.Request) string {
	key := noticeKey(r)
	if key == "" {
		return ""
	}
	return s.notices.take(key, s.now())
}

// safeBack returns back when it is a path on this site, and fallback
// otherwise: it must start with one "/", not "//" or "/\\" (which browsers
// read as another host), and carry no scheme, host or control characters.
func safeBack(back, fallback string) string {
	if len(back) == 0 || len(back) > 2048 || back[0] != '/' {
		return fallback
	}
	if len(back) > 1 && (back[1] == '/' || back[1] == '\\') {
		return fallback
	}
	for i := 0; i < len(back); i++ {
		if c := back[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return fallback
		}
	}
	u, err := url.Parse(back)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return fallback
	}
	return back
}

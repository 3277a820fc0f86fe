package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var StaticFS embed.FS

// WebUI draws the server's pages. Every page is one template file drawn
// inside the shared layout; each part adds its own pages with AddPages
// while the server is being built.
type WebUI struct {
	funcs template.FuncMap
	pages map[string]*template.Template
}

func newWebUI() (*WebUI, error) {
	ui := &WebUI{
		funcs: template.FuncMap{
			"version": func() string { return assent.Version },
			// reveal draws text that came from an agent with its hidden
			// and direction-changing characters as visible escapes;
			// hiddenchars counts them, for a warning above such text.
			"reveal":      Reveal,
			"hiddenchars": countHidden,
			// readable is a <time> element's text for readers without
			// scripts: an RFC 3339 instant as "2026-12-06 08:31:28 UTC";
			// the page's script shows it in the reader's own zone.
			"readable": ReadableTime,
		},
		pages: map[string]*template.Template{},
	}
	if err := ui.AddPages(templateFS, "templates/sign*.html"); err != nil {
		return nil, err
	}
	if err := ui.AddPages(templateFS, "templates/offline.html"); err != nil {
		return nil, err
	}
	return ui, nil
}

// AddPages parses the page templates of fsys that match pattern, each
// within the layout, named by its file name without ".html". Templates in
// extra (for example a renderer the page calls) are parsed into every one
// of them. AddPages must be called before the server serves.
func (ui *WebUI) AddPages(fsys fs.FS, pattern string, extra ...string) error {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("web: no page matches %q", pattern)
	}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if _, dup := ui.pages[base]; dup {
			return fmt.Errorf("web: page %q is added twice", base)
		}
		t, err := template.New("layout.html").Funcs(ui.funcs).ParseFS(templateFS, "templates/layout.html")
		if err != nil {
			return err
		}
		if t, err = t.ParseFS(fsys, n); err != nil {
			return err
		}
		for _, x := range extra {
			if t, err = t.Parse(x); err != nil {
				return err
			}
		}
		ui.pages[base] = t
	}
	return nil
}

// Page is the data every page gets.
type Page struct {
	Title     string
	Principal *store.Principal
	CSRF      string
	Open      int
	Data      any
	// Seq is the event bus's sequence number when the request began,
	// before the page read what it shows; the page's event stream starts
	// after it, so no change made while the page was drawn goes unseen.
	Seq int64
}

func (ui *WebUI) Render(w http.ResponseWriter, status int, name string, p Page) {
	t, ok := ui.pages[name]
	if !ok {
		WriteError(w, wire.Internal, "the page is missing from this build; report it")
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		WriteError(w, wire.Internal, "the page could not be drawn; reload it, and report it if it persists")
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
func (s *Host) WebSession(r *http.Request) (store.Principal, store.Session, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return store.Principal{}, store.Session{}, false
	}
	sess, err := s.Store.Session(r.Context(), auth.Hash(c.Value), s.Now())
	if err != nil {
		return store.Principal{}, store.Session{}, false
	}
	p, err := s.Store.Principal(r.Context(), sess.PrincipalID)
	if err != nil || p.Revoked {
		return store.Principal{}, store.Session{}, false
	}
	return p, sess, true
}

// WebPage wraps a page handler that needs a signed-in person. Unsafe
// methods get the Origin and CSRF checks.
func (s *Host) WebPage(h func(w http.ResponseWriter, r *http.Request, pg Page)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, sess, ok := s.WebSession(r)
		if !ok {
			s.Web.Render(w, http.StatusUnauthorized, "signedout", Page{Title: "Sign in"})
			return
		}
		if UnsafeMethod(r.Method) {
			if e := s.CheckWebChange(r, sess); e != nil {
				WriteAPIError(w, e)
				return
			}
		}
		if !s.Allow(w, p) {
			return
		}
		// Taken before anything the page shows is read.
		seq := s.Bus.Seq()
		ctx := auth.WithPrincipal(r.Context(), p)
		ctx = context.WithValue(ctx, transportKey{}, viaWeb)
		// The Inbox badge counts what waits on a person; active Runs,
		// counted for runtime_status, are under Runs and wait on nobody.
		total := 0
		for kind, n := range s.OpenItems(ctx, p) {
			if kind != "runs" {
				total += n
			}
		}
		h(w, r.WithContext(ctx), Page{Principal: &p, CSRF: sess.CSRF, Open: total, Seq: seq})
	})
}

// InboxSection is one kind of open item in a person's inbox.
type InboxSection struct {
	ID    string
	Title string
	Empty string
	Items []InboxItem
}

// InboxItem is one thing waiting for a person.
type InboxItem struct {
	Title  string
	Fields []InboxField
	// Details are fields a person rarely needs (ids, fingerprints,
	// capabilities), shown folded under "Technical details".
	Details []InboxField
	Note    string
	Warn    string
	Actions []InboxAction

	// Summary, when set, is the card's first line: the decision in a
	// person's words; Lines add detail under it.
	Summary string
	Lines   []string
	// Why is the proposer's own reason for asking, shown as it wrote it
	// ("Why: …"); empty when it gave none.
	Why string
	// Link, when set, is a page with more about the item; LinkLabel
	// names it.
	Link, LinkLabel string

	// Decision, when set, makes the item one of the person's open
	// decisions: counted by the badge and decidable through /v1/inbox.
	Decision *Decision
}

type InboxField struct {
	Label, Value string
	// Time, when set, is a moment the page shows in the reader's local
	// time (Value is then its text for readers without scripts).
	Time time.Time
}

// InboxTime is a field that shows the moment at in the reader's local
// time.
func InboxTime(label string, at time.Time) InboxField {
	return InboxField{Label: label, Value: at.UTC().Format("2006-01-02 15:04:05 UTC"), Time: at}
}

// InboxAction is a button that posts a form to URL.
type InboxAction struct {
	Label   string
	URL     string
	Values  map[string]string
	Primary bool
	Danger  bool
	// Input, when set, names a text field the person fills in before
	// pressing the button (for example a reason); InputLabel labels it.
	Input, InputLabel string
	// Undo marks an action the page may take back for a few seconds
	// after it succeeds (a control's apply: its Undo is offered on the
	// card, where the person just pressed).
	Undo bool
}

func (ui *WebUI) RenderPartial(w http.ResponseWriter, name, block string, p Page) {
	t, ok := ui.pages[name]
	if !ok {
		WriteError(w, wire.Internal, "the page is missing from this build; report it")
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, block, p); err != nil {
		WriteError(w, wire.Internal, "the page could not be drawn; reload it, and report it if it persists")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}

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
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return ""
	}
	return string(auth.Hash(c.Value))
}

// SetNotice keeps msg as the banner the person behind r sees on the next
// page that shows banners. Without a web session it does nothing.
func (s *Host) SetNotice(w http.ResponseWriter, r *http.Request, msg string) {
	key := noticeKey(r)
	if key == "" || msg == "" {
		return
	}
	if len(msg) > maxNoticeBytes {
		msg = strings.ToValidUTF8(msg[:maxNoticeBytes], "") + "…"
	}
	s.notices.put(key, msg, s.Now())
}

// TakeNotice returns and forgets the banner pending for r's web session.
func (s *Host) TakeNotice(w http.ResponseWriter, r *http.Request) string {
	key := noticeKey(r)
	if key == "" {
		return ""
	}
	return s.notices.take(key, s.Now())
}

// SafeBack returns back when it is a path on this site, and fallback
// otherwise: it must start with one "/", not "//" or "/\\" (which browsers
// read as another host), and carry no scheme, host or control characters.
func SafeBack(back, fallback string) string {
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

// Bounds of the one-shot banners kept for web sessions.
const (
	noticeTTL      = 5 * time.Minute
	maxNotices     = 4096
	maxNoticeBytes = 1024
)

// Page returns the template of the page name, drawn within the layout.
func (ui *WebUI) Page(name string) (*template.Template, bool) {
	t, ok := ui.pages[name]
	return t, ok
}

// RoutesApp registers what makes the web UI an installable app: the
// manifest, the service worker and the offline page the worker shows when
// the server cannot be reached.
func (s *Host) RoutesApp(mux *Mux) {
	manifest, err := fs.ReadFile(StaticFS, "static/manifest.webmanifest")
	if err != nil {
		panic("web: the manifest is missing from this build: " + err.Error())
	}
	worker, err := fs.ReadFile(StaticFS, "static/sw.js")
	if err != nil {
		panic("web: the service worker is missing from this build: " + err.Error())
	}
	worker = bytes.Replace(worker, []byte("__ASSENT_SHELL_VERSION__"), []byte(shellVersion()), 1)
	mux.HandleFunc("GET /manifest.webmanifest", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/manifest+json")
		h.Set("Cache-Control", "no-cache")
		w.Write(manifest)
	})
	mux.HandleFunc("GET /sw.js", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		// Browsers look for a new worker on every navigation; no-cache
		// makes them ask the server, so a release reaches them at once.
		h.Set("Cache-Control", "no-cache")
		h.Set("Service-Worker-Allowed", "/")
		h.Set("Content-Security-Policy", "default-src 'self'")
		w.Write(worker)
	})
	mux.HandleFunc("GET /offline", func(w http.ResponseWriter, r *http.Request) {
		// The same page for everyone, with nobody's data: the worker
		// keeps it in its cache.
		s.Web.Render(w, http.StatusOK, "offline", Page{Title: "Offline"})
	})
}

// shellVersion names this build's static files: a hash of their contents,
// which becomes the service worker's cache name, so a release with other
// files replaces the cache.
func shellVersion() string {
	h := sha256.New()
	fs.WalkDir(StaticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(StaticFS, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
		return nil
	})
	// Templates shape the offline page, which the worker caches too.
	fs.WalkDir(templateFS, "templates", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(templateFS, p)
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
		return nil
	})
	h.Write([]byte(assent.Version))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

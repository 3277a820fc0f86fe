package host

import (
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// RoutesSignIn registers the pages every visitor reaches: the static
// files, the front page, and signing in and out with a one-time link.
func (s *Host) RoutesSignIn(mux *Mux) {
	static, _ := fs.Sub(StaticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := s.WebSession(r); ok {
			http.Redirect(w, r, "/inbox", http.StatusSeeOther)
			return
		}
		s.Web.Render(w, http.StatusOK, "signedout", Page{Title: "Sign in"})
	})
	mux.HandleFunc("GET /signin/{link}", s.handleSignInPage)
	mux.HandleFunc("POST /signin", s.handleSignIn)
	s.RoutesApp(mux)
	mux.Handle("POST /signout", s.WebPage(s.handleSignOut))
}

func (s *Host) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	link := r.PathValue("link")
	if !strings.HasPrefix(link, auth.SignInPrefix) {
		s.Web.Render(w, http.StatusNotFound, "signin", Page{Title: "Sign in", Data: map[string]any{"Invalid": true}})
		return
	}
	s.Web.Render(w, http.StatusOK, "signin", Page{Title: "Sign in", Data: map[string]any{"Link": link}})
}

// handleSignIn consumes a one-time link and starts a session. Attempts are
// rate-limited per client address (Config.SignInRate).
func (s *Host) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if s.signInLimits != nil {
		if d := s.signInLimits.reserve(ClientIP(r), s.Now()); d > 0 {
			RetryAfter(w, d)
			WriteError(w, wire.RateLimited, "too many sign-in attempts from this address; wait a minute and open the link again")
			return
		}
	}
	if !s.SameOrigin(r) {
		WriteError(w, wire.BadOrigin, "sign in from the link's own page")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	link := r.PostFormValue("link")
	id, err := s.Store.ConsumeSignInLink(r.Context(), auth.Hash(link), s.Now())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.Log.Error("sign-in failed", "err", err)
		}
		s.Web.Render(w, http.StatusUnauthorized, "signin", Page{Title: "Sign in", Data: map[string]any{"Used": true}})
		return
	}
	cookie := auth.NewSecret(auth.SessionPrefix)
	sess := store.Session{PrincipalID: id, CSRF: auth.NewSecret(""), ExpiresAt: s.Now().Add(sessionTTL)}
	if err := s.Store.CreateSession(r.Context(), auth.Hash(cookie), sess); err != nil {
		s.Log.Error("create session failed", "err", err)
		if store.Unavailable(err) {
			WriteAPIError(w, FromToolError(StoreUnavailableError()))
			return
		}
		WriteError(w, wire.Unavailable, "the session could not be stored; try the link again")
		return
	}
	s.Log.Info("signed in", "principal", id)
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || strings.HasPrefix(s.Config.BaseURL, "https:"),
		Expires: sess.ExpiresAt,
	})
	next := "/inbox"
	if c, err := r.Cookie(NextCookie); err == nil && strings.HasPrefix(c.Value, "/oauth/authorize?") {
		// The person was asked to sign in on an agent's consent page.
		next = c.Value
		http.SetCookie(w, &http.Cookie{Name: NextCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// NextCookie names the page a person returns to after signing in, set by
// a page that asked them to sign in first (an agent's consent page).
const NextCookie = "assent_next"

func (s *Host) handleSignOut(w http.ResponseWriter, r *http.Request, pg Page) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		_ = s.Store.DeleteSession(r.Context(), auth.Hash(c.Value))
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// AnonymousDelay applies the per-address limit of sign-in attempts
// (Config.SignInRate) to another unauthenticated request that writes to
// the store, such as an OAuth client registration. It returns how long r
// must wait; zero when it may proceed.
func (s *Host) AnonymousDelay(r *http.Request) time.Duration {
	if s.signInLimits == nil {
		return 0
	}
	return s.signInLimits.reserve(ClientIP(r), s.Now())
}

package notify

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// sessionTTL is how long a session started by a decision link lasts, as
// one started by a sign-in link does.
const sessionTTL = 24 * time.Hour

// linkHash is what the store keeps of a decision link: the hash of its
// secret and the card it opens, so the link works only for that card.
func linkHash(secret, card string) []byte { return auth.Hash(secret + "\n" + card) }

// decisionLink stores a single-use, short-lived link that signs the
// person id in and opens card (a path), and returns its URL.
func (p *Part) decisionLink(ctx context.Context, id, card string) (string, error) {
	if !localPath(card) {
		card = "/inbox"
	}
	secret := auth.NewSecret(auth.SignInPrefix)
	if err := p.Store.Sessions.CreateSignInLink(ctx, linkHash(secret, card), id, p.Now().Add(auth.SignInLinkTTL)); err != nil {
		return "", err
	}
	return strings.TrimRight(p.BaseURL, "/") + "/notify/open/" + secret + "?to=" + url.QueryEscape(card), nil
}

// localPath reports whether s is a path on this site (not //host or /\host).
func localPath(s string) bool {
	return strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//") && !strings.HasPrefix(s, "/\\")
}

var openPage = template.Must(template.New("open").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Open the decision — assent</title></head>
<body><main>
{{if .Message}}<h1>{{.Message}}</h1><p><a href="/">Sign in</a> with a new link, or open the inbox.</p>
{{else}}<h1>Open the decision</h1>
<p>This link signs you in once and opens the card. You decide on the card.</p>
<form method="post" action="/notify/open"><input type="hidden" name="link" value="{{.Link}}"><input type="hidden" name="to" value="{{.To}}">
<button type="submit">Open the card</button></form>{{end}}
</main></body></html>`))

func renderOpen(w http.ResponseWriter, status int, data map[string]string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	openPage.Execute(w, data)
}

// handleOpenPage shows a button that uses the link: a GET never uses it,
// so a mail scanner that fetches links spends nothing.
func (p *Part) handleOpenPage(w http.ResponseWriter, r *http.Request) {
	link, to := r.PathValue("link"), r.URL.Query().Get("to")
	if !strings.HasPrefix(link, auth.SignInPrefix) || !localPath(to) {
		renderOpen(w, http.StatusNotFound, map[string]string{"Message": "This link is not valid."})
		return
	}
	renderOpen(w, http.StatusOK, map[string]string{"Link": link, "To": to})
}

// handleOpen uses a decision link: once, before it expires, for the card
// it was made for, and only by its person — a browser signed in as
// someone else is refused. It signs the person in and opens the card.
func (p *Part) handleOpen(w http.ResponseWriter, r *http.Request) {
	if d := p.Gate.AnonymousDelay(r); d > 0 {
		host.RetryAfter(w, d)
		host.WriteError(w, wire.RateLimited, "too many sign-in attempts from this address; wait a minute and open the link again")
		return
	}
	if !p.Gate.SameOrigin(r) {
		host.WriteError(w, wire.BadOrigin, "open the link's own page and press its button")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	link, to := r.PostFormValue("link"), r.PostFormValue("to")
	if !localPath(to) {
		renderOpen(w, http.StatusNotFound, map[string]string{"Message": "This link is not valid."})
		return
	}
	id, err := p.Store.Sessions.ConsumeSignInLink(r.Context(), linkHash(link, to), p.Now())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			p.Log.Error("decision link", "err", err)
		}
		renderOpen(w, http.StatusUnauthorized, map[string]string{"Message": "This link was used already or has expired."})
		return
	}
	if cur, _, ok := p.Gate.WebSession(r); ok {
		if cur.ID != id {
			p.Log.Warn("decision link refused: opened by another person", "link_for", id, "signed_in", cur.ID)
			renderOpen(w, http.StatusForbidden, map[string]string{"Message": "This link is for another person."})
			return
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	cookie := auth.NewSecret(auth.SessionPrefix)
	sess := store.Session{PrincipalID: id, CSRF: auth.NewSecret(""), ExpiresAt: p.Now().Add(sessionTTL)}
	if err := p.Store.Sessions.CreateSession(r.Context(), auth.Hash(cookie), sess); err != nil {
		p.Log.Error("create session failed", "err", err)
		host.WriteError(w, wire.Unavailable, "the session could not be stored; ask for a new link")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: host.SessionCookie, Value: cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || strings.HasPrefix(p.BaseURL, "https:"),
		Expires: sess.ExpiresAt,
	})
	http.Redirect(w, r, to, http.StatusSeeOther)
}

package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

// crashingOAuth fails the first write of an access token, as a store that
// dies between spending a grant and storing its successors would.
type crashingOAuth struct {
	store.OAuth
	crashed bool
}

var errCrash = errors.New("store went away")

func (c *crashingOAuth) CreateOAuthGrant(ctx context.Context, hash []byte, g store.OAuthGrant) error {
	if g.Kind == store.OAuthAccess && !c.crashed {
		c.crashed = true
		return errCrash
	}
	return c.OAuth.CreateOAuthGrant(ctx, hash, g)
}

func (c *crashingOAuth) ExchangeOAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time, next []store.NewOAuthGrant) (store.OAuthGrant, error) {
	if !c.crashed {
		c.crashed = true
		return store.OAuthGrant{}, errCrash
	}
	return c.OAuth.ExchangeOAuthGrant(ctx, hash, kind, now, next)
}

// storeGate revokes principals in the store; nothing else is called here.
type storeGate struct {
	Gate
	p store.Principals
}

func (g storeGate) RevokePrincipal(ctx context.Context, id string) error {
	return g.p.RevokePrincipal(ctx, id)
}

// TestRetryAfterCrashKeepsTheAuthorization: when the store fails while a
// code or refresh token is exchanged, the client's retry with the same
// secret gets tokens; it is not taken for a replay that revokes the agent.
func TestRetryAfterCrashKeepsTheAuthorization(t *testing.T) {
	for _, kind := range []string{store.OAuthCode, store.OAuthRefresh} {
		t.Run(kind, func(t *testing.T) {
			db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			now := time.Now().UTC()
			person := store.Principal{ID: "p_person", Kind: store.KindHuman, Name: "Ana", Grants: []string{"tool.invoke"}, CreatedAt: now}
			agent := store.Principal{ID: "p_agent", Kind: store.KindAgent, Name: "host", Grants: []string{"tool.invoke"}, Supervisors: []string{person.ID}, CreatedAt: now}
			for _, p := range []store.Principal{person, agent} {
				if err := db.Principals().CreatePrincipal(t.Context(), p, nil); err != nil {
					t.Fatal(err)
				}
			}
			verifier := strings.Repeat("v", 50)
			sum := sha256.Sum256([]byte(verifier))
			d := grantData{RedirectURI: "http://127.0.0.1:1/cb", Challenge: base64.RawURLEncoding.EncodeToString(sum[:]), Resource: "https://a.example/mcp", Consenter: person.ID}
			secret := "asxx_secret"
			if err := db.OAuth().CreateOAuthGrant(t.Context(), hashOf(secret), store.OAuthGrant{Kind: kind, ClientID: "c_1", PrincipalID: agent.ID, Data: mustJSON(d), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			st := &crashingOAuth{OAuth: db.OAuth()}
			s := &Server{
				h: Deps{
					Gate:  storeGate{p: db.Principals()},
					Store: Stores{Principals: db.Principals(), Audit: db.Audit(), OAuth: st},
					Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
					Now:   time.Now,
				},
				st:  st,
				opt: Options{AccessTTL: time.Minute, RefreshTTL: time.Hour, CodeTTL: time.Minute},
			}
			form := url.Values{"client_id": {"c_1"}}
			if kind == store.OAuthCode {
				form.Set("grant_type", "authorization_code")
				form.Set("code", secret)
				form.Set("code_verifier", verifier)
				form.Set("redirect_uri", d.RedirectURI)
			} else {
				form.Set("grant_type", "refresh_token")
				form.Set("refresh_token", secret)
			}
			post := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				w := httptest.NewRecorder()
				s.handleToken(w, req)
				return w
			}
			if w := post(); w.Code != http.StatusServiceUnavailable {
				t.Fatalf("exchange while the store fails: %d %s, want 503", w.Code, w.Body)
			}
			if w := post(); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "access_token") {
				t.Fatalf("retry after the failure: %d %s, want tokens", w.Code, w.Body)
			}
			if p, err := db.Principals().Principal(t.Context(), agent.ID); err != nil || p.Revoked {
				t.Fatalf("agent after the retry: %+v, %v; want not revoked", p, err)
			}
			// Presenting the spent secret again is still a replay.
			if w := post(); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "invalid_grant") {
				t.Fatalf("replay: %d %s, want invalid_grant", w.Code, w.Body)
			}
			if p, _ := db.Principals().Principal(t.Context(), agent.ID); !p.Revoked {
				t.Error("a replayed secret did not revoke the authorization")
			}
		})
	}
}

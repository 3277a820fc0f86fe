package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with plain structs
	}
	return b
}

// pkceVerifier is the form of a code verifier (RFC 7636 section 4.1).
var pkceVerifier = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// tokenResponse is a successful token answer (RFC 6749 section 5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// readForm parses a form-encoded POST body of at most 64 KiB.
func readForm(w http.ResponseWriter, r *http.Request) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "send the parameters as application/x-www-form-urlencoded")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "the body is not a readable form")
		return false
	}
	return true
}

func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	cors(w)
	w.Header().Set("Pragma", "no-cache")
	if !readForm(w, r) {
		return
	}
	if _, _, basic := r.BasicAuth(); basic {
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "assent's clients are public: send client_id in the body and no client secret")
		return
	}
	switch gt := r.PostForm.Get("grant_type"); gt {
	case "authorization_code":
		s.exchangeCode(w, r)
	case "refresh_token":
		s.refresh(w, r)
	case "":
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "grant_type is missing; use authorization_code or refresh_token")
	default:
		writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type "+gt+" is not supported; use authorization_code or refresh_token")
	}
}

// readGrant reads the unspent grant of kind whose secret is secret and
// checks it against the request, spending nothing: a request refused here
// leaves the grant as it was. A grant spent before ends its whole
// authorization: a code or refresh token presented twice has been copied.
func (s *Server) readGrant(w http.ResponseWriter, r *http.Request, secret, kind string) (store.OAuthGrant, grantData, bool) {
	g, err := s.st.OAuthGrant(r.Context(), hashOf(secret), kind, s.h.Now())
	if errors.Is(err, store.ErrNotFound) {
		// Unknown, expired, revoked or spent: only a spent one is
		// reported by UseOAuthGrant as a conflict, and it changes
		// nothing for the others, which it cannot spend.
		g, err = s.st.UseOAuthGrant(r.Context(), hashOf(secret), kind, s.h.Now())
		if err == nil {
			// Became readable between the two reads; treat as not found
			// rather than hand out tokens without a successor check.
			err = store.ErrNotFound
		}
	}
	if !s.grantError(w, r, g, kind, err) {
		return g, grantData{}, false
	}
	var d grantData
	if err := json.Unmarshal(g.Data, &d); err != nil {
		s.h.Log.Error("oauth grant unreadable", "err", err)
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "the grant is unreadable; start the authorization again")
		return g, d, false
	}
	if cid := r.PostForm.Get("client_id"); cid != g.ClientID {
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "the "+kindName(kind)+" was issued to another client_id")
		return g, d, false
	}
	if res := r.PostForm.Get("resource"); res != "" && res != d.Resource {
		writeOAuthError(w, http.StatusBadRequest, "invalid_target", "resource "+res+" is not the one this grant was issued for ("+d.Resource+")")
		return g, d, false
	}
	return g, d, true
}

// grantError answers err from reading or spending a grant of kind and
// reports whether there was none.
func (s *Server) grantError(w http.ResponseWriter, r *http.Request, g store.OAuthGrant, kind string, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrConflict):
		s.endAuthorization(r.Context(), g.PrincipalID, kind+" presented a second time")
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "this "+kindName(kind)+" was already used; the authorization it belongs to is now revoked, so ask the person to connect again")
	case errors.Is(err, store.ErrNotFound):
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "the "+kindName(kind)+" is unknown, expired or revoked; start the authorization again")
	default:
		s.h.Log.Error("oauth token failed", "err", err)
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the server could not store the tokens; nothing was spent, so retry with the same "+kindName(kind))
	}
	return false
}

func kindName(kind string) string {
	switch kind {
	case store.OAuthCode:
		return "authorization code"
	case store.OAuthRefresh:
		return "refresh token"
	}
	return "access token"
}

func (s *Server) exchangeCode(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	code, verifier := f.Get("code"), f.Get("code_verifier")
	if code == "" || verifier == "" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "code and code_verifier are required")
		return
	}
	g, d, ok := s.readGrant(w, r, code, store.OAuthCode)
	if !ok {
		return
	}
	if f.Get("redirect_uri") != d.RedirectURI {
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
		return
	}
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	if !pkceVerifier.MatchString(verifier) || subtle.ConstantTimeCompare([]byte(want), []byte(d.Challenge)) != 1 {
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge (PKCE S256)")
		return
	}
	s.issue(w, r, code, g, grantData{Resource: d.Resource, Scope: d.Scope, Consenter: d.Consenter})
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	rt := r.PostForm.Get("refresh_token")
	if rt == "" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "refresh_token is required")
		return
	}
	g, d, ok := s.readGrant(w, r, rt, store.OAuthRefresh)
	if !ok {
		return
	}
	s.issue(w, r, rt, g, d)
}

// issue spends the grant g, whose secret is spent, and answers with a new
// access token and a new refresh token for its authorization. Spending and
// storing the successors is one store transaction: a failure or a crash
// in between leaves the grant unspent, so the client's retry succeeds
// instead of looking like a replay.
func (s *Server) issue(w http.ResponseWriter, r *http.Request, spent string, g store.OAuthGrant, d grantData) {
	p, err := s.h.Store.Principal(r.Context(), g.PrincipalID)
	if err != nil || p.Revoked {
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "the authorization was revoked; ask the person to connect again")
		return
	}
	why, err := s.consenterLost(r.Context(), p, d)
	if err != nil {
		s.h.Log.Error("oauth token failed", "err", err)
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the server could not check the authorization; retry")
		return
	}
	if why != "" {
		s.endAuthorization(r.Context(), p.ID, why)
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "the authorization ended: "+why+"; ask a person to connect the agent again")
		return
	}
	now := s.h.Now().UTC()
	access, refresh := newSecret(auth.AccessTokenPrefix), newSecret(auth.RefreshTokenPrefix)
	data := mustJSON(grantData{Resource: d.Resource, Scope: d.Scope, Consenter: d.Consenter})
	var next []store.NewOAuthGrant
	for _, t := range []struct {
		secret, kind string
		ttl          time.Duration
	}{{access, store.OAuthAccess, s.opt.AccessTTL}, {refresh, store.OAuthRefresh, s.opt.RefreshTTL}} {
		next = append(next, store.NewOAuthGrant{Hash: hashOf(t.secret), Grant: store.OAuthGrant{
			Kind: t.kind, ClientID: g.ClientID, PrincipalID: g.PrincipalID, Data: data, ExpiresAt: now.Add(t.ttl),
		}})
	}
	got, err := s.st.ExchangeOAuthGrant(r.Context(), hashOf(spent), g.Kind, s.h.Now(), next)
	if !s.grantError(w, r, got, g.Kind, err) {
		return
	}
	host.WriteJSON(w, http.StatusOK, tokenResponse{
		AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(s.opt.AccessTTL.Seconds()),
		RefreshToken: refresh, Scope: strings.Join(p.Grants, " "),
	})
}

// handleRevoke is token revocation (RFC 7009). Revoking an access or
// refresh token ends its whole authorization: the agent principal is
// revoked. The answer is the same whether or not the token was known.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	cors(w)
	if !readForm(w, r) {
		return
	}
	tok := r.PostForm.Get("token")
	if tok == "" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "token is required")
		return
	}
	kind := ""
	switch {
	case strings.HasPrefix(tok, auth.AccessTokenPrefix):
		kind = store.OAuthAccess
	case strings.HasPrefix(tok, auth.RefreshTokenPrefix):
		kind = store.OAuthRefresh
	}
	if kind != "" {
		g, err := s.st.OAuthGrant(r.Context(), hashOf(tok), kind, s.h.Now())
		if err == nil {
			if cid := r.PostForm.Get("client_id"); cid == "" || cid == g.ClientID {
				s.endAuthorization(r.Context(), g.PrincipalID, "the client revoked its "+kindName(kind))
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			s.h.Log.Error("oauth revoke failed", "err", err)
			writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be revoked now; try again")
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

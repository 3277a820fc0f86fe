package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
)

// Lifetimes of web credentials.
const (
	SignInLinkTTL = 15 * time.Minute
	sessionTTL    = 24 * time.Hour
	sessionCookie = "assent_session"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
)

// transport says how a request was authenticated.
type transport int

const (
	viaBearer transport = iota + 1
	viaWeb              // a signed-in person's browser, Origin- and CSRF-checked for changes
)

type transportKey struct{}

func transportOf(ctx context.Context) transport {
	t, _ := ctx.Value(transportKey{}).(transport)
	return t
}

// fromWeb reports whether r is a person's gesture in the web UI: a
// cookie-authenticated request that passed the Origin and CSRF checks.
func fromWeb(r *http.Request) bool { return transportOf(r.Context()) == viaWeb }

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// authed requires a principal: a bearer token, or a web session cookie. For
// cookie requests that change state it also requires a same-origin Origin
// header and the session's CSRF token. The request's context ends when the
// principal is revoked.
func (s *Server) authed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var p store.Principal
		if tok, ok := bearer(r); ok {
			var err error
			p, err = s.principalByBearer(ctx, tok)
			if err != nil {
				s.unauthorized(w, err)
				return
			}
			ctx = context.WithValue(ctx, transportKey{}, viaBearer)
		} else if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
			sess, err := s.store.Session(ctx, auth.Hash(c.Value), s.now())
			if err != nil {
				s.unauthorized(w, err)
				return
			}
			if unsafeMethod(r.Method) {
				if e := s.checkWebChange(r, sess); e != nil {
					writeAPIError(w, e)
					return
				}
			}
			if p, err = s.store.Principal(ctx, sess.PrincipalID); err != nil || p.Revoked {
				s.unauthorized(w, store.ErrNotFound)
				return
			}
			ctx = context.WithValue(ctx, transportKey{}, viaWeb)
		} else {
			writeError(w, http.StatusUnauthorized, "sign_in_required", "send 'Authorization: Bearer <token>' (assent token create makes one) or sign in through the web UI")
			return
		}
		if !s.allow(w, p) {
			return
		}
		ctx, release := s.holdLive(ctx, p)
		defer release()
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(ctx, p)))
	})
}

// holdLive returns a context for a request by p that ends when p is
// revoked, so long-lived responses (event streams, MCP streams) stop within
// about revalidateInterval of a revocation. release must be called when the
// request is done.
func (s *Server) holdLive(ctx context.Context, p store.Principal) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	forget := s.live.hold(p.ID, cancel)
	return ctx, func() {
		forget()
		cancel()
	}
}

// bearerOnly requires a bearer token (the MCP endpoint takes no cookies).
func (s *Server) bearerOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="assent"`)
			writeError(w, http.StatusUnauthorized, "sign_in_required", "send 'Authorization: Bearer <token>'; assent serve prints an agent token, and assent token create makes more")
			return
		}
		p, err := s.principalByBearer(r.Context(), tok)
		if err != nil {
			s.unauthorized(w, err)
			return
		}
		if !s.allow(w, p) {
			return
		}
		ctx, release := s.holdLive(r.Context(), p)
		defer release()
		ctx = context.WithValue(auth.WithPrincipal(ctx, p), transportKey{}, viaBearer)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (s *Server) unauthorized(w http.ResponseWriter, err error) {
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("authentication lookup failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the server could not check credentials; try again")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="assent", error="invalid_token"`)
	writeError(w, http.StatusUnauthorized, "sign_in_required", "the token or session is unknown, expired or revoked; sign in again or use a valid token")
}

// allow applies the per-principal rate limit.
func (s *Server) allow(w http.ResponseWriter, p store.Principal) bool {
	if s.cfg.RateLimit < 0 {
		return true
	}
	s.limMu.Lock()
	l, ok := s.limiters[p.ID]
	if !ok {
		l = rate.NewLimiter(rate.Limit(s.cfg.RateLimit), s.cfg.RateBurst)
		s.limiters[p.ID] = l
	}
	s.limMu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		retryAfter(w, d)
		writeError(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("too many requests; retry after %s", d.Round(time.Millisecond)))
		return false
	}
	return true
}

// checkWebChange enforces the same-origin and CSRF rules on a
// cookie-authenticated request that changes state.
func (s *Server) checkWebChange(r *http.Request, sess store.Session) *apiError {
	if !s.sameOrigin(r) {
		return &apiError{Status: http.StatusForbidden, Code: "bad_origin", Message: "this change must come from the assent web UI itself (the Origin header is missing or another site's)"}
	}
	tok := r.Header.Get(csrfHeader)
	if tok == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		tok = r.PostFormValue(csrfField)
	}
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(sess.CSRF)) != 1 {
		return &apiError{Status: http.StatusForbidden, Code: "bad_origin", Message: "the request lacks this session's CSRF token; reload the page and try again"}
	}
	return nil
}

// sameOrigin reports whether r's Origin header names this server.
func (s *Server) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if s.cfg.BaseURL != "" {
		b, err := url.Parse(s.cfg.BaseURL)
		return err == nil && strings.EqualFold(b.Scheme, u.Scheme) && strings.EqualFold(b.Host, u.Host)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
}

// IssueToken creates a principal with a fresh bearer token and returns the
// token (shown once; only its hash is kept). An agent or service is
// supervised by the workspace owner; use IssueTokenFor to name others.
func IssueToken(ctx context.Context, st store.Principals, kind, name string, grants []string, now time.Time) (string, store.Principal, error) {
	return IssueTokenFor(ctx, st, kind, name, grants, nil, now)
}

// IssueTokenFor is IssueToken with the ids of the people who supervise the
// new principal. With none given, an agent or service is supervised by the
// workspace owner when st knows one. Every supervisor must be a person.
func IssueTokenFor(ctx context.Context, st store.Principals, kind, name string, grants, supervisors []string, now time.Time) (string, store.Principal, error) {
	switch kind {
	case store.KindHuman, store.KindAgent, store.KindService:
	default:
		return "", store.Principal{}, fmt.Errorf("kind %q is not one of human, agent, service", kind)
	}
	if strings.TrimSpace(name) == "" {
		return "", store.Principal{}, errors.New("a principal needs a name")
	}
	if len(supervisors) == 0 && kind != store.KindHuman {
		if set, ok := st.(interface {
			Setting(context.Context, string) (string, error)
		}); ok {
			if owner, err := set.Setting(ctx, settingOwner); err == nil {
				supervisors = []string{owner}
			}
		}
	}
	for _, id := range supervisors {
		sp, err := st.Principal(ctx, id)
		if err != nil || sp.Kind != store.KindHuman || sp.Revoked {
			return "", store.Principal{}, fmt.Errorf("unknown_supervisor: %q is not a person; name a human principal", id)
		}
	}
	tok := auth.NewSecret(auth.TokenPrefix)
	p := store.Principal{ID: auth.NewID("p_"), Kind: kind, Name: name, Grants: grants, Supervisors: supervisors, CreatedAt: now.UTC()}
	if err := st.CreatePrincipal(ctx, p, auth.Hash(tok)); err != nil {
		return "", store.Principal{}, err
	}
	return tok, p, nil
}

// NewSignInLink stores a one-time sign-in link for principalID and returns
// its URL under baseURL.
func NewSignInLink(ctx context.Context, st store.Sessions, principalID, baseURL string, now time.Time) (string, error) {
	secret := auth.NewSecret(auth.SignInPrefix)
	if err := st.CreateSignInLink(ctx, auth.Hash(secret), principalID, now.Add(SignInLinkTTL)); err != nil {
		return "", err
	}
	return strings.TrimRight(baseURL, "/") + "/signin/" + secret, nil
}

// Bootstrap is what a first start creates.
type Bootstrap struct {
	// First is true when this call created the workspace.
	First bool
	// AgentToken is the first agent's token, only when First.
	AgentToken string
	Owner      store.Principal
	Agent      store.Principal
}

// Setting names of the bootstrap principals.
const (
	settingOwner = "owner_principal"
	settingAgent = "agent_principal"
)

// EnsureBootstrap creates, on first start, the person who owns the workspace
// ("owner", who may approve) and one agent with a token. Later calls return
// the same principals and no token.
func EnsureBootstrap(ctx context.Context, st store.Store, now time.Time) (Bootstrap, error) {
	var b Bootstrap
	ownerID, err := st.Setting(ctx, settingOwner)
	if err == nil {
		agentID, err := st.Setting(ctx, settingAgent)
		if err != nil {
			return b, fmt.Errorf("bootstrap: agent principal missing: %w", err)
		}
		if b.Owner, err = st.Principal(ctx, ownerID); err != nil {
			return b, fmt.Errorf("bootstrap: owner: %w", err)
		}
		if b.Agent, err = st.Principal(ctx, agentID); err != nil {
			return b, fmt.Errorf("bootstrap: agent: %w", err)
		}
		return b, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return b, err
	}
	b.First = true
	b.Owner = store.Principal{ID: auth.NewID("p_"), Kind: store.KindHuman, Name: "owner", Grants: []string{"human.approve", "state.write", "tool.invoke", "control.write", "command.execute"}, CreatedAt: now.UTC()}
	if err := st.CreatePrincipal(ctx, b.Owner, nil); err != nil {
		return b, fmt.Errorf("bootstrap: %w", err)
	}
	tok, agent, err := IssueTokenFor(ctx, st, store.KindAgent, "agent", []string{"state.write", "tool.invoke"}, []string{b.Owner.ID}, now)
	if err != nil {
		return b, fmt.Errorf("bootstrap: %w", err)
	}
	b.AgentToken, b.Agent = tok, agent
	if err := st.SetSetting(ctx, settingAgent, agent.ID); err != nil {
		return b, err
	}
	// Written last: its presence marks a complete bootstrap.
	if err := st.SetSetting(ctx, settingOwner, b.Owner.ID); err != nil {
		return b, err
	}
	return b, nil
}

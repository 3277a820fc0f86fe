package server

import (
	"container/list"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/wire"
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
			writeError(w, wire.SignInRequired, "send 'Authorization: Bearer <token>' (assent token create makes one) or sign in through the web UI")
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
			writeError(w, wire.SignInRequired, "send 'Authorization: Bearer <token>'; assent serve prints an agent token, and assent token create makes more")
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
		writeError(w, wire.Unavailable, "the server could not check credentials; try again")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="assent", error="invalid_token"`)
	writeError(w, wire.SignInRequired, "the token or session is unknown, expired or revoked; sign in again or use a valid token")
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
		writeError(w, wire.RateLimited, fmt.Sprintf("too many requests; retry after %s", d.Round(time.Millisecond)))
		return false
	}
	return true
}

// checkWebChange enforces the same-origin and CSRF rules on a
// cookie-authenticated request that changes state.
func (s *Server) checkWebChange(r *http.Request, sess store.Session) *apiError {
	if !s.sameOrigin(r) {
		return apiErr(wire.BadOrigin, "this change must come from the assent web UI itself (the Origin header is missing or another site's)")
	}
	tok := r.Header.Get(csrfHeader)
	if tok == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		tok = r.PostFormValue(csrfField)
	}
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(sess.CSRF)) != 1 {
		return apiErr(wire.BadOrigin, "the request lacks this session's CSRF token; reload the page and try again")
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
func IssueToken(ctx context.Context, st store.Store, kind, name string, grants []string, now time.Time) (string, store.Principal, error) {
	return IssueTokenFor(ctx, st, kind, name, grants, nil, now)
}

// IssueTokenFor is IssueToken with the ids of the people who supervise the
// new principal. With none given, an agent or service is supervised by the
// workspace owner when st records one. Every supervisor must be a person.
func IssueTokenFor(ctx context.Context, st store.Store, kind, name string, grants, supervisors []string, now time.Time) (string, store.Principal, error) {
	if !store.ValidKind(kind) {
		return "", store.Principal{}, fmt.Errorf("kind %q is not one of human, agent, service", kind)
	}
	if strings.TrimSpace(name) == "" {
		return "", store.Principal{}, errors.New("a principal needs a name")
	}
	if len(supervisors) == 0 && kind != store.KindHuman {
		if owner, err := st.Settings().Setting(ctx, settingOwner); err == nil {
			supervisors = []string{owner}
		}
	}
	ps := st.Principals()
	for _, id := range supervisors {
		sp, err := ps.Principal(ctx, id)
		if err != nil || sp.Kind != store.KindHuman || sp.Revoked {
			return "", store.Principal{}, fmt.Errorf("unknown_supervisor: %q is not a person; name a human principal", id)
		}
	}
	tok := auth.NewSecret(auth.TokenPrefix)
	p := store.Principal{ID: auth.NewID("p_"), Kind: kind, Name: name, Grants: grants, Supervisors: supervisors, CreatedAt: now.UTC()}
	if err := ps.CreatePrincipal(ctx, p, auth.Hash(tok)); err != nil {
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
	ps, set := st.Principals(), st.Settings()
	ownerID, err := set.Setting(ctx, settingOwner)
	if err == nil {
		agentID, err := set.Setting(ctx, settingAgent)
		if err != nil {
			return b, fmt.Errorf("bootstrap: agent principal missing: %w", err)
		}
		if b.Owner, err = ps.Principal(ctx, ownerID); err != nil {
			return b, fmt.Errorf("bootstrap: owner: %w", err)
		}
		if b.Agent, err = ps.Principal(ctx, agentID); err != nil {
			return b, fmt.Errorf("bootstrap: agent: %w", err)
		}
		return b, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return b, err
	}
	b.First = true
	b.Owner = store.Principal{ID: auth.NewID("p_"), Kind: store.KindHuman, Name: "owner", Grants: []string{"human.approve", "state.write", "tool.invoke", "control.write", "command.execute"}, CreatedAt: now.UTC()}
	if err := ps.CreatePrincipal(ctx, b.Owner, nil); err != nil {
		return b, fmt.Errorf("bootstrap: %w", err)
	}
	tok, agent, err := IssueTokenFor(ctx, st, store.KindAgent, "agent", []string{"state.write", "tool.invoke"}, []string{b.Owner.ID}, now)
	if err != nil {
		return b, fmt.Errorf("bootstrap: %w", err)
	}
	b.AgentToken, b.Agent = tok, agent
	if err := set.SetSetting(ctx, settingAgent, agent.ID); err != nil {
		return b, err
	}
	// Written last: its presence marks a complete bootstrap.
	if err := set.SetSetting(ctx, settingOwner, b.Owner.ID); err != nil {
		return b, err
	}
	return b, nil
}

// PrincipalRevoked is the type of the event published when a principal is
// revoked. Its data is {"principal": "<id>"}; it is visible only to the
// revoked principal itself. The server's caches of authenticated principals
// drop the principal when they see it.
const PrincipalRevoked = "principal.revoked"

// Bounds of the cache of authenticated bearer tokens.
const (
	// principalCacheSize is how many tokens are remembered; the least
	// recently used is forgotten first.
	principalCacheSize = 4096
	// principalCacheTTL is how long a remembered token is trusted before
	// the store is asked again. It bounds how late a revocation made
	// outside this process (assent token revoke on the same database) is
	// noticed; revocations made through the server take effect at once.
	principalCacheTTL = 500 * time.Millisecond
)

// RevokePrincipal revokes principal id's tokens and sessions, ends what it
// holds open (event streams, MCP sessions), and announces the revocation
// on the event bus so that the next request with any of its tokens is
// refused.
func (s *Server) RevokePrincipal(ctx context.Context, id string) error {
	if err := s.store.RevokePrincipal(ctx, id); err != nil {
		return err
	}
	s.announceRevoked(id)
	s.live.endAll(id)
	return nil
}

// announceRevoked publishes a PrincipalRevoked event for id.
func (s *Server) announceRevoked(id string) {
	data, _ := json.Marshal(revokedData{Principal: id})
	s.bus.Publish(event.Event{Type: PrincipalRevoked, Owner: id, Data: data})
}

type revokedData struct {
	Principal string `json:"principal"`
}

// principalCache remembers the principals of recently used bearer tokens,
// keyed by the token's SHA-256 hash (the token itself is never kept). An
// entry is trusted for ttl, then checked against the store again. Every
// lookup first applies the PrincipalRevoked events published since the
// previous one, so a revocation announced on the bus is honoured by the
// very next request.
type principalCache struct {
	size int
	ttl  time.Duration
	now  func() time.Time // monotonic clock; replaced in tests

	mu      sync.Mutex
	revoked *event.Subscription // PrincipalRevoked events, nil once closed
	entries map[string]*list.Element
	lru     list.List // of *cachedPrincipal, most recently used first
	gen     uint64    // incremented on every applied revocation
}

type cachedPrincipal struct {
	key     string
	p       store.Principal
	checked time.Time
}

// alreadyDone is a context that is already done, for draining a subscription
// without waiting.
var alreadyDone = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func newPrincipalCache(bus *event.Bus, size int, ttl time.Duration) *principalCache {
	c := &principalCache{size: size, ttl: ttl, now: time.Now, entries: map[string]*list.Element{}}
	c.revoked = bus.Subscribe(bus.Seq(), 0, func(e event.Event) bool { return e.Type == PrincipalRevoked })
	return c
}

// lookup returns the principal of the token hashing to hash, from the
// cache when it is fresh, otherwise from load (whose answer is remembered
// unless it is an error or a revocation arrived meanwhile).
func (c *principalCache) lookup(ctx context.Context, hash []byte, load func(context.Context, []byte) (store.Principal, error)) (store.Principal, error) {
	c.mu.Lock()
	gen, ok := c.applyRevocationsLocked()
	if !ok {
		c.mu.Unlock()
		return load(ctx, hash)
	}
	if el, hit := c.entries[string(hash)]; hit {
		e := el.Value.(*cachedPrincipal)
		if c.now().Sub(e.checked) < c.ttl {
			c.lru.MoveToFront(el)
			p := e.p
			c.mu.Unlock()
			return p, nil
		}
	}
	c.mu.Unlock()

	checked := c.now()
	p, err := load(ctx, hash)
	if errors.Is(err, store.ErrNotFound) || err == nil && p.Revoked {
		// Revoked or gone: forget it, so it is not checked again for
		// nothing.
		c.mu.Lock()
		if el, hit := c.entries[string(hash)]; hit {
			c.removeLocked(el)
		}
		c.mu.Unlock()
	}
	if err != nil || p.Revoked {
		return p, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.applyRevocationsLocked(); !ok || g != gen {
		// A revocation arrived while the store was asked: the answer may
		// predate it, so it is used once and not remembered.
		return p, nil
	}
	// Clipped, so a caller appending to them cannot write into the
	// cached copy.
	p.Grants = slices.Clip(p.Grants)
	p.Supervisors = slices.Clip(p.Supervisors)
	if el, hit := c.entries[string(hash)]; hit {
		e := el.Value.(*cachedPrincipal)
		e.p, e.checked = p, checked
		c.lru.MoveToFront(el)
		return p, nil
	}
	key := string(hash)
	c.entries[key] = c.lru.PushFront(&cachedPrincipal{key: key, p: p, checked: checked})
	for c.lru.Len() > c.size {
		c.removeLocked(c.lru.Back())
	}
	return p, nil
}

// applyRevocationsLocked drops the principals named by the revocation
// events published since the last call and returns the revocation
// generation. It reports false when the bus is closed, after which nothing
// is cached.
func (c *principalCache) applyRevocationsLocked() (uint64, bool) {
	if c.revoked == nil {
		return 0, false
	}
	for {
		e, err := c.revoked.Next(alreadyDone)
		if errors.Is(err, event.ErrClosed) {
			c.revoked = nil
			c.clearLocked()
			return 0, false
		}
		if err != nil {
			return c.gen, true
		}
		c.gen++
		var d revokedData
		if e.Type != PrincipalRevoked || json.Unmarshal(e.Data, &d) != nil || d.Principal == "" {
			// A gap in the events (or an unreadable one): forget everything.
			c.clearLocked()
			continue
		}
		for el := c.lru.Front(); el != nil; {
			next := el.Next()
			if el.Value.(*cachedPrincipal).p.ID == d.Principal {
				c.removeLocked(el)
			}
			el = next
		}
	}
}

func (c *principalCache) removeLocked(el *list.Element) {
	delete(c.entries, el.Value.(*cachedPrincipal).key)
	c.lru.Remove(el)
}

func (c *principalCache) clearLocked() {
	clear(c.entries)
	c.lru.Init()
}

// len reports how many tokens the cache remembers.
func (c *principalCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// close stops following revocations and forgets every token.
func (c *principalCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.revoked != nil {
		c.revoked.Close()
		c.revoked = nil
	}
	c.clearLocked()
}

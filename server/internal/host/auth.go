package host

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
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// Lifetimes of web credentials.
const (
	sessionTTL    = 24 * time.Hour
	SessionCookie = "assent_session"
	CSRFHeader    = "X-CSRF-Token"
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

// FromWeb reports whether r is a person's gesture in the web UI: a
// cookie-authenticated request that passed the Origin and CSRF checks.
func FromWeb(r *http.Request) bool { return transportOf(r.Context()) == viaWeb }

func UnsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// Authed requires a principal: a bearer token, or a web session cookie. For
// cookie requests that change state it also requires a same-origin Origin
// header and the session's CSRF token. The request's context ends when the
// principal is revoked.
func (s *Host) Authed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var p store.Principal
		if tok, ok := Bearer(r); ok {
			var err error
			p, err = s.PrincipalByBearer(ctx, tok)
			if err != nil {
				s.Unauthorized(w, err)
				return
			}
			ctx = context.WithValue(ctx, transportKey{}, viaBearer)
		} else if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
			sess, err := s.Store.Session(ctx, auth.Hash(c.Value), s.Now())
			if err != nil {
				s.Unauthorized(w, err)
				return
			}
			if UnsafeMethod(r.Method) {
				if e := s.CheckWebChange(r, sess); e != nil {
					WriteAPIError(w, e)
					return
				}
			}
			if p, err = s.Store.Principal(ctx, sess.PrincipalID); err != nil || p.Revoked {
				s.Unauthorized(w, store.ErrNotFound)
				return
			}
			ctx = context.WithValue(ctx, transportKey{}, viaWeb)
		} else {
			WriteError(w, wire.SignInRequired, "send 'Authorization: Bearer <token>' (assent token create makes one) or sign in through the web UI")
			return
		}
		if !s.Allow(w, p) {
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
func (s *Host) holdLive(ctx context.Context, p store.Principal) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	forget := s.live.hold(p.ID, cancel)
	return ctx, func() {
		forget()
		cancel()
	}
}

// BearerOnly requires a bearer token (the MCP endpoint takes no cookies).
func (s *Host) BearerOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := Bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="assent", resource_metadata="`+s.ResourceMetadataURL(r)+`"`)
			WriteError(w, wire.SignInRequired, "send 'Authorization: Bearer <token>'; assent serve prints an agent token, assent token create makes more, and an MCP client may obtain one by OAuth (see the resource_metadata of this answer's WWW-Authenticate)")
			return
		}
		p, err := s.PrincipalByBearer(r.Context(), tok)
		if err != nil {
			s.unauthorized(w, err, s.ResourceMetadataURL(r))
			return
		}
		if !s.Allow(w, p) {
			return
		}
		ctx, release := s.holdLive(r.Context(), p)
		defer release()
		ctx = context.WithValue(auth.WithPrincipal(ctx, p), transportKey{}, viaBearer)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (s *Host) Unauthorized(w http.ResponseWriter, err error) { s.unauthorized(w, err, "") }

// unauthorized is Unauthorized naming, when metadata is not empty, the
// protected resource metadata from which an OAuth client learns how to get
// a token.
func (s *Host) unauthorized(w http.ResponseWriter, err error, metadata string) {
	if err != nil && store.Unavailable(err) {
		// Nothing is known of the caller and nothing was done: the same
		// 503 store_unavailable as any request the store could not serve.
		s.Log.Warn("authentication lookup failed: the store is unavailable", "err", err)
		WriteAPIError(w, FromToolError(StoreUnavailableError()))
		return
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.Log.Error("authentication lookup failed", "err", err)
		WriteError(w, wire.Unavailable, "the server could not check credentials; try again")
		return
	}
	challenge := `Bearer realm="assent", error="invalid_token"`
	if metadata != "" {
		challenge += `, resource_metadata="` + metadata + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	WriteError(w, wire.SignInRequired, "the token or session is unknown, expired or revoked; sign in again or use a valid token")
}

// Allow applies the per-principal rate limit.
func (s *Host) Allow(w http.ResponseWriter, p store.Principal) bool {
	if s.Config.RateLimit < 0 {
		return true
	}
	s.limMu.Lock()
	l, ok := s.limiters[p.ID]
	if !ok {
		l = rate.NewLimiter(rate.Limit(s.Config.RateLimit), s.Config.RateBurst)
		s.limiters[p.ID] = l
	}
	s.limMu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		RetryAfter(w, d)
		WriteError(w, wire.RateLimited, fmt.Sprintf("too many requests; retry after %s", d.Round(time.Millisecond)))
		return false
	}
	return true
}

// CheckWebChange enforces the same-origin and CSRF rules on a
// cookie-authenticated request that changes state.
func (s *Host) CheckWebChange(r *http.Request, sess store.Session) *wire.Error {
	if !s.SameOrigin(r) {
		return wire.New(wire.BadOrigin, "this change must come from the assent web UI itself (the Origin header is missing or another site's)")
	}
	tok := r.Header.Get(CSRFHeader)
	if tok == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		tok = r.PostFormValue(csrfField)
	}
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(sess.CSRF)) != 1 {
		return wire.New(wire.BadOrigin, "the request lacks this session's CSRF token; reload the page and try again")
	}
	return nil
}

// BaseURLOf returns the externally visible URL of this server as r
// reached it: Config.BaseURL when set, otherwise the scheme and Host of r.
// It never ends in a slash.
func (s *Host) BaseURLOf(r *http.Request) string {
	if s.Config.BaseURL != "" {
		return strings.TrimRight(s.Config.BaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ResourceMetadataURL returns the URL of the protected resource metadata
// (RFC 9728) of the endpoint r asked for.
func (s *Host) ResourceMetadataURL(r *http.Request) string {
	return s.BaseURLOf(r) + "/.well-known/oauth-protected-resource" + r.URL.Path
}

// SameOrigin reports whether r's Origin header names this server.
func (s *Host) SameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if s.Config.BaseURL != "" {
		b, err := url.Parse(s.Config.BaseURL)
		return err == nil && strings.EqualFold(b.Scheme, u.Scheme) && strings.EqualFold(b.Host, u.Host)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
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
	// PrincipalCacheTTL is how long a remembered token is trusted before
	// the store is asked again. It bounds how late a revocation made
	// outside this process (assent token revoke on the same database) is
	// noticed; revocations made through the server take effect at once.
	PrincipalCacheTTL = 500 * time.Millisecond
)

// RevokePrincipal revokes principal id's tokens and sessions, ends what it
// holds open (event streams, MCP sessions), and announces the revocation
// on the event bus so that the next request with any of its tokens is
// refused.
func (s *Host) RevokePrincipal(ctx context.Context, id string) error {
	if err := s.Store.RevokePrincipal(ctx, id); err != nil {
		return err
	}
	// On a shared event log the announcement reaches this node's cache
	// only after a round trip through the store; the revocation takes
	// effect here at once.
	s.principals.forget(id)
	s.announceRevoked(id)
	s.live.endAll(id)
	return nil
}

// announceRevoked publishes a PrincipalRevoked event for id.
func (s *Host) announceRevoked(id string) {
	data, _ := json.Marshal(revokedData{Principal: id})
	s.Bus.Publish(event.Event{Type: PrincipalRevoked, Owner: id, Data: data})
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
	now  func() time.Time // the host's clock (Config.Now)

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
		c.forgetLocked(d.Principal)
	}
}

// forget drops principal id's tokens, as a revocation event would, and
// keeps answers loaded meanwhile from being remembered.
func (c *principalCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.forgetLocked(id)
}

// forgetLocked drops principal id's tokens.
func (c *principalCache) forgetLocked(id string) {
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*cachedPrincipal).p.ID == id {
			c.removeLocked(el)
		}
		el = next
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

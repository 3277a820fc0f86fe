package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// runScopeRoutes are the only routes a run-scoped token (ASSENT_RUN_TOKEN)
// may use. A route with {id} serves the token's own Run only. Every other
// route, /mcp included, refuses such a token, so a route added later is
// closed to it unless it is listed here.
var runScopeRoutes = map[string]bool{
	"GET /v1/health":                            true,
	"GET /v1/whoami":                            true,
	"GET /v1/runs/{id}":                         true,
	"GET /v1/runs/{id}/views/{view}":            true,
	"GET /v1/runs/{id}/logs":                    true,
	"POST /v1/runs/{id}/controls/claim":         true,
	"POST /v1/runs/{id}/controls/{cid}/handled": true,
	"POST /v1/runs/{id}/controls/{cid}/failed":  true,
	"POST /v1/runs/{id}/trace":                  true,
}

// runScopeOf returns the Runs a run-scoped principal is confined to, and
// whether p is run-scoped at all.
func runScopeOf(p store.Principal) (runIDs []string, scoped bool) {
	for _, g := range p.Grants {
		if rest, ok := strings.CutPrefix(g, GrantRunScope); ok {
			scoped = true
			id, _, _ := strings.Cut(rest, "/")
			runIDs = append(runIDs, id)
		}
	}
	return runIDs, scoped
}

// runScopeAllows reports whether a run-scoped principal confined to runIDs
// may make request r, which mux routes to pattern.
func runScopeAllows(pattern string, r *http.Request, runIDs []string) bool {
	if !runScopeRoutes[pattern] {
		return false
	}
	_, path, _ := strings.Cut(pattern, " ")
	if !strings.HasPrefix(path, "/v1/runs/{id}") {
		return true
	}
	// Every listed Run route is /v1/runs/{id}/…: the Run id is the third
	// path segment.
	segs := strings.Split(r.URL.EscapedPath(), "/")
	if len(segs) < 4 {
		return false
	}
	id, err := url.PathUnescape(segs[3])
	if err != nil {
		return false
	}
	for _, rid := range runIDs {
		if rid == id {
			return true
		}
	}
	return false
}

// resolvedBearer is a bearer token already looked up for this request.
type resolvedBearer struct {
	token     string
	principal store.Principal
}

type resolvedBearerKey struct{}

// PrincipalByBearer looks up the principal of bearer token tok, reusing the
// lookup scopeGate made for this request, then the server's cache of
// recently used tokens, then the store.
func (s *Host) PrincipalByBearer(ctx context.Context, tok string) (store.Principal, error) {
	if rb, ok := ctx.Value(resolvedBearerKey{}).(resolvedBearer); ok && rb.token == tok {
		return rb.principal, nil
	}
	if s.AccessTokens != nil && strings.HasPrefix(tok, auth.AccessTokenPrefix) {
		// Short-lived OAuth access tokens are checked every time, for
		// their expiry and audience; they are not cached.
		return s.AccessTokens(ctx, tok)
	}
	h := sha256.Sum256([]byte(tok)) // auth.Hash, without the copy to the heap
	if s.principals == nil {
		return s.Store.PrincipalByToken(ctx, h[:])
	}
	return s.principals.lookup(ctx, h[:], s.Store.PrincipalByToken)
}

// ScopeGate confines run-scoped tokens to runScopeRoutes, before any route
// sees the request: it applies to every route and every way a route
// authenticates. Requests with no or an unknown bearer token pass through to
// their route, which answers them.
func (s *Host) ScopeGate(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := Bearer(r)
		if !ok {
			mux.ServeHTTP(w, r)
			return
		}
		p, err := s.PrincipalByBearer(r.Context(), tok)
		if err != nil {
			mux.ServeHTTP(w, r)
			return
		}
		if runIDs, scoped := runScopeOf(p); scoped {
			_, pattern := mux.Handler(r)
			if !runScopeAllows(pattern, r, runIDs) {
				WriteError(w, wire.Forbidden,
					"a run-scoped token (ASSENT_RUN_TOKEN) may only claim and settle its own Run's Controls, append its Trace and read its status and logs; use an agent or service token for anything else")
				return
			}
		}
		ctx := context.WithValue(r.Context(), resolvedBearerKey{}, resolvedBearer{token: tok, principal: p})
		mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

// BodyDeadline bounds the time a request body may take to arrive to
// Config.BodyReadTimeout. Once the body has been read the deadline is
// lifted, so a response may stream for as long as it needs.
func (s *Host) BodyDeadline(next http.Handler) http.Handler {
	if s.Config.BodyReadTimeout < 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(s.Config.BodyReadTimeout)); err == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline once the body is
// complete.
type deadlineBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}

// limiterSet keeps one token-bucket limiter per key, holding at most
// maxLimiterKeys keys; past that, keys whose bucket is full again are
// forgotten first.
type limiterSet struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	m     map[string]*rate.Limiter
}

const maxLimiterKeys = 10000

func newLimiterSet(limit rate.Limit, burst int) *limiterSet {
	return &limiterSet{limit: limit, burst: burst, m: map[string]*rate.Limiter{}}
}

// reserve takes one token for key and returns how long to wait before
// retrying, or 0 when the event is allowed.
func (l *limiterSet) reserve(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxLimiterKeys {
			for k, v := range l.m {
				if v.TokensAt(now) >= float64(l.burst) {
					delete(l.m, k)
				}
			}
			if len(l.m) >= maxLimiterKeys {
				// Every client is busy: refuse newcomers rather than grow.
				return time.Second
			}
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.m[key] = lim
	}
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// revalidateInterval is how often the server checks that the principals
// holding open streams and MCP sessions are still valid.
const revalidateInterval = 500 * time.Millisecond

// stillValid reports whether principal id may keep what it holds open. A
// failed lookup counts as valid: a store hiccup must not end every stream.
func (s *Host) stillValid(ctx context.Context, id string) bool {
	p, err := s.Store.Principal(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	return err != nil || !p.Revoked
}

// liveSet tracks what each principal holds open — event streams, MCP
// requests and MCP sessions — and ends all of it once the principal is
// revoked (by this server or by another process sharing the store). While
// anything is held, one goroutine re-checks the holders every interval.
type liveSet struct {
	done     context.Context
	valid    func(context.Context, string) bool
	interval time.Duration
	// revoked, when set, is told of each principal found no longer
	// valid, after what it held has been ended.
	revoked func(id string)

	mu       sync.Mutex
	held     map[string]map[*liveHold]struct{}
	watching bool
}

type liveHold struct{ end func() }

func newLiveSet(done context.Context, valid func(context.Context, string) bool, interval time.Duration) *liveSet {
	return &liveSet{done: done, valid: valid, interval: interval, held: map[string]map[*liveHold]struct{}{}}
}

// hold records that principalID holds something open; end stops it. The
// returned release forgets it again (it is safe to call more than once).
func (l *liveSet) hold(principalID string, end func()) (release func()) {
	h := &liveHold{end: end}
	l.mu.Lock()
	m := l.held[principalID]
	if m == nil {
		m = map[*liveHold]struct{}{}
		l.held[principalID] = m
	}
	m[h] = struct{}{}
	start := !l.watching && l.done.Err() == nil
	if start {
		l.watching = true
	}
	l.mu.Unlock()
	if start {
		go l.watch()
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if m := l.held[principalID]; m != nil {
			delete(m, h)
			if len(m) == 0 {
				delete(l.held, principalID)
			}
		}
	}
}

// endAll ends everything principalID holds.
func (l *liveSet) endAll(principalID string) {
	l.mu.Lock()
	m := l.held[principalID]
	delete(l.held, principalID)
	l.mu.Unlock()
	for h := range m {
		h.end()
	}
}

func (l *liveSet) watch() {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.done.Done():
			l.mu.Lock()
			l.watching = false
			l.mu.Unlock()
			return
		case <-t.C:
		}
		l.mu.Lock()
		if len(l.held) == 0 {
			l.watching = false
			l.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(l.held))
		for id := range l.held {
			ids = append(ids, id)
		}
		l.mu.Unlock()
		for _, id := range ids {
			if !l.valid(l.done, id) {
				l.endAll(id)
				if l.revoked != nil {
					l.revoked(id)
				}
			}
		}
	}
}

// len reports how many things principalID holds open.
func (l *liveSet) len(principalID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held[principalID])
}

// Grants carried by a run-scoped token: the Run's owner, and the one Run
// generation it may act on.
const (
	GrantRunOwner = "run.owner:"
	GrantRunScope = "run.scope:"
)

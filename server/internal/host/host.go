package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
	"golang.org/x/time/rate"
)

// Config is server.Config, which package server converts to it: the two
// keep the same fields in the same order, documented there.
type Config struct {
	DataDir                string
	Store                  store.Store
	Logger                 *slog.Logger
	BaseURL                string
	RateLimit              float64
	RateBurst              int
	SessionTimeout         time.Duration
	MaxSessions            int
	BodyReadTimeout        time.Duration
	SignInRate             int
	ShutdownGrace          time.Duration
	Now                    func() time.Time
	RunUser                string
	Node                   string
	OAuthInsecureClientIDs bool
	LeaseTTL               time.Duration
	Notify                 notify.Options
	RunNetwork             string
	DecisionDeadlines      map[string]time.Duration
	RemindBefore           []time.Duration
}

// DefaultNode is the node name of a server that is given none: the host
// name and a short digest of the data directory, so that it stays the
// same across restarts and differs between two servers on one host.
func DefaultNode(dataDir string) string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "node"
	}
	sum := sha256.Sum256([]byte(dataDir))
	return name + "-" + hex.EncodeToString(sum[:4])
}

// Host is what the server shares with its parts: configuration, the
// store, the event bus, the tool registry, authentication and the page
// layout.
type Host struct {
	Config  Config
	Log     *slog.Logger
	Store   Stores
	Bus     *event.Bus
	Tools   *tool.Registry
	Started time.Time
	Now     func() time.Time
	Web     *WebUI
	// SharedBus is set when the bus runs on the store's event log, which
	// other nodes share: their events arrive here too.
	SharedBus bool
	// Origin is an opaque id of this process, random at every start. The
	// parts stamp it on the events of the changes they make, so that
	// nodes sharing the bus tell their own changes from the others'
	// (see FollowOtherNodes).
	Origin string

	limMu    sync.Mutex
	limiters map[string]*rate.Limiter

	// signInLimits rate-limits sign-in attempts per client address.
	signInLimits *limiterSet

	// live tracks what each principal holds open, so revoking the
	// principal ends it.
	live *liveSet

	// principals caches the principals of recently used bearer tokens.
	principals *principalCache

	// notices holds one-shot banners for web sessions.
	notices *noticeBox

	// supervision caches who supervises whom (see supervision.go).
	supervision supervisionCache

	// Streams is cancelled when the server shuts down, ending long-lived
	// responses (event Streams) so shutdown is not held up by them.
	Streams      context.Context
	cancelStream context.CancelFunc

	// AccessTokens, when set, looks up the principal of an OAuth access
	// token (one with auth.AccessTokenPrefix): ErrNotFound when it is
	// unknown, expired, revoked or meant for another server.
	AccessTokens func(ctx context.Context, token string) (store.Principal, error)

	// OpenItems counts what a principal has waiting, by kind; the server
	// sets it to sum its parts' counters.
	OpenItems func(ctx context.Context, p store.Principal) map[string]int
}

// Stores is the store as the server uses it: each part is looked up once,
// when the server is built, so s.store.Principal(…) reads the principals
// part directly. Selectors are unambiguous because no two parts share a
// method name.
type Stores struct {
	store.Principals
	store.Sessions
	store.Settings
	store.Audit
	store.Proposals
	store.Runs
	Flows flow.Store
	// ControlRegistry keeps the control registry's proposals, undo histories
	// and hosted forms; Screens keeps the screens shown to people.
	ControlRegistry store.Controls
	Screens         store.Screens
	// Backend is the Store the parts came from.
	Backend store.Store
}

func newStores(st store.Store) Stores {
	return Stores{
		Principals:      st.Principals(),
		Sessions:        st.Sessions(),
		Settings:        st.Settings(),
		Audit:           st.Audit(),
		Proposals:       st.Proposals(),
		Runs:            st.Runs(),
		Flows:           st.Flows(),
		ControlRegistry: st.ControlRegistry(),
		Screens:         st.Screens(),
		Backend:         st,
	}
}

// Mux is the server's ServeMux, remembering the patterns registered
// on it so that the routes can be listed.
type Mux struct {
	*http.ServeMux
	patterns []string
}

func NewMux() *Mux { return &Mux{ServeMux: http.NewServeMux()} }

// Handle registers handler for pattern.
func (m *Mux) Handle(pattern string, handler http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, handler)
}

// HandleFunc registers handler for pattern.
func (m *Mux) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(handler))
}

func (s *Host) Recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.Log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				WriteError(w, wire.Internal, "the request failed inside the server; try again, and report it if it persists")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func SecurityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// NewHost applies cfg's defaults and builds what the parts share. ctx
// bounds the reads of the store it makes while it is built.
func NewHost(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: no store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = 100
	}
	if cfg.RateBurst == 0 {
		cfg.RateBurst = 200
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 32
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = 30 * time.Second
	}
	if cfg.SignInRate == 0 {
		cfg.SignInRate = 20
	}
	s := &Host{
		Config:   cfg,
		Log:      cfg.Logger,
		Store:    newStores(cfg.Store),
		Tools:    tool.NewRegistry(),
		Started:  cfg.Now(),
		Now:      cfg.Now,
		limiters: map[string]*rate.Limiter{},
		notices:  newNoticeBox(),
		Origin:   auth.NewID("n_"),
	}
	if cfg.Node == "" {
		cfg.Node = DefaultNode(cfg.DataDir)
		s.Config.Node = cfg.Node
	}
	var err error
	if s.Bus, s.SharedBus, err = openBus(ctx, cfg); err != nil {
		return nil, err
	}
	s.Streams, s.cancelStream = context.WithCancel(context.Background())
	s.live = newLiveSet(s.Streams, s.stillValid, revalidateInterval)
	s.live.revoked = s.announceRevoked
	s.principals = newPrincipalCache(s.Bus, principalCacheSize, PrincipalCacheTTL)
	s.principals.now = cfg.Now
	if cfg.SignInRate > 0 {
		s.signInLimits = newLimiterSet(rate.Limit(float64(cfg.SignInRate)/60), cfg.SignInRate)
	}
	if s.Web, err = newWebUI(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openBus returns the event bus. On a store several nodes may share
// (PostgreSQL), it runs on the store's event log: every node delivers
// every node's events, in one order and with one numbering, so a client
// resumes (Last-Event-ID) on any node. On a store one node owns (SQLite),
// the bus stays in this process.
func openBus(ctx context.Context, cfg Config) (bus *event.Bus, shared bool, err error) {
	opts := event.Options{Now: cfg.Now, Logger: cfg.Logger}
	if !cfg.Store.Shared() {
		return event.New(opts), false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := event.Open(ctx, cfg.Store.Cluster().EventLog(), opts)
	if err != nil {
		return nil, false, fmt.Errorf("server: open the event bus on the store's event log: %w", err)
	}
	return b, true, nil
}

// Hold keeps end, to be called when principalID is revoked; release
// forgets it. Whatever a principal keeps open (an event stream, an MCP
// session) is held, so that revoking the principal ends it.
func (s *Host) Hold(principalID string, end func()) (release func()) {
	return s.live.hold(principalID, end)
}

// EndStreams ends the long-lived responses (event streams, live feeds),
// so that shutdown is not held up by them.
func (s *Host) EndStreams() { s.cancelStream() }

// Close ends the streams and releases what the host holds (not the store).
func (s *Host) Close() {
	s.cancelStream()
	s.principals.close()
	s.Bus.Close()
}

// Patterns returns the route patterns registered on m, in order.
func (m *Mux) Patterns() []string { return slices.Clone(m.patterns) }

// CachedPrincipals reports how many bearer tokens' principals are cached.
func (s *Host) CachedPrincipals() int { return s.principals.len() }

// Held reports how many things principalID holds open (event streams, MCP
// sessions) that its revocation would end.
func (s *Host) Held(principalID string) int { return s.live.len(principalID) }

// PendingNotices reports how many one-shot banners wait to be shown.
func (s *Host) PendingNotices() int {
	s.notices.mu.Lock()
	defer s.notices.mu.Unlock()
	return len(s.notices.m)
}

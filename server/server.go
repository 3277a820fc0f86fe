// Package server is assent's front door: the HTTP API under /v1, the event
// stream, the MCP endpoint at /mcp, and the web UI for people.
//
// Every request carries a principal. Programs and agents authenticate with a
// bearer token; people use a session cookie obtained from a one-time sign-in
// link. The transport, never the request body, decides who is asking and
// whether a command comes from an agent (MCP) or from a person (a web-UI
// gesture, CSRF- and Origin-checked).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/wire"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Config configures a Server.
type Config struct {
	// DataDir is the data directory (logs, run files, recipes).
	DataDir string
	// Store is the persistence backend. The server does not close it.
	Store store.Store
	// Logger receives structured logs. Secrets never reach it.
	Logger *slog.Logger
	// Demo loads the demo workspace.
	Demo bool
	// BaseURL is the externally visible URL (scheme://host:port), used in
	// printed links and for same-origin checks. Empty means the listener's
	// address over http.
	BaseURL string
	// RateLimit is the sustained requests per second allowed per principal
	// (default 100); RateBurst the burst (default 200). A negative RateLimit
	// disables limiting.
	RateLimit float64
	RateBurst int
	// SessionTimeout ends idle MCP sessions (default 30 minutes).
	SessionTimeout time.Duration
	// MaxSessions caps the live MCP sessions one principal may hold
	// (default 32). Opening one more first closes that principal's
	// least recently used idle session; when none is idle the new session
	// is refused with too_many_sessions. A negative value disables the cap.
	MaxSessions int
	// BodyReadTimeout bounds how long reading a request body may take
	// (default 30 seconds); a slower body is cut and its connection
	// closed. Responses, including event and MCP streams, are not bounded
	// by it. A negative value disables it.
	BodyReadTimeout time.Duration
	// SignInRate is how many sign-in attempts per minute one client
	// address may make (default 20, which is also the burst). A negative
	// value disables the limit.
	SignInRate int
	// ShutdownGrace bounds how long in-flight requests may take to finish
	// on shutdown (default 10 seconds).
	ShutdownGrace time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// RunUser is the user Run and tool processes run as when the server
	// runs as root: a user name or numeric "uid:gid" (default "nobody").
	RunUser string
}

// Server serves assent. Create it with New, start it with Serve.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   stores
	bus     *event.Bus
	tools   *tool.Registry
	started time.Time
	now     func() time.Time
	handler http.Handler
	web     *webUI
	mcp     *mcpEndpoint

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

	// streams is cancelled when the server shuts down, ending long-lived
	// responses (event streams) so shutdown is not held up by them.
	streams      context.Context
	cancelStream context.CancelFunc

	counters []openCounter

	// patterns are the route patterns of handler, in registration order.
	patterns []string

	runsState
	controlsState
	screensState
	flowsState
}

// stores is the store as the server uses it: each part is looked up once,
// when the server is built, so s.store.Principal(…) reads the principals
// part directly. Selectors are unambiguous because no two parts share a
// method name.
type stores struct {
	store.Principals
	store.Sessions
	store.Settings
	store.Audit
	store.Proposals
	store.Runs
	flows flow.Store
	// backend is the Store the parts came from.
	backend store.Store
}

func newStores(st store.Store) stores {
	return stores{
		Principals: st.Principals(),
		Sessions:   st.Sessions(),
		Settings:   st.Settings(),
		Audit:      st.Audit(),
		Proposals:  st.Proposals(),
		Runs:       st.Runs(),
		flows:      st.Flows(),
		backend:    st,
	}
}

// openCounter counts a kind of open item a principal has waiting (for
// runtime_status and the inbox badge).
type openCounter struct {
	name  string
	count func(ctx context.Context, p store.Principal) int
}

// New builds a server. It registers the built-in tools and, with
// Config.Demo, the demo workspace.
func New(ctx context.Context, cfg Config) (*Server, error) {
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
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		store:    newStores(cfg.Store),
		bus:      event.New(event.Options{Now: cfg.Now}),
		tools:    tool.NewRegistry(),
		started:  cfg.Now(),
		now:      cfg.Now,
		limiters: map[string]*rate.Limiter{},
		notices:  newNoticeBox(),
	}
	s.streams, s.cancelStream = context.WithCancel(context.Background())
	s.live = newLiveSet(s.streams, s.stillValid, revalidateInterval)
	s.live.revoked = s.announceRevoked
	s.principals = newPrincipalCache(s.bus, principalCacheSize, principalCacheTTL)
	if cfg.SignInRate > 0 {
		s.signInLimits = newLimiterSet(rate.Limit(float64(cfg.SignInRate)/60), cfg.SignInRate)
	}
	if err := s.tools.Register(s.runtimeStatusTool()); err != nil {
		return nil, err
	}
	var err error
	if s.web, err = newWebUI(); err != nil {
		return nil, err
	}
	for _, init := range []func(context.Context) error{s.initControls, s.initScreens, s.initRuns, s.initFlows, s.initInboxWait} {
		if err := init(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.mcp = newMCPEndpoint(s)
	s.handler = s.routes()
	return s, nil
}

// Tools returns the tool registry, so an embedding application can add its
// own tools.
func (s *Server) Tools() *tool.Registry { return s.tools }

// Bus returns the event bus.
func (s *Server) Bus() *event.Bus { return s.bus }

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// routeMux is the server's ServeMux, remembering the patterns registered
// on it so that the routes can be listed.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

// Handle registers handler for pattern.
func (m *routeMux) Handle(pattern string, handler http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, handler)
}

// HandleFunc registers handler for pattern.
func (m *routeMux) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(handler))
}

func (s *Server) routes() http.Handler {
	mux := newRouteMux()
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.Handle("GET /v1/whoami", s.authed(http.HandlerFunc(s.handleWhoami)))
	mux.Handle("GET /v1/events", s.authed(http.HandlerFunc(s.handleEvents)))
	mux.Handle("/mcp", s.bearerOnly(s.mcp))
	s.routesWeb(mux)
	s.routesControls(mux)
	s.routesScreens(mux)
	s.routesRuns(mux)
	s.routesFlows(mux)
	s.patterns = mux.patterns
	return s.recoverer(securityHeaders(s.bodyDeadline(s.scopeGate(mux.ServeMux))))
}

// Serve serves on ln until ctx is done, then shuts down gracefully: it stops
// accepting, ends event streams, lets in-flight requests finish within
// Config.ShutdownGrace, and closes MCP sessions.
//
// Request headers must arrive within 10 seconds and bodies within
// Config.BodyReadTimeout; responses are not time-bounded, so event and MCP
// streams stay open.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(s.cancelStream)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "grace", s.cfg.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.mcp.close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s", s.cfg.ShutdownGrace)
	}
	return err
}

// Close releases what the server holds (not the store).
func (s *Server) Close() {
	s.cancelStream()
	if s.mcp != nil {
		s.mcp.close()
	}
	s.closeFlows()
	s.closeRuns()
	s.closeScreens()
	s.closeControls()
	s.principals.close()
	s.bus.Close()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": assent.Version, "store": s.store.backend.Kind()})
}

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	sup := []map[string]string{}
	for _, id := range p.Supervisors {
		name := ""
		if sp, err := s.store.Principal(r.Context(), id); err == nil {
			name = sp.Name
		}
		sup = append(sup, map[string]string{"id": id, "name": name})
	}
	writeJSON(w, http.StatusOK, struct {
		store.Principal
		Supervisors []map[string]string `json:"supervisors"`
	}{p, sup})
}

// openItems counts what p has waiting, by kind.
func (s *Server) openItems(ctx context.Context, p store.Principal) map[string]int {
	out := map[string]int{}
	for _, c := range s.counters {
		out[c.name] = c.count(ctx, p)
	}
	return out
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeError(w, wire.Internal, "the request failed inside the server; try again, and report it if it persists")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

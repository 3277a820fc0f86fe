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
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/asks"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/server/internal/host"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/server/oauth"
	"github.com/assent-run/assent/server/rules"
	"github.com/assent-run/assent/server/runs"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server serves assent. Create it with New, start it with Serve, and
// release it with Close.
type Server struct {
	host    *host.Host
	handler http.Handler
	mcp     *mcpEndpoint

	// patterns are the route patterns of handler, in registration order.
	patterns []string

	controls *controls.Part
	screens  *screens.Part
	runs     *runs.Part
	flows    *flows.Part
	oauth    *oauth.Server
	notify   *notifypart.Part
	rules    *rules.Part
	asks     *asks.Part
	// parts lists every part once, in the order of the inbox's sections.
	parts []host.Part
	// closers release what New built, in the order it was built; Close
	// calls them last first.
	closers []func()
	// notesMu serializes the read-modify-write of an inbox item's notes.
	notesMu sync.Mutex
}

// New builds a server on cfg.Store, reading the store under ctx while it
// is built, and registers the built-in tools. An application then adds its
// own (programs, tools, screens, Recipes, forms) through the parts' methods
// (Flows, Screens, Runs, Controls) before Serve; package demo is an
// example. The caller closes the server, then the store.
func New(ctx context.Context, cfg Config) (*Server, error) {
	h, err := host.NewHost(ctx, host.Config(cfg))
	if err != nil {
		return nil, err
	}
	s := &Server{host: h}
	s.onClose(h.Close)
	if err := s.build(ctx, cfg); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) build(ctx context.Context, cfg Config) error {
	if err := s.host.Web.AddPages(templateFS, "templates/*.html"); err != nil {
		return err
	}
	s.host.OpenItems = s.countOpen
	if err := s.host.Tools.Register(s.runtimeStatusTool()); err != nil {
		return err
	}
	if err := s.buildParts(ctx); err != nil {
		return err
	}
	if err := s.initInboxWait(ctx); err != nil {
		return err
	}
	h := s.host
	var err error
	s.oauth, err = oauth.New(oauth.Deps{
		Gate:    h,
		Store:   oauth.Stores{Principals: h.Store.Principals, Audit: h.Store.Audit, OAuth: h.Store.Backend.OAuth()},
		Log:     h.Log,
		Now:     h.Now,
		Web:     h.Web,
		BaseURL: h.Config.BaseURL,
	}, oauth.Options{InsecureClientIDs: cfg.OAuthInsecureClientIDs})
	if err != nil {
		return err
	}
	// The authorization server's access tokens authenticate requests.
	h.AccessTokens = s.oauth.PrincipalOfAccessToken
	s.mcp = newMCPEndpoint(s)
	s.onClose(s.mcp.close)
	// Streams end first when the server closes.
	s.onClose(s.host.EndStreams)
	s.handler = s.routes()
	// Runs in a network of their own reach the server through the run
	// API's socket, which serves the same handler.
	s.runs.Manager().ServeRunAPI(s.handler)
	return nil
}

// onClose adds f to what Close calls; Close calls the last added first.
func (s *Server) onClose(f func()) { s.closers = append(s.closers, f) }

//go:embed templates/*.html
var templateFS embed.FS

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := host.NewMux()
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.HandleFunc("GET /v1/ready", s.handleReady)
	mux.HandleFunc("GET "+api.OpenAPIPath, handleOpenAPI)
	mux.Handle("GET /v1/whoami", s.host.Authed(http.HandlerFunc(s.handleWhoami)))
	mux.Handle("GET /v1/events", s.host.Authed(http.HandlerFunc(s.handleEvents)))
	s.routesInbox(mux)
	mux.Handle("/mcp", s.host.BearerOnly(s.mcp))
	s.oauth.Routes(mux)
	s.routesWeb(mux)
	for _, p := range s.parts {
		p.Routes(mux)
	}
	s.patterns = mux.Patterns()
	return s.host.Recoverer(host.SecurityHeaders(s.host.BodyDeadline(s.oauth.WithResource(s.host.ScopeGate(mux.ServeMux)))))
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
		ErrorLog:          slog.NewLogLogger(s.host.Log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(s.host.EndStreams)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.host.Log.Info("shutting down", "grace", s.host.Config.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.host.Config.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.mcp.close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s", s.host.Config.ShutdownGrace)
	}
	return err
}

// Close releases what the server holds, in the reverse order of its
// building: streams and MCP sessions end first, then each part closes
// after the parts built on it. It does not close the store.
func (s *Server) Close() {
	for _, f := range slices.Backward(s.closers) {
		f()
	}
	s.closers = nil
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	host.WriteJSON(w, http.StatusOK, api.Health{Status: "ok", Version: assent.Version, Store: s.host.Store.Backend.Kind()})
}

// readyTimeout bounds the store check of GET /v1/ready, so that a load
// balancer's probe answers promptly when the store hangs.
const readyTimeout = time.Second

// handleReady answers whether this node should receive requests: 200 when
// it reached its store within readyTimeout and its Run leases are current,
// 503 otherwise. It needs no token, like /v1/health, and says no more than
// which check failed.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	storeOK := true
	if _, err := s.host.Store.Backend.Settings().Setting(ctx, readyProbeSetting); err != nil && !errors.Is(err, store.ErrNotFound) {
		storeOK = false
	}
	leasesOK := s.runs == nil || s.runs.LeasesCurrent(time.Now())
	body := api.Ready{Status: "ready", Store: "ok", Leases: "ok", Version: assent.Version, Node: s.host.Config.Node}
	status := http.StatusOK
	if !storeOK {
		body.Store, body.Status, status = "unreachable", "not_ready", http.StatusServiceUnavailable
	}
	if !leasesOK {
		body.Leases, body.Status, status = "behind", "not_ready", http.StatusServiceUnavailable
	}
	if status != http.StatusOK {
		body.Error = wire.New(wire.Unavailable, "this node cannot serve now: its store is unreachable or its Run leases are not current; send requests to another node")
	}
	w.Header().Set("Cache-Control", "no-store")
	host.WriteJSON(w, status, body)
}

// readyProbeSetting is the setting GET /v1/ready reads to reach the store;
// it need not exist.
const readyProbeSetting = "ready_probe"

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	sup := []api.Supervisor{}
	for _, id := range p.Supervisors {
		name := ""
		if sp, err := s.host.Store.Principal(r.Context(), id); err == nil {
			name = sp.Name
		}
		sup = append(sup, api.Supervisor{ID: id, Name: name})
	}
	host.WriteJSON(w, http.StatusOK, api.Whoami{
		ID: p.ID, Kind: p.Kind, Name: p.Name, Grants: p.Grants, Supervisors: sup,
		CreatedAt: p.CreatedAt, Revoked: p.Revoked,
	})
}

// countOpen counts what p has waiting, by kind. Each part counts a
// person's decisions routed to them (host.CountRouted), without building
// the cards, so that an item routed to other people is neither shown in
// their inbox nor counted.
func (s *Server) countOpen(ctx context.Context, p store.Principal) map[string]int {
	out := map[string]int{}
	for _, part := range s.parts {
		if c, ok := part.(host.Counter); ok {
			maps.Copy(out, c.CountOpen(ctx, p))
		}
	}
	return out
}

// buildParts builds the parts on the host, each given the parts it
// calls: screens hold their fields as private forms of controls, and Flow
// effects command controls and start Runs. Each part closes before the
// parts it was built on.
func (s *Server) buildParts(ctx context.Context) error {
	var err error
	if s.controls, err = controls.New(ctx, controlsDeps(s.host)); err != nil {
		return err
	}
	s.parts = append(s.parts, s.controls)
	s.onClose(s.controls.Close)
	if s.screens, err = screens.New(ctx, screensDeps(s.host, s.controls)); err != nil {
		return err
	}
	s.parts = append(s.parts, s.screens)
	s.onClose(s.screens.Close)
	// The registry stops writing before the screens close, so that the
	// screens unregister their fields without erasing what the store
	// keeps for them. (Closing it twice is harmless.)
	s.onClose(s.controls.Close)
	if s.runs, err = runs.New(ctx, runsDeps(s.host)); err != nil {
		return err
	}
	s.onClose(s.runs.Close)
	if s.flows, err = flows.New(ctx, flowsDeps(s.host, s.controls, s.runs.Manager())); err != nil {
		return err
	}
	s.onClose(s.flows.Close)
	s.parts = append(s.parts, s.flows, s.runs)
	if s.notify, err = notifypart.New(ctx, notifyDeps(s.host, s.controls.Registry())); err != nil {
		return err
	}
	s.onClose(s.notify.Close)
	s.parts = append(s.parts, s.notify)
	if s.rules, err = rules.New(ctx, rulesDeps(s.host, s.controls)); err != nil {
		return err
	}
	s.parts = append(s.parts, s.rules)
	s.controls.UseStanding(s.rules)
	if s.asks, err = asks.New(ctx, asksDeps(s.host)); err != nil {
		return err
	}
	s.onClose(s.asks.Close)
	s.parts = append(s.parts, s.asks)
	return nil
}

// AddScreenView offers the screen view on ms as an MCP resource (for an
// MCP server other than the one at /mcp, such as assent mcp's).
func (s *Server) AddScreenView(ms *mcp.Server) { s.screens.AddView(ms) }

// Controls returns the controls part: the control registry and the forms
// assent hosts.
func (s *Server) Controls() *controls.Part { return s.controls }

// Screens returns the screens part, where an application registers the
// tools its screens' buttons call and shows screens.
func (s *Server) Screens() *screens.Part { return s.screens }

// Runs returns the Runs part.
func (s *Server) Runs() *runs.Part { return s.runs }

// Flows returns the Flows part: the kernel, its inventory, approval
// summaries and effect-only tools.
func (s *Server) Flows() *flows.Part { return s.flows }

// SessionCookie names the cookie that carries a person's web session.
const SessionCookie = "assent_session"

// Tools returns the tool registry the server offers at /mcp, where an
// application registers its own tools next to the built-in ones.
func (s *Server) Tools() *tool.Registry { return s.host.Tools }

// Events returns the event bus behind GET /v1/events: an application
// publishes its own events on it.
func (s *Server) Events() *event.Bus { return s.host.Bus }

// Node returns the name of this node among the nodes sharing the store
// (Config.Node, or the default the server chose).
func (s *Server) Node() string { return s.host.Config.Node }

// Bootstrap creates, on the workspace's first start, the person who owns
// it and a first agent with a bearer token (returned only then); later
// calls return the same two principals.
func (s *Server) Bootstrap(ctx context.Context) (auth.Bootstrap, error) {
	return auth.EnsureBootstrap(ctx, s.host.Config.Store, s.host.Now())
}

// SignInLink returns a one-time link that signs the person principalID in
// to the web UI, under baseURL: the address people reach the server at,
// such as the embedding program's own. An empty baseURL means
// Config.BaseURL.
func (s *Server) SignInLink(ctx context.Context, principalID, baseURL string) (string, error) {
	if baseURL == "" {
		baseURL = s.host.Config.BaseURL
	}
	if baseURL == "" {
		return "", errors.New("server: a sign-in link needs a base URL; pass one or set Config.BaseURL")
	}
	p, err := s.host.Store.Principal(ctx, principalID)
	if err != nil {
		return "", fmt.Errorf("server: sign-in link for %s: %w", principalID, err)
	}
	if p.Kind != store.KindHuman || p.Revoked {
		return "", fmt.Errorf("server: sign-in link for %s: only a person who is not revoked signs in to the web UI", principalID)
	}
	return auth.NewSignInLink(ctx, s.host.Store.Sessions, principalID, baseURL, s.host.Now())
}

// AddAgent creates an agent named name with grants, supervised by the
// people supervisors names (the workspace's owner when none), and returns
// its bearer token, shown only here.
func (s *Server) AddAgent(ctx context.Context, name string, grants []string, supervisors ...string) (token string, p store.Principal, err error) {
	token, p, err = auth.IssueTokenFor(ctx, s.host.Config.Store, store.KindAgent, name, grants, supervisors, s.host.Now())
	if err != nil {
		return "", store.Principal{}, fmt.Errorf("server: add agent %q: %w", name, err)
	}
	return token, p, nil
}

// RevokePrincipal revokes principalID: its token and web sessions stop
// working, and the event streams and MCP sessions it holds end.
func (s *Server) RevokePrincipal(ctx context.Context, principalID string) error {
	return s.host.RevokePrincipal(ctx, principalID)
}

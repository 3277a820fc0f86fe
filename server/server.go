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
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/oauth"
	"github.com/assent-run/assent/server/runs"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/server/wire"
	"github.com/assent-run/assent/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server serves assent. Create it with New, start it with Serve.
type Server struct {
	*host.Host
	handler http.Handler
	mcp     *mcpEndpoint

	// patterns are the route patterns of handler, in registration order.
	patterns []string

	controls *controls.Part
	screens  *screens.Part
	runs     *runs.Part
	flows    *flows.Part
	oauth    *oauth.Server
	// parts lists every part once, in the order of the inbox's sections.
	parts []host.Part
}

// New builds a server. It registers the built-in tools and, with
// Config.Demo, the demo workspace.
func New(ctx context.Context, cfg host.Config) (*Server, error) {
	h, err := host.NewHost(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{Host: h}
	if err := s.Web.AddPages(templateFS, "templates/*.html"); err != nil {
		s.Host.Close()
		return nil, err
	}
	s.Host.OpenItems = s.countOpen
	if err := s.Tools.Register(s.runtimeStatusTool()); err != nil {
		return nil, err
	}
	if err := s.buildParts(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.initInboxWait(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.oauth = oauth.New(s.Host, oauth.Options{InsecureClientIDs: cfg.OAuthInsecureClientIDs})
	s.mcp = newMCPEndpoint(s)
	s.handler = s.routes()
	return s, nil
}

//go:embed templates/*.html
var templateFS embed.FS

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := host.NewMux()
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.HandleFunc("GET /v1/ready", s.handleReady)
	mux.Handle("GET /v1/whoami", s.Authed(http.HandlerFunc(s.handleWhoami)))
	mux.Handle("GET /v1/events", s.Authed(http.HandlerFunc(s.handleEvents)))
	mux.Handle("/mcp", s.BearerOnly(s.mcp))
	s.oauth.Routes(mux)
	s.routesWeb(mux)
	for _, p := range s.parts {
		p.Routes(mux)
	}
	s.patterns = mux.Patterns()
	return s.Recoverer(host.SecurityHeaders(s.BodyDeadline(s.oauth.WithResource(s.ScopeGate(mux.ServeMux)))))
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
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(s.EndStreams)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Log.Info("shutting down", "grace", s.Config.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.Config.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.mcp.close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s", s.Config.ShutdownGrace)
	}
	return err
}

// Close releases what the server holds (not the store).
func (s *Server) Close() {
	s.EndStreams()
	if s.mcp != nil {
		s.mcp.close()
	}
	if s.controls != nil {
		// The registry stops writing first, so the screens closing next
		// unregister their fields without erasing what the store keeps.
		s.controls.Close()
	}
	for _, p := range slices.Backward(s.parts) {
		if c, ok := p.(interface{ Close() }); ok {
			c.Close()
		}
	}
	s.Host.Close()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	host.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": assent.Version, "store": s.Store.Backend.Kind()})
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
	if _, err := s.Store.Backend.Settings().Setting(ctx, readyProbeSetting); err != nil && !errors.Is(err, store.ErrNotFound) {
		storeOK = false
	}
	leasesOK := s.runs == nil || s.runs.LeasesCurrent(time.Now())
	body := map[string]any{"status": "ready", "store": "ok", "leases": "ok", "version": assent.Version, "node": s.Config.Node}
	status := http.StatusOK
	if !storeOK {
		body["store"], body["status"], status = "unreachable", "not_ready", http.StatusServiceUnavailable
	}
	if !leasesOK {
		body["leases"], body["status"], status = "behind", "not_ready", http.StatusServiceUnavailable
	}
	if status != http.StatusOK {
		body["error"] = wire.New(wire.Unavailable, "this node cannot serve now: its store is unreachable or its Run leases are not current; send requests to another node")
	}
	w.Header().Set("Cache-Control", "no-store")
	host.WriteJSON(w, status, body)
}

// readyProbeSetting is the setting GET /v1/ready reads to reach the store;
// it need not exist.
const readyProbeSetting = "ready_probe"

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	sup := []map[string]string{}
	for _, id := range p.Supervisors {
		name := ""
		if sp, err := s.Store.Principal(r.Context(), id); err == nil {
			name = sp.Name
		}
		sup = append(sup, map[string]string{"id": id, "name": name})
	}
	host.WriteJSON(w, http.StatusOK, whoami{
		ID: p.ID, Kind: p.Kind, Name: p.Name, Grants: p.Grants, Supervisors: sup,
		CreatedAt: p.CreatedAt, CreatedAtOld: p.CreatedAt, Revoked: p.Revoked,
	})
}

// whoami is GET /v1/whoami's answer: the principal, with its supervisors
// named.
type whoami struct {
	ID          string              `json:"id"`
	Kind        string              `json:"kind"`
	Name        string              `json:"name"`
	Grants      []string            `json:"grants"`
	Supervisors []map[string]string `json:"supervisors"`
	CreatedAt   time.Time           `json:"created_at"`
	// CreatedAtOld is CreatedAt under its spelling before, carried for
	// one release.
	CreatedAtOld time.Time `json:"createdAt"`
	Revoked      bool      `json:"revoked,omitempty"`
}

// countOpen counts what p has waiting, by kind.
func (s *Server) countOpen(ctx context.Context, p store.Principal) map[string]int {
	out := map[string]int{}
	for _, part := range s.parts {
		if c, ok := part.(host.Counter); ok {
			kind, n := c.CountOpen(ctx, p)
			out[kind] = n
		}
	}
	return out
}

// buildParts builds the parts on the host, each given the parts it
// calls: screens hold their fields as private forms of controls, and Flow
// effects command controls and start Runs.
func (s *Server) buildParts(ctx context.Context) error {
	var err error
	if s.controls, err = controls.New(ctx, s.Host); err != nil {
		return err
	}
	s.parts = append(s.parts, s.controls)
	if s.screens, err = screens.New(ctx, s.Host, s.controls); err != nil {
		return err
	}
	s.parts = append(s.parts, s.screens)
	if s.runs, err = runs.New(ctx, s.Host); err != nil {
		return err
	}
	if s.flows, err = flows.New(ctx, s.Host, s.controls, s.runs.Manager()); err != nil {
		s.runs.Close()
		return err
	}
	s.parts = append(s.parts, s.flows, s.runs)
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

// Config is the configuration of a Server.
type Config = host.Config

// SessionCookie names the cookie that carries a person's web session.
const SessionCookie = host.SessionCookie

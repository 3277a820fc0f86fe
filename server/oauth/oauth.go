// Package oauth is assent's OAuth 2.1 authorization server for MCP clients,
// following the authorization section of the MCP specification: protected
// resource metadata (RFC 9728), authorization server metadata (RFC 8414),
// the authorization code grant with PKCE S256 only, clients identified by
// a client ID metadata document or registered dynamically (RFC 7591),
// tokens bound to this server by the resource parameter (RFC 8707),
// short-lived access tokens, rotating refresh tokens and revocation
// (RFC 7009).
//
// Consenting is a person's decision in the web UI: it creates an agent
// principal whose grants and supervisors the person picks. Every token of
// one authorization acts as that principal, so it is listed, audited and
// revoked like any other; revoking it ends the authorization. Every secret
// is kept as its SHA-256 hash, and every grant lives in the store, so
// another node or a restart loses nothing.
package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// Default lifetimes.
const (
	DefaultAccessTTL  = 30 * time.Minute
	DefaultRefreshTTL = 30 * 24 * time.Hour
	DefaultCodeTTL    = 2 * time.Minute
)

// Paths of the endpoints. Clients learn them from the metadata documents.
const (
	PathAuthorize = "/oauth/authorize"
	PathToken     = "/oauth/token"
	PathRegister  = "/oauth/register"
	PathRevoke    = "/oauth/revoke"
)

// Options configures the authorization server.
type Options struct {
	// AccessTTL, RefreshTTL and CodeTTL are the lifetimes of access
	// tokens, refresh tokens and authorization codes (defaults above).
	AccessTTL, RefreshTTL, CodeTTL time.Duration
	// InsecureClientIDs lets client ID metadata documents be fetched over
	// plain http and from loopback and private addresses. It is for tests
	// and local development only: it lets a client make the server fetch
	// from inside its network.
	InsecureClientIDs bool
	// Fetch is the HTTP client that fetches client ID metadata documents
	// (default: one with a 5-second timeout that follows no redirects and,
	// without InsecureClientIDs, resolves a host once and dials only the
	// public address it checked).
	Fetch *http.Client
}

// Server is the authorization server. Create it with New, mount it with
// Routes.
type Server struct {
	h     Deps
	st    store.OAuth
	opt   Options
	fetch *http.Client
	docs  *docCache

	pruneMu   sync.Mutex
	lastPrune time.Time
}

// New returns the authorization server built on d. Its
// PrincipalOfAccessToken authenticates the requests that carry its access
// tokens.
func New(d Deps, opt Options) (*Server, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if opt.AccessTTL <= 0 {
		opt.AccessTTL = DefaultAccessTTL
	}
	if opt.RefreshTTL <= 0 {
		opt.RefreshTTL = DefaultRefreshTTL
	}
	if opt.CodeTTL <= 0 {
		opt.CodeTTL = DefaultCodeTTL
	}
	s := &Server{h: d, st: d.Store.OAuth, opt: opt, fetch: opt.Fetch, docs: newDocCache()}
	if s.fetch == nil {
		s.fetch = newFetchClient(opt.InsecureClientIDs, nil)
	}
	return s, nil
}

// Routes registers the metadata documents, the endpoints and the consent
// page.
func (s *Server) Routes(mux *host.Mux) {
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", s.handleResourceMetadata)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/{path...}", s.handleResourceMetadata)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.handleServerMetadata)
	mux.HandleFunc("GET "+PathAuthorize, s.handleAuthorize)
	mux.HandleFunc("POST "+PathAuthorize, s.handleConsent)
	mux.HandleFunc("POST "+PathToken, s.handleToken)
	mux.HandleFunc("POST "+PathRegister, s.handleRegister)
	mux.HandleFunc("POST "+PathRevoke, s.handleRevoke)
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/{path...}", "/.well-known/oauth-authorization-server", PathToken, PathRegister, PathRevoke} {
		mux.HandleFunc("OPTIONS "+p, preflight)
	}
}

// WithResource records in each request's context the resource identifiers
// by which the request reached this server, against which the audience of
// an access token is checked. It wraps the whole handler.
func (s *Server) WithResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request under a name the server does not answer to gets no
		// base: its access token is then refused.
		base, _ := s.baseOf(r)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resourceKey{}, base)))
	})
}

type resourceKey struct{}

// resources returns the identifiers of this server as a resource: its base
// URL and its MCP endpoint.
func resources(base string) []string { return []string{base + "/mcp", base} }

// cors lets a browser-based client read a public answer.
func cors(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, Mcp-Protocol-Version")
}

func preflight(w http.ResponseWriter, r *http.Request) {
	cors(w)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleResourceMetadata(w http.ResponseWriter, r *http.Request) {
	base, e := s.baseOf(r)
	if e != nil {
		cors(w)
		writeBaseError(w, e)
		return
	}
	resource := base
	switch p := r.PathValue("path"); p {
	case "":
	case "mcp":
		resource = base + "/mcp"
	default:
		cors(w)
		host.WriteError(w, wire.NotFound, "no protected resource at /"+p+"; the MCP endpoint's metadata is /.well-known/oauth-protected-resource/mcp")
		return
	}
	cors(w)
	host.WriteJSON(w, http.StatusOK, &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{base},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "assent",
		ScopesSupported:        agentGrants,
	})
}

// serverMetadata is the authorization server metadata (RFC 8414).
type serverMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethods          []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethods     []string `json:"revocation_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
}

func (s *Server) handleServerMetadata(w http.ResponseWriter, r *http.Request) {
	cors(w)
	base, e := s.baseOf(r)
	if e != nil {
		writeBaseError(w, e)
		return
	}
	host.WriteJSON(w, http.StatusOK, serverMetadata{
		Issuer:                            base,
		AuthorizationEndpoint:             base + PathAuthorize,
		TokenEndpoint:                     base + PathToken,
		RegistrationEndpoint:              base + PathRegister,
		RevocationEndpoint:                base + PathRevoke,
		ScopesSupported:                   agentGrants,
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethods:          []string{"none"},
		RevocationEndpointAuthMethods:     []string{"none"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		ClientIDMetadataDocumentSupported: true,
		IssParameterSupported:             true,
	})
}

// agentGrants are the grants a person may give an agent on the consent
// page, in the order shown. A person can give only grants they hold.
var agentGrants = []string{"state.write", "tool.invoke", "control.write", "command.execute"}

// defaultGrants are checked on the consent page unless the client asked
// for others: an agent reads, proposes and calls tools, but executes no
// command unless the person chooses so.
var defaultGrants = []string{"state.write", "tool.invoke"}

// grantData is what a code, access or refresh token binds.
type grantData struct {
	RedirectURI string `json:"redirect_uri,omitempty"`
	Challenge   string `json:"code_challenge,omitempty"`
	Resource    string `json:"resource"`
	Scope       string `json:"scope,omitempty"`
	// Consenter is the person whose consent created the authorization.
	// Its tokens act only while that person is not revoked and still
	// holds every grant the agent was given.
	Consenter string `json:"consenter,omitempty"`
}

func hashOf(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// PrincipalOfAccessToken returns the principal of the access token tok:
// ErrNotFound when it is unknown, expired, revoked or meant for another
// server.
func (s *Server) PrincipalOfAccessToken(ctx context.Context, tok string) (store.Principal, error) {
	g, err := s.st.OAuthGrant(ctx, hashOf(tok), store.OAuthAccess, s.h.Now())
	if err != nil {
		return store.Principal{}, err
	}
	base, _ := ctx.Value(resourceKey{}).(string)
	var d grantData
	if json.Unmarshal(g.Data, &d) != nil || base == "" || !slices.Contains(resources(base), d.Resource) {
		// Issued for another resource: not a token of this server.
		return store.Principal{}, store.ErrNotFound
	}
	p, err := s.h.Store.Principal(ctx, g.PrincipalID)
	if err != nil {
		return store.Principal{}, err
	}
	if p.Revoked {
		return store.Principal{}, store.ErrNotFound
	}
	why, err := s.consenterLost(ctx, p, d)
	if err != nil {
		return store.Principal{}, err
	}
	if why != "" {
		s.endAuthorization(ctx, p.ID, why)
		return store.Principal{}, store.ErrNotFound
	}
	return p, nil
}

// consenterLost reports why the person who consented to the authorization
// d of agent no longer stands behind it, or "" when they do. An agent
// connected by OAuth never keeps authority its person has lost: a person
// revoked, or who no longer holds a grant the agent was given, ends the
// authorization on its next use.
//
// An error means the store could not answer: the use is refused without
// ending the authorization.
func (s *Server) consenterLost(ctx context.Context, agent store.Principal, d grantData) (string, error) {
	if d.Consenter == "" {
		return "no consenting person is recorded for it", nil
	}
	c, err := s.h.Store.Principal(ctx, d.Consenter)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && (c.Revoked || c.Kind != store.KindHuman)):
		return "the person who consented was revoked", nil
	case err != nil:
		return "", fmt.Errorf("read the consenting person of %s: %w", agent.ID, err)
	}
	for _, g := range agent.Grants {
		if !c.Has(g) {
			return "the person who consented no longer holds " + g, nil
		}
	}
	return "", nil
}

// audit records what happened to an authorization. It never records a
// secret.
func (s *Server) audit(ctx context.Context, actor, source, action, subject string, detail any) {
	b, _ := json.Marshal(detail)
	rec := store.AuditRecord{Time: s.h.Now().UTC(), PrincipalID: actor, Source: source, Subject: subject, Action: action, OK: true, Detail: string(b)}
	if _, err := s.h.Store.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		s.h.Log.Error("oauth audit failed", "action", action, "err", err)
	}
}

// endAuthorization revokes the agent principal of an authorization, which
// ends every token issued under it.
func (s *Server) endAuthorization(ctx context.Context, principalID, why string) {
	err := s.h.RevokePrincipal(context.WithoutCancel(ctx), principalID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.h.Log.Error("oauth revoke failed", "principal", principalID, "err", err)
		return
	}
	if err == nil {
		s.audit(ctx, principalID, "agent", "oauth.revoke", principalID, map[string]string{"why": why})
	}
}

// newSecret returns a fresh secret with prefix.
func newSecret(prefix string) string { return auth.NewSecret(prefix) }

// writeOAuthError writes an OAuth error answer (RFC 6749 section 5.2).
func writeOAuthError(w http.ResponseWriter, status int, code, description string) {
	host.WriteJSON(w, status, map[string]string{"error": code, "error_description": description})
}

package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// Bounds of client metadata.
const (
	maxClientDocument = 64 << 10
	maxRedirectURIs   = 10
	maxClientName     = 200
)

// client is a client as the authorization server knows it.
type client struct {
	ID           string
	Name         string
	RedirectURIs []string
}

// oauthError is a refusal with an OAuth error code.
type oauthError struct {
	code, description string
}

func (e *oauthError) Error() string { return e.code + ": " + e.description }

func errorf(code, format string, args ...any) *oauthError {
	return &oauthError{code: code, description: fmt.Sprintf(format, args...)}
}

// checkRedirectURI reports whether u may receive authorization codes: an
// https URL, an http URL on a loopback address (a native app's listener),
// or a private-use scheme of a native app. It has no fragment.
func checkRedirectURI(u string) error {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" || p.Fragment != "" || p.User != nil {
		return fmt.Errorf("redirect URI %q is not an absolute URL without a fragment", u)
	}
	switch strings.ToLower(p.Scheme) {
	case "https":
		if p.Host == "" {
			return fmt.Errorf("redirect URI %q has no host", u)
		}
	case "http":
		if !loopbackHost(p.Hostname()) {
			return fmt.Errorf("redirect URI %q uses http on a host other than a loopback address; use https, or http://127.0.0.1 for a local listener", u)
		}
	case "javascript", "data", "file", "vbscript", "blob", "about", "ftp", "ws", "wss":
		return fmt.Errorf("redirect URI %q uses scheme %s, which cannot receive a code", u, p.Scheme)
	}
	return nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// redirectMatches reports whether the redirect_uri of a request is one the
// client registered: the same string, except that the port of a loopback
// http address may differ (a native app listens on any free port).
func redirectMatches(registered []string, got string) bool {
	if slices.Contains(registered, got) {
		return true
	}
	g, err := url.Parse(got)
	if err != nil || g.Scheme != "http" || !loopbackHost(g.Hostname()) {
		return false
	}
	for _, r := range registered {
		p, err := url.Parse(r)
		if err != nil || p.Scheme != "http" || !loopbackHost(p.Hostname()) {
			continue
		}
		if p.Hostname() == g.Hostname() && p.EscapedPath() == g.EscapedPath() && p.RawQuery == g.RawQuery {
			return true
		}
	}
	return false
}

// checkMetadata checks registered or published client metadata and returns
// the client it describes.
func checkMetadata(id string, m *oauthex.ClientRegistrationMetadata) (client, error) {
	if len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > maxRedirectURIs {
		return client{}, errorf("invalid_redirect_uri", "give between 1 and %d redirect_uris", maxRedirectURIs)
	}
	for _, u := range m.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return client{}, errorf("invalid_redirect_uri", "%v", err)
		}
	}
	if a := m.TokenEndpointAuthMethod; a != "" && a != "none" {
		return client{}, errorf("invalid_client_metadata", "token_endpoint_auth_method %q is not supported; assent serves public clients, which use \"none\" and PKCE", a)
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return client{}, errorf("invalid_client_metadata", "grant type %q is not supported; use authorization_code and refresh_token", g)
		}
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return client{}, errorf("invalid_client_metadata", "response type %q is not supported; use code", rt)
		}
	}
	name := strings.TrimSpace(m.ClientName)
	if len(name) > maxClientName {
		return client{}, errorf("invalid_client_metadata", "client_name is longer than %d bytes", maxClientName)
	}
	return client{ID: id, Name: name, RedirectURIs: m.RedirectURIs}, nil
}

// handleRegister is dynamic client registration (RFC 7591).
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	cors(w)
	if d := s.h.AnonymousDelay(r); d > 0 {
		host.RetryAfter(w, d)
		writeOAuthError(w, http.StatusTooManyRequests, "temporarily_unavailable", "too many registrations from this address; retry after "+d.Round(time.Second).String())
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "send the client metadata as application/json")
		return
	}
	var m oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxClientDocument)).Decode(&m); err != nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON object of client metadata (RFC 7591)")
		return
	}
	id := auth.NewID("c_")
	if _, err := checkMetadata(id, &m); err != nil {
		var oe *oauthError
		errors.As(err, &oe)
		writeOAuthError(w, http.StatusBadRequest, oe.code, oe.description)
		return
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "none"
	}
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	if len(m.ResponseTypes) == 0 {
		m.ResponseTypes = []string{"code"}
	}
	// Only the fields assent reads are kept, so that nothing a client
	// sends is echoed to a person without having been checked.
	kept := oauthex.ClientRegistrationMetadata{
		RedirectURIs:            m.RedirectURIs,
		TokenEndpointAuthMethod: m.TokenEndpointAuthMethod,
		GrantTypes:              m.GrantTypes,
		ResponseTypes:           m.ResponseTypes,
		ClientName:              strings.TrimSpace(m.ClientName),
		ClientURI:               m.ClientURI,
		Scope:                   m.Scope,
		SoftwareID:              m.SoftwareID,
		SoftwareVersion:         m.SoftwareVersion,
	}
	b, _ := json.Marshal(kept)
	s.pruneSometimes(r.Context())
	now := s.h.Now().UTC()
	if err := s.st.CreateOAuthClient(r.Context(), store.OAuthClient{ID: id, Metadata: b, CreatedAt: now}); err != nil {
		s.h.Log.Error("oauth register failed", "err", err)
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the registration could not be stored; try again")
		return
	}
	// The response is written by hand: the SDK's response type marshals
	// the issue time as a JSON number only when it is not zero, and a
	// public client gets no secret.
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	out["client_id"] = id
	out["client_id_issued_at"] = now.Unix()
	host.WriteJSON(w, http.StatusCreated, out)
}

// clientByID resolves a client_id: an https URL is a client ID metadata
// document, fetched now; anything else must have been registered.
func (s *Server) clientByID(ctx context.Context, id string) (client, error) {
	if id == "" {
		return client{}, errorf("invalid_request", "client_id is missing")
	}
	if strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://") {
		return s.fetchClient(ctx, id)
	}
	c, err := s.st.OAuthClient(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return client{}, errorf("invalid_client", "client %q is not registered here; register it (the registration_endpoint of the server metadata) or use a client ID metadata document URL", id)
	}
	if err != nil {
		return client{}, err
	}
	var m oauthex.ClientRegistrationMetadata
	if err := json.Unmarshal(c.Metadata, &m); err != nil {
		return client{}, fmt.Errorf("client %s: corrupt metadata: %w", id, err)
	}
	return client{ID: id, Name: m.ClientName, RedirectURIs: m.RedirectURIs}, nil
}

// checkClientIDURL reports whether id may name a client ID metadata
// document: an https URL with a path, no fragment, no credentials.
func (s *Server) checkClientIDURL(id string) error {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil || u.Path == "" || u.Path == "/" {
		return errorf("invalid_client", "client_id %q is not a URL with a path that can name a client ID metadata document", id)
	}
	if u.Scheme != "https" && !(s.opt.InsecureClientIDs && u.Scheme == "http") {
		return errorf("invalid_client", "client_id %q must be an https URL", id)
	}
	return nil
}

// fetchClient returns the client of the client ID metadata document at
// id, from the cache when it was fetched or refused lately.
func (s *Server) fetchClient(ctx context.Context, id string) (client, error) {
	if err := s.checkClientIDURL(id); err != nil {
		return client{}, err
	}
	now := s.h.Now()
	if e, ok := s.docs.get(id, now); ok {
		return e.c, e.err
	}
	host := hostOf(id)
	if !s.docs.allow(host, now) {
		return client{}, errorf("temporarily_unavailable", "too many client ID metadata documents were fetched from %s lately; try again in a minute", host)
	}
	c, ttl, err := s.fetchDocument(ctx, id)
	var oe *oauthError
	switch {
	case errors.As(err, &oe):
		s.docs.put(id, docEntry{err: err, expires: now.Add(docRefusalTTL)}, now)
	case err == nil && ttl > 0:
		s.docs.put(id, docEntry{c: c, expires: now.Add(ttl)}, now)
	}
	return c, err
}

// fetchDocument fetches and checks the client ID metadata document at id,
// and returns how long it may be kept.
func (s *Server) fetchDocument(ctx context.Context, id string) (client, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return client{}, 0, errorf("invalid_client", "client_id %q cannot be fetched", id)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.fetch.Do(req)
	if err != nil {
		return client{}, 0, errorf("invalid_client", "the client ID metadata document at %q could not be fetched", id)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return client{}, 0, errorf("invalid_client", "the client ID metadata document at %q answered %d", id, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxClientDocument+1))
	if err != nil || len(b) > maxClientDocument {
		return client{}, 0, errorf("invalid_client", "the client ID metadata document at %q is unreadable or larger than %d bytes", id, maxClientDocument)
	}
	var doc struct {
		ClientID string `json:"client_id"`
		oauthex.ClientRegistrationMetadata
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return client{}, 0, errorf("invalid_client", "the client ID metadata document at %q is not a JSON object", id)
	}
	if doc.ClientID != id {
		return client{}, 0, errorf("invalid_client", "the client ID metadata document at %q names client_id %q; it must name its own URL", id, doc.ClientID)
	}
	c, err := checkMetadata(id, &doc.ClientRegistrationMetadata)
	if err != nil {
		return client{}, 0, err
	}
	return c, cacheLifetime(resp.Header), nil
}

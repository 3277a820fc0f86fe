package oauth

import (
	"net"
	"net/http"
	"strings"
)

// baseOf returns the URL that names this server, as a protected resource
// and as an authorization server, for request r. It never comes from what
// a client says alone: it is Deps.BaseURL when the server has one, the
// Host header being ignored. Without one it is the address the request's
// connection reached (the listener's), and a request whose Host header
// names anything else is refused, so that no token is bound to, and no
// metadata document names, an address a client made up.
func (s *Server) baseOf(r *http.Request) (string, *oauthError) {
	if s.h.BaseURL != "" {
		return strings.TrimRight(s.h.BaseURL, "/"), nil
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return "", errorf("invalid_request", "this server has no base URL and cannot tell which address the request reached; start it with --base-url set to its public URL")
	}
	scheme, port := "http", "80"
	if r.TLS != nil {
		scheme, port = "https", "443"
	}
	host := strings.ToLower(r.Host)
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	addr := strings.ToLower(local.String())
	if host != addr {
		return "", errorf("invalid_request", "this server has no --base-url, so OAuth answers only under the address it listens on (%s), not %q; start it with --base-url set to the URL clients use", addr, r.Host)
	}
	return scheme + "://" + addr, nil
}

// writeBaseError answers a request refused by baseOf.
func writeBaseError(w http.ResponseWriter, e *oauthError) {
	writeOAuthError(w, http.StatusMisdirectedRequest, e.code, e.description)
}

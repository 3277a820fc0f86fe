package oauth

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// FuzzRedirectURI checks the redirect URI rules on arbitrary input: no
// panic; an accepted URI is absolute, has no fragment, uses no scheme that
// cannot receive a code, uses http only on a loopback host, and matches
// itself when registered.
func FuzzRedirectURI(f *testing.F) {
	for _, s := range []string{
		"https://app.example/cb", "http://127.0.0.1:7777/callback", "http://localhost/cb", "http://[::1]:9/cb",
		"http://example.com/cb", "vscode://ext/cb", "javascript:alert(1)", "data:text/html,x", "https://a/cb#frag",
		"https://user:pw@a/cb", "", "/relative", "https://", "HTTP://127.0.0.1/cb", "http://127.0.0.1.evil.example/cb",
	} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, u, other string) {
		if err := checkRedirectURI(u); err == nil {
			p, perr := url.Parse(u)
			if perr != nil || p.Scheme == "" || p.Fragment != "" {
				t.Fatalf("accepted %q, which is not an absolute URL without a fragment", u)
			}
			switch strings.ToLower(p.Scheme) {
			case "javascript", "data", "file", "vbscript":
				t.Fatalf("accepted %q", u)
			case "http":
				if !loopbackHost(p.Hostname()) {
					t.Fatalf("accepted http on %q", p.Hostname())
				}
			}
			if !redirectMatches([]string{u}, u) {
				t.Fatalf("%q does not match itself", u)
			}
		}
		if redirectMatches([]string{u}, other) && u != other {
			// Only a loopback http address may differ, and only in its port.
			g, err := url.Parse(other)
			if err != nil || g.Scheme != "http" || !loopbackHost(g.Hostname()) {
				t.Fatalf("%q matched registered %q", other, u)
			}
		}
	})
}

// FuzzClientMetadata checks client metadata (a registration or a client ID
// metadata document) on arbitrary JSON: no panic, and accepted metadata
// has only redirect URIs that pass the rules.
func FuzzClientMetadata(f *testing.F) {
	for _, s := range []string{
		`{"redirect_uris":["https://a.example/cb"],"client_name":"A"}`,
		`{"redirect_uris":[]}`,
		`{"redirect_uris":["javascript:x"]}`,
		`{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"client_secret_post"}`,
		`{"redirect_uris":["https://a/cb"],"grant_types":["password"]}`,
		`{"redirect_uris":["https://a/cb"],"response_types":["token"]}`,
		`{"redirect_uris":"x"}`, `[]`, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m oauthex.ClientRegistrationMetadata
		if json.Unmarshal(b, &m) != nil {
			return
		}
		c, err := checkMetadata("c_x", &m)
		if err != nil {
			return
		}
		if len(c.RedirectURIs) == 0 || len(c.Name) > maxClientName {
			t.Fatalf("accepted %+v", c)
		}
		for _, u := range c.RedirectURIs {
			if checkRedirectURI(u) != nil {
				t.Fatalf("accepted redirect URI %q", u)
			}
		}
	})
}

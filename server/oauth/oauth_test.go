package oauth_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.uber.org/goleak"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const callback = "http://127.0.0.1:7777/callback"

// consent plays the signed-in person: it opens the authorization URL with
// the session cookie, checks that the page names the client and where it
// sends the person back, then allows with extra as the choices, and
// returns the redirect the browser would follow.
func consent(t *testing.T, k *assenttest.Kit, authURL string, cookie *http.Cookie, csrf string, extra url.Values) *url.URL {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page := k.Get(u.RequestURI(), cookie)
	body := assenttest.ReadAll(page)
	if page.StatusCode != http.StatusOK || !strings.Contains(body, "127.0.0.1:7777") || !strings.Contains(body, `id="consent-form"`) {
		t.Fatalf("consent page: %d\n%s", page.StatusCode, body)
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' http://127.0.0.1:7777") {
		t.Errorf("consent page CSP %q does not let its form lead back to the client", csp)
	}
	form := u.Query()
	form.Set("csrf", csrf)
	form.Set("decision", "approve")
	form.Set("name", "hosted agent")
	// What the page checks by default, as a browser submits it.
	form["grant"] = []string{"state.write", "tool.invoke"}
	form["supervisor"] = []string{k.Boot.Owner.ID}
	for key, vs := range extra {
		form[key] = vs
	}
	resp := k.PostForm(u.Path, form, cookie, k.URL())
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("consent POST: %d %s", resp.StatusCode, assenttest.ReadAll(resp))
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestSDKClientFlow drives the official Go SDK's OAuth client with only
// the server's URL: discovery from the 401, dynamic registration, the
// person's consent, the token, and tools/list.
func TestSDKClientFlow(t *testing.T) {
	k := assenttest.Start(t, nil)
	cookie, csrf := k.SignIn()

	unauth := k.Req("POST", "/mcp", "", strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
	if want := `resource_metadata="` + k.URL() + `/.well-known/oauth-protected-resource/mcp"`; unauth.StatusCode != 401 || !strings.Contains(unauth.Header.Get("WWW-Authenticate"), want) {
		t.Fatalf("401 challenge %q (status %d) lacks %s", unauth.Header.Get("WWW-Authenticate"), unauth.StatusCode, want)
	}

	h, err := mcpauth.NewAuthorizationCodeHandler(&mcpauth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &mcpauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{callback}, ClientName: "Test Host", GrantTypes: []string{"authorization_code", "refresh_token"},
		}},
		RedirectURL: callback,
		AuthorizationCodeFetcher: func(_ context.Context, a *mcpauth.AuthorizationArgs) (*mcpauth.AuthorizationResult, error) {
			loc := consent(t, k, a.URL, cookie, csrf, nil)
			q := loc.Query()
			return &mcpauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
		RequestRefreshToken: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: k.URL() + "/mcp", OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list = %v, %v", tools, err)
	}

	agent := oauthAgent(t, k)
	if agent.Name != "hosted agent" || !slices.Equal(agent.Supervisors, []string{k.Boot.Owner.ID}) {
		t.Errorf("agent principal %+v: want named by the person and supervised by them", agent)
	}
	if slices.Contains(agent.Grants, "command.execute") || !slices.Contains(agent.Grants, "tool.invoke") {
		t.Errorf("agent grants %v: want the defaults, without command.execute", agent.Grants)
	}
	recs, err := k.DB.Audit().ListAudit(t.Context(), store.AuditFilter{PrincipalID: k.Boot.Owner.ID})
	if err != nil || !slices.ContainsFunc(recs, func(r store.AuditRecord) bool { return r.Action == "oauth.consent" && r.Subject == agent.ID }) {
		t.Errorf("no oauth.consent audit record for %s: %v", agent.ID, err)
	}
}

// oauthAgent returns the only agent principal created by consent.
func oauthAgent(t *testing.T, k *assenttest.Kit) store.Principal {
	t.Helper()
	ps, err := k.DB.Principals().ListPrincipals(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var found []store.Principal
	for _, p := range ps {
		if p.Kind == store.KindAgent && p.ID != k.Boot.Agent.ID {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d agents created by consent, want 1", len(found))
	}
	return found[0]
}

// flow is one client's authorization by hand.
type flow struct {
	t                  *testing.T
	k                  *assenttest.Kit
	clientID, verifier string
	cookie             *http.Cookie
	csrf               string
}

func newFlow(t *testing.T, k *assenttest.Kit) *flow {
	f := &flow{t: t, k: k}
	f.cookie, f.csrf = k.SignIn()
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if st := k.Do("POST", "/oauth/register", "", map[string]any{"redirect_uris": []string{callback}, "client_name": "Hand"}, &reg); st != 201 || reg.ClientID == "" {
		t.Fatalf("register: %d %+v", st, reg)
	}
	f.clientID = reg.ClientID
	f.verifier = rand.Text() + rand.Text()
	return f
}

func challenge(verifier string) string {
	s := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

func (f *flow) authURL(mod func(url.Values)) string {
	q := url.Values{
		"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {callback}, "state": {"st"},
		"code_challenge": {challenge(f.verifier)}, "code_challenge_method": {"S256"}, "resource": {f.k.URL() + "/mcp"},
	}
	if mod != nil {
		mod(q)
	}
	return f.k.URL() + "/oauth/authorize?" + q.Encode()
}

// code runs the consent and returns the authorization code.
func (f *flow) code() string {
	loc := consent(f.t, f.k, f.authURL(nil), f.cookie, f.csrf, nil)
	if loc.Query().Get("state") != "st" || loc.Query().Get("iss") != f.k.URL() {
		f.t.Fatalf("redirect %s lacks state or iss", loc)
	}
	return loc.Query().Get("code")
}

type tokens struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token"`
	Error   string `json:"error"`
}

func (f *flow) token(v url.Values) (int, tokens) {
	f.t.Helper()
	v.Set("client_id", f.clientID)
	resp := f.k.Req("POST", "/oauth/token", "", strings.NewReader(v.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	var out tokens
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, out
}

func (f *flow) exchange(code string) (int, tokens) {
	return f.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback}, "code_verifier": {f.verifier}, "resource": {f.k.URL() + "/mcp"}})
}

func (f *flow) refresh(rt string) (int, tokens) {
	return f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
}

func whoami(k *assenttest.Kit, tok string) int {
	return k.Req("GET", "/v1/whoami", tok, nil, nil).StatusCode
}

func listTools(t *testing.T, k *assenttest.Kit, tok string) error {
	cs, err := k.MCPSession(tok, "")
	if err != nil {
		return err
	}
	defer cs.Close()
	_, err = cs.ListTools(t.Context(), nil)
	return err
}

// TestRefreshRotationAndRevocation: a refresh token works once; presenting
// it again revokes the whole authorization; revocation ends the access
// token at once.
func TestRefreshRotationAndRevocation(t *testing.T) {
	k := assenttest.Start(t, nil)
	f := newFlow(t, k)
	st, tk := f.exchange(f.code())
	if st != 200 || !strings.HasPrefix(tk.Access, "asat_") || !strings.HasPrefix(tk.Refresh, "asrt_") {
		t.Fatalf("token: %d %+v", st, tk)
	}
	if err := listTools(t, k, tk.Access); err != nil {
		t.Fatalf("tools/list with the access token: %v", err)
	}
	st, tk2 := f.refresh(tk.Refresh)
	if st != 200 || tk2.Refresh == tk.Refresh || tk2.Access == tk.Access {
		t.Fatalf("refresh: %d %+v", st, tk2)
	}
	if whoami(k, tk2.Access) != 200 {
		t.Fatal("the rotated access token does not work")
	}

	t.Run("revoke", func(t *testing.T) {
		resp := k.Req("POST", "/oauth/revoke", "", strings.NewReader(url.Values{"token": {tk2.Refresh}, "client_id": {f.clientID}}.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if resp.StatusCode != 200 {
			t.Fatalf("revoke: %d", resp.StatusCode)
		}
		resp = k.Req("POST", "/mcp", tk2.Access, strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("/mcp after revocation: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if !oauthAgent(t, k).Revoked {
			t.Error("the agent principal is not revoked")
		}
	})

	t.Run("reuse", func(t *testing.T) {
		f := newFlow(t, k)
		_, tk := f.exchange(f.code())
		if st, _ := f.refresh(tk.Refresh); st != 200 {
			t.Fatal("first refresh refused")
		}
		st, out := f.refresh(tk.Refresh)
		if st != 400 || out.Error != "invalid_grant" {
			t.Errorf("reused refresh token: %d %+v, want invalid_grant", st, out)
		}
		if whoami(k, tk.Access) != 401 {
			t.Error("after a refresh token was reused, the authorization's access token still works")
		}
	})
}

// TestTokenRefusals: each way a token request can be wrong gets its OAuth
// error, and a code presented again ends the authorization.
func TestTokenRefusals(t *testing.T) {
	k := assenttest.Start(t, nil)
	tests := []struct {
		name string
		mod  func(f *flow, v url.Values)
		want string
	}{
		{"wrong verifier", func(f *flow, v url.Values) { v.Set("code_verifier", rand.Text()+rand.Text()) }, "invalid_grant"},
		{"no verifier", func(f *flow, v url.Values) { v.Del("code_verifier") }, "invalid_request"},
		{"other redirect", func(f *flow, v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:7777/other") }, "invalid_grant"},
		{"other resource", func(f *flow, v url.Values) { v.Set("resource", "https://elsewhere.example/mcp") }, "invalid_target"},
		{"other client", func(f *flow, v url.Values) { f.clientID = "c_other" }, "invalid_grant"},
		{"unknown code", func(f *flow, v url.Values) { v.Set("code", "asac_nothing") }, "invalid_grant"},
		{"grant type", func(f *flow, v url.Values) { v.Set("grant_type", "password") }, "unsupported_grant_type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlow(t, k)
			v := url.Values{"grant_type": {"authorization_code"}, "code": {f.code()}, "redirect_uri": {callback}, "code_verifier": {f.verifier}}
			tc.mod(f, v)
			st, out := f.token(v)
			if st != 400 || out.Error != tc.want || out.Access != "" {
				t.Errorf("%d %+v, want 400 %s", st, out, tc.want)
			}
		})
	}
	t.Run("code twice", func(t *testing.T) {
		f := newFlow(t, k)
		code := f.code()
		st, tk := f.exchange(code)
		if st != 200 {
			t.Fatal(st)
		}
		if st, out := f.exchange(code); st != 400 || out.Error != "invalid_grant" {
			t.Errorf("second exchange: %d %+v", st, out)
		}
		if whoami(k, tk.Access) != 401 {
			t.Error("the tokens of a code used twice still work")
		}
	})
}

// TestAuthorizeRefusals: every refusal of an authorization request is
// shown on the page and never redirected, so a link to this server can't
// send a visitor to an address a registered client names; a missing PKCE
// challenge or a foreign resource is refused.
func TestAuthorizeRefusals(t *testing.T) {
	k := assenttest.Start(t, nil)
	f := newFlow(t, k)
	tests := []struct {
		name string
		mod  func(url.Values)
		want string
	}{
		{"redirect mismatch", func(q url.Values) { q.Set("redirect_uri", "https://attacker.example/cb") }, "not one the client registered"},
		{"unknown client", func(q url.Values) { q.Set("client_id", "c_nobody") }, "not registered"},
		{"plain pkce", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "PKCE is required"},
		{"no pkce", func(q url.Values) { q.Del("code_challenge") }, "code_challenge must be"},
		{"wrong resource", func(q url.Values) { q.Set("resource", "https://other.example/mcp") }, "is not this server"},
		{"token response", func(q url.Values) { q.Set("response_type", "token") }, "response_type must be code"},
	}
	for _, tc := range tests {
		for _, signedIn := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s signed in %v", tc.name, signedIn), func(t *testing.T) {
				u, _ := url.Parse(f.authURL(tc.mod))
				cookie := f.cookie
				if !signedIn {
					cookie = nil
				}
				resp := k.Get(u.RequestURI(), cookie)
				body := assenttest.ReadAll(resp)
				if resp.StatusCode != 400 || resp.Header.Get("Location") != "" || !strings.Contains(body, tc.want) {
					t.Errorf("%d %q: want %q on the page, no redirect", resp.StatusCode, resp.Header.Get("Location"), tc.want)
				}
			})
		}
	}
	t.Run("consent needs csrf", func(t *testing.T) {
		u, _ := url.Parse(f.authURL(nil))
		form := u.Query()
		form.Set("decision", "approve")
		form.Set("supervisor", k.Boot.Owner.ID)
		resp := k.PostForm("/oauth/authorize", form, f.cookie, k.URL())
		if resp.StatusCode != 403 || resp.Header.Get("Location") != "" {
			t.Errorf("consent without CSRF: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("deny", func(t *testing.T) {
		u, _ := url.Parse(f.authURL(nil))
		form := u.Query()
		form.Set("csrf", f.csrf)
		form.Set("decision", "deny")
		resp := k.PostForm("/oauth/authorize", form, f.cookie, k.URL())
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != 303 || loc.Query().Get("error") != "access_denied" {
			t.Errorf("deny: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("signed out", func(t *testing.T) {
		u, _ := url.Parse(f.authURL(nil))
		resp := k.Get(u.RequestURI(), nil)
		if resp.StatusCode != 401 || !strings.Contains(assenttest.ReadAll(resp), "Sign in") {
			t.Errorf("consent page signed out: %d", resp.StatusCode)
		}
		var next *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "assent_next" {
				next = c
			}
		}
		if next == nil || next.Value != u.RequestURI() {
			t.Fatalf("the page to come back to after signing in is not remembered: %+v", next)
		}
	})
}

// TestClientIDMetadataDocument: a client named by the URL of its metadata
// document is fetched (over http only with the development option) and
// must name itself.
func TestClientIDMetadataDocument(t *testing.T) {
	var docURL string
	doc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := docURL
		if r.URL.Path == "/liar.json" {
			id = "https://someone-else.example/client.json"
		}
		json.NewEncoder(w).Encode(map[string]any{"client_id": id, "client_name": "Metadata Client", "redirect_uris": []string{callback}})
	}))
	defer doc.Close()
	docURL = doc.URL + "/client.json"
	k := assenttest.Start(t, func(c *server.Config) { c.OAuthInsecureClientIDs = true })
	f := newFlow(t, k)
	f.clientID = docURL
	code := f.code()
	if st, tk := f.exchange(code); st != 200 || tk.Access == "" {
		t.Fatalf("token for a metadata-document client: %d %+v", st, tk)
	}
	f.clientID = doc.URL + "/liar.json"
	u, _ := url.Parse(f.authURL(nil))
	if resp := k.Get(u.RequestURI(), f.cookie); resp.StatusCode != 400 {
		t.Errorf("a document naming another client_id: %d, want 400", resp.StatusCode)
	}

	strict := assenttest.Start(t, nil)
	g := newFlow(t, strict)
	g.clientID = docURL
	u, _ = url.Parse(g.authURL(nil))
	if resp := strict.Get(u.RequestURI(), g.cookie); resp.StatusCode != 400 || !strings.Contains(assenttest.ReadAll(resp), "https") {
		t.Errorf("an http client_id without the development option: %d, want 400", resp.StatusCode)
	}
}

// TestMetadata: the documents a client discovers the server from.
func TestMetadata(t *testing.T) {
	k := assenttest.Start(t, nil)
	var prm oauthex.ProtectedResourceMetadata
	if st := k.Do("GET", "/.well-known/oauth-protected-resource/mcp", "", nil, &prm); st != 200 || prm.Resource != k.URL()+"/mcp" || !slices.Equal(prm.AuthorizationServers, []string{k.URL()}) {
		t.Errorf("protected resource metadata: %d %+v", st, prm)
	}
	var root oauthex.ProtectedResourceMetadata
	if st := k.Do("GET", "/.well-known/oauth-protected-resource", "", nil, &root); st != 200 || root.Resource != k.URL() {
		t.Errorf("root protected resource metadata: %d %+v", st, root)
	}
	var asm map[string]any
	if st := k.Do("GET", "/.well-known/oauth-authorization-server", "", nil, &asm); st != 200 || asm["issuer"] != k.URL() ||
		!slices.Equal(asm["code_challenge_methods_supported"].([]any), []any{"S256"}) || asm["client_id_metadata_document_supported"] != true {
		t.Errorf("authorization server metadata: %d %+v", st, asm)
	}
	for _, body := range []map[string]any{
		{"redirect_uris": []string{"http://example.com/cb"}},
		{"redirect_uris": []string{}},
		{"redirect_uris": []string{"javascript:alert(1)"}},
		{"redirect_uris": []string{callback}, "token_endpoint_auth_method": "client_secret_basic"},
	} {
		var out map[string]string
		if st := k.Do("POST", "/oauth/register", "", body, &out); st != 400 || out["error"] == "" {
			t.Errorf("register %v: %d %v, want an OAuth error", body, st, out)
		}
	}
}

// TestAudience: an access token is refused where the request reaches the
// server under another name, since it was issued for this one only.
func TestAudience(t *testing.T) {
	k := assenttest.Start(t, nil)
	f := newFlow(t, k)
	_, tk := f.exchange(f.code())
	for _, h := range []struct {
		host string
		want int
	}{{"", 200}, {"other.example", 401}} {
		r, _ := http.NewRequest("GET", k.URL()+"/v1/whoami", nil)
		r.Header.Set("Authorization", "Bearer "+tk.Access)
		if h.host != "" {
			r.Host = h.host
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != h.want {
			t.Errorf("Host %q: %d, want %d", h.host, resp.StatusCode, h.want)
		}
	}
}

// TestConsentChoices: the person picks the grants and the supervisors of
// the agent, and cannot name someone who is not a person.
func TestConsentChoices(t *testing.T) {
	k := assenttest.Start(t, nil)
	other := store.Principal{ID: "p_other", Kind: store.KindHuman, Name: "ada", Grants: []string{"human.approve"}, CreatedAt: k.Boot.Owner.CreatedAt}
	if err := k.DB.Principals().CreatePrincipal(t.Context(), other, nil); err != nil {
		t.Fatal(err)
	}
	f := newFlow(t, k)
	u, _ := url.Parse(f.authURL(nil))
	form := u.Query()
	form.Set("csrf", f.csrf)
	form.Set("decision", "approve")
	form.Set("name", "x")
	form["supervisor"] = []string{k.Boot.Agent.ID}
	if resp := k.PostForm("/oauth/authorize", form, f.cookie, k.URL()); resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Errorf("an agent as supervisor: %d %q, want the page again", resp.StatusCode, resp.Header.Get("Location"))
	}
	loc := consent(t, k, f.authURL(nil), f.cookie, f.csrf, url.Values{"supervisor": {other.ID}, "grant": {"command.execute"}})
	if st, _ := f.exchange(loc.Query().Get("code")); st != 200 {
		t.Fatal(st)
	}
	agent := oauthAgent(t, k)
	if !slices.Equal(agent.Supervisors, []string{other.ID}) || !slices.Equal(agent.Grants, []string{"command.execute"}) {
		t.Errorf("agent %+v: want exactly the person's choices", agent)
	}
}

// TestSignInComesBack: a person who is not signed in is asked to, and
// signing in brings them back to the same consent page; one arriving from
// another site, whose strict session cookie was not sent, gets one link
// that reopens the page from assent itself.
func TestSignInComesBack(t *testing.T) {
	k := assenttest.Start(t, nil)
	f := newFlow(t, k)
	u, _ := url.Parse(f.authURL(nil))

	r, _ := http.NewRequest("GET", u.String(), nil)
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := k.NoRedirect().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body := assenttest.ReadAll(resp)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(body, `id="consent-continue"`) || !strings.Contains(body, "continue=1") {
		t.Errorf("cross-site arrival: %d, want the continue link", resp.StatusCode)
	}

	resp = k.Get(u.RequestURI(), nil)
	var next *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "assent_next" {
			next = c
		}
	}
	if next == nil {
		t.Fatal("the page to come back to is not remembered")
	}
	link, err := auth.NewSignInLink(t.Context(), k.DB.Sessions(), k.Boot.Owner.ID, k.URL(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"link": {link[strings.LastIndex(link, "/")+1:]}}
	sr, _ := http.NewRequest("POST", k.URL()+"/signin", strings.NewReader(form.Encode()))
	sr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sr.Header.Set("Origin", k.URL())
	sr.AddCookie(next)
	resp, err = k.NoRedirect().Do(sr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != u.RequestURI() {
		t.Errorf("after signing in: %d to %q, want back to %q", resp.StatusCode, resp.Header.Get("Location"), u.RequestURI())
	}
}

// TestRegistrationLimit: registrations from one address are limited like
// sign-in attempts, so nobody fills the store with clients.
func TestRegistrationLimit(t *testing.T) {
	k := assenttest.Start(t, func(c *server.Config) { c.SignInRate = 3 })
	codes := map[int]int{}
	for range 6 {
		var out map[string]any
		codes[k.Do("POST", "/oauth/register", "", map[string]any{"redirect_uris": []string{callback}}, &out)]++
	}
	if codes[201] != 3 || codes[429] != 3 {
		t.Errorf("statuses %v, want 3 registrations and 3 refusals", codes)
	}
}

// TestAgentLosesWhatItsPersonLoses: once the person who consented is
// revoked, the agent's access token stops working and its refresh token
// gets no new one; the agent principal is revoked too.
func TestAgentLosesWhatItsPersonLoses(t *testing.T) {
	k := assenttest.Start(t, nil)
	f := newFlow(t, k)
	st, tk := f.exchange(f.code())
	if st != 200 || whoami(k, tk.Access) != 200 {
		t.Fatalf("token: %d %+v", st, tk)
	}
	if err := k.DB.Principals().RevokePrincipal(t.Context(), k.Boot.Owner.ID); err != nil {
		t.Fatal(err)
	}
	if st := whoami(k, tk.Access); st != 401 {
		t.Errorf("access token after its person was revoked: %d, want 401", st)
	}
	if st, out := f.refresh(tk.Refresh); st != 400 || out.Error != "invalid_grant" {
		t.Errorf("refresh after its person was revoked: %d %+v, want invalid_grant", st, out)
	}
	if !oauthAgent(t, k).Revoked {
		t.Error("the agent principal outlived its person's revocation")
	}
}

// TestConsentWithCSRFHeader: a consent whose CSRF token comes in the
// header rather than the form is read in full.
func TestConsentWithCSRFHeader(t *testing.T) {
	k := assenttest.Start(t, nil)
	f := newFlow(t, k)
	u, _ := url.Parse(f.authURL(nil))
	form := u.Query()
	form.Set("decision", "approve")
	form.Set("name", "header agent")
	form["grant"] = []string{"tool.invoke"}
	form["supervisor"] = []string{k.Boot.Owner.ID}
	req, err := http.NewRequest("POST", k.URL()+"/oauth/authorize", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", k.URL())
	req.Header.Set("X-CSRF-Token", f.csrf)
	req.AddCookie(f.cookie)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("consent with the CSRF token in a header: %d %q, want a redirect with a code", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestClientNameRevealed: a client name's hidden and bidirectional
// characters are drawn as escapes on every form of the consent page.
func TestClientNameRevealed(t *testing.T) {
	k := assenttest.Start(t, nil)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if st := k.Do("POST", "/oauth/register", "", map[string]any{"redirect_uris": []string{callback}, "client_name": "Trusted\u202egnp.exe"}, &reg); st != 201 {
		t.Fatalf("register: %d", st)
	}
	q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {callback},
		"code_challenge": {challenge(strings.Repeat("v", 43))}, "code_challenge_method": {"S256"}}
	for name, hdr := range map[string]map[string]string{"sign in": nil, "continue": {"Sec-Fetch-Site": "cross-site"}} {
		resp := k.Req("GET", "/oauth/authorize?"+q.Encode(), "", nil, hdr)
		body := assenttest.ReadAll(resp)
		if strings.Contains(body, "\u202e") || !strings.Contains(body, "U+202E") {
			t.Errorf("%s page draws the client name raw:\n%s", name, body)
		}
	}
}

// TestHostHeaderNamesNothing: the address in metadata documents and the
// audience of tokens come from the base URL, or without one from the
// address the connection reached; a made-up Host header is refused.
func TestHostHeaderNamesNothing(t *testing.T) {
	get := func(k *assenttest.Kit, path, host string) (int, string) {
		r, _ := http.NewRequest("GET", k.URL()+path, nil)
		r.Host = host
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, assenttest.ReadAll(resp)
	}
	k := assenttest.Start(t, nil)
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"} {
		st, body := get(k, path, "evil.example")
		if st != http.StatusMisdirectedRequest || strings.Contains(body, "http://evil.example") || !strings.Contains(body, "--base-url") {
			t.Errorf("%s under a made-up Host without a base URL: %d %s; want 421 naming --base-url", path, st, body)
		}
		if st, body := get(k, path, strings.TrimPrefix(k.URL(), "http://")); st != 200 || !strings.Contains(body, k.URL()) {
			t.Errorf("%s under the listener's address: %d %s", path, st, body)
		}
	}
	f := newFlow(t, k)
	u, _ := url.Parse(f.authURL(func(q url.Values) { q.Set("resource", "http://evil.example/mcp") }))
	r, _ := http.NewRequest("GET", k.URL()+u.RequestURI(), nil)
	r.Host = "evil.example"
	r.AddCookie(f.cookie)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	if body := assenttest.ReadAll(resp); resp.StatusCode != 400 || strings.Contains(body, `id="consent-form"`) {
		t.Errorf("authorization for resource evil.example under Host evil.example: %d, want refused\n%s", resp.StatusCode, body)
	}

	based := assenttest.Start(t, func(c *server.Config) { c.BaseURL = "https://assent.example/" })
	st, body := get(based, "/.well-known/oauth-authorization-server", "evil.example")
	if st != 200 || strings.Contains(body, "evil.example") || !strings.Contains(body, `"issuer":"https://assent.example"`) {
		t.Errorf("metadata with a base URL under a made-up Host: %d %s; want the base URL", st, body)
	}
}

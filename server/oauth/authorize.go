package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// authRequest is an authorization request's parameters.
type authRequest struct {
	ResponseType, ClientID, RedirectURI, State, Challenge, Method, Resource, Scope string
}

func readAuthRequest(v url.Values) authRequest {
	return authRequest{
		ResponseType: v.Get("response_type"),
		ClientID:     v.Get("client_id"),
		RedirectURI:  v.Get("redirect_uri"),
		State:        v.Get("state"),
		Challenge:    v.Get("code_challenge"),
		Method:       v.Get("code_challenge_method"),
		Resource:     v.Get("resource"),
		Scope:        v.Get("scope"),
	}
}

// values returns the request as form fields, for the consent form.
func (a authRequest) values() map[string]string {
	return map[string]string{
		"response_type": a.ResponseType, "client_id": a.ClientID, "redirect_uri": a.RedirectURI,
		"state": a.State, "code_challenge": a.Challenge, "code_challenge_method": a.Method,
		"resource": a.Resource, "scope": a.Scope,
	}
}

// pkceChallenge is the form of an S256 code challenge: the base64url
// encoding, unpadded, of a SHA-256 hash.
var pkceChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// check validates a. A refusal before the client and its redirect URI are
// known is shown to the person (redirect is false); after, it goes back to
// the client at a.RedirectURI.
func (s *Server) check(ctx context.Context, r *http.Request, a *authRequest) (c client, redirect bool, err error) {
	base, e := s.baseOf(r)
	if e != nil {
		return c, false, e
	}
	c, err = s.clientByID(ctx, a.ClientID)
	if err != nil {
		return c, false, err
	}
	if a.RedirectURI == "" && len(c.RedirectURIs) == 1 {
		a.RedirectURI = c.RedirectURIs[0]
	}
	if !redirectMatches(c.RedirectURIs, a.RedirectURI) {
		return c, false, errorf("invalid_request", "redirect_uri %q is not one the client registered", a.RedirectURI)
	}
	if a.ResponseType != "code" {
		return c, true, errorf("unsupported_response_type", "response_type must be code")
	}
	if a.Method != "S256" {
		return c, true, errorf("invalid_request", "PKCE is required with code_challenge_method S256")
	}
	if !pkceChallenge.MatchString(a.Challenge) {
		return c, true, errorf("invalid_request", "code_challenge must be the unpadded base64url SHA-256 of the code verifier")
	}
	if a.Resource == "" {
		a.Resource = base + "/mcp"
	}
	if !slices.Contains(resources(base), a.Resource) {
		return c, true, errorf("invalid_target", "resource %q is not this server; use %s/mcp", a.Resource, base)
	}
	return c, true, nil
}

// redirectError sends an authorization error back to the client.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, a authRequest, code, description string) {
	q := url.Values{"error": {code}, "error_description": {description}}
	s.redirectBack(w, r, a, q)
}

func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, a authRequest, q url.Values) {
	if a.State != "" {
		q.Set("state", a.State)
	}
	if base, e := s.baseOf(r); e == nil {
		q.Set("iss", base)
	}
	u, _ := url.Parse(a.RedirectURI)
	if u.RawQuery != "" {
		u.RawQuery += "&" + q.Encode()
	} else {
		u.RawQuery = q.Encode()
	}
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// refuse answers a request that failed check.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, a authRequest, redirect bool, err error) {
	var oe *oauthError
	if !errors.As(err, &oe) {
		s.h.Log.Error("oauth authorize failed", "err", err)
		oe = errorf("temporarily_unavailable", "the server could not read the client; try again")
	}
	if redirect {
		s.redirectError(w, r, a, oe.code, oe.description)
		return
	}
	s.h.Web.Render(w, http.StatusBadRequest, "consent", host.Page{Title: "Connect an agent", Data: consentView{Error: oe.description}})
}

// consentView is what the consent page shows.
type consentView struct {
	ClientName   string
	ClientID     string
	RedirectHost string
	Resource     string
	Requested    []string
	Params       map[string]string
	Grants       []choice
	Supervisors  []choice
	Name         string
	Error        string
	// Continue, when set, is the link that brings the person back to this
	// page from this site; SignIn asks the person to sign in first.
	Continue string
	SignIn   bool
}

type choice struct {
	Value, Label string
	Checked      bool
}

// grantLabels say what each grant lets an agent do.
var grantLabels = map[string]string{
	"state.write":     "Propose changes to values (a person still approves what needs approval)",
	"tool.invoke":     "Call tools and start Runs and Flows",
	"control.write":   "Change controls directly where no approval is required",
	"command.execute": "Execute commands it proposes once a person approves them",
}

func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	a := readAuthRequest(r.URL.Query())
	c, _, err := s.check(r.Context(), r, &a)
	if err != nil {
		// Shown on the page, never sent back: anyone may register a
		// client, so an error redirect from a link would send a visitor
		// from this server to any address an attacker registered.
		s.refuse(w, r, a, false, err)
		return
	}
	p, sess, ok := s.h.WebSession(r)
	if !ok {
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" && r.URL.Query().Get("continue") == "" {
			// A strict session cookie is not sent on a navigation from
			// another site: one click from this page sends it.
			q := r.URL.Query()
			q.Set("continue", "1")
			s.h.Web.Render(w, http.StatusOK, "consent", host.Page{Title: "Connect an agent", Data: consentView{Continue: PathAuthorize + "?" + q.Encode(), ClientName: displayName(c)}})
			return
		}
		http.SetCookie(w, &http.Cookie{Name: host.NextCookie, Value: r.URL.RequestURI(), Path: "/", MaxAge: int((15 * time.Minute).Seconds()), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
		s.h.Web.Render(w, http.StatusUnauthorized, "consent", host.Page{Title: "Connect an agent", Data: consentView{SignIn: true, ClientName: displayName(c)}})
		return
	}
	if p.Kind != store.KindHuman {
		s.refuse(w, r, a, false, errorf("access_denied", "only a person can connect an agent"))
		return
	}
	v, err := s.view(r.Context(), p, c, a, nil, nil)
	if err != nil {
		s.refuse(w, r, a, false, err)
		return
	}
	s.render(w, http.StatusOK, p, sess, v)
}

func displayName(c client) string {
	if c.Name != "" {
		return c.Name
	}
	return c.ID
}

func redirectHost(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	if p.Host == "" {
		return p.Scheme + ":"
	}
	return p.Host
}

// view builds the consent page for person p. checkedGrants and
// checkedSups, when not nil, are the person's earlier choices.
func (s *Server) view(ctx context.Context, p store.Principal, c client, a authRequest, checkedGrants, checkedSups []string) (consentView, error) {
	if checkedGrants == nil {
		checkedGrants = defaultGrants
	}
	if checkedSups == nil {
		checkedSups = []string{p.ID}
	}
	v := consentView{
		ClientName: displayName(c), ClientID: c.ID, RedirectHost: redirectHost(a.RedirectURI),
		Resource: a.Resource, Requested: strings.Fields(a.Scope), Params: a.values(), Name: agentName(c),
	}
	for _, g := range agentGrants {
		if p.Has(g) {
			v.Grants = append(v.Grants, choice{Value: g, Label: grantLabels[g], Checked: slices.Contains(checkedGrants, g)})
		}
	}
	people, err := s.h.Store.ListPrincipals(ctx)
	if err != nil {
		return v, err
	}
	for _, h := range people {
		if h.Kind == store.KindHuman && !h.Revoked {
			label := h.Name
			if h.ID == p.ID {
				label += " (you)"
			}
			v.Supervisors = append(v.Supervisors, choice{Value: h.ID, Label: label, Checked: slices.Contains(checkedSups, h.ID)})
		}
	}
	return v, nil
}

func agentName(c client) string {
	n := displayName(c)
	if len(n) > 80 {
		n = n[:80]
	}
	return n
}

// render draws the consent page. Its form may lead, once submitted, to the
// client's redirect URI, so that origin is added to the page's form-action.
func (s *Server) render(w http.ResponseWriter, status int, p store.Principal, sess store.Session, v consentView) {
	origin := "'self'"
	if u, err := url.Parse(v.Params["redirect_uri"]); err == nil && u.Scheme != "" {
		if u.Host != "" {
			origin += " " + u.Scheme + "://" + u.Host
		} else {
			origin += " " + u.Scheme + ":"
		}
	}
	cw := &cspWriter{ResponseWriter: w, formAction: origin}
	s.h.Web.Render(cw, status, "consent", host.Page{Title: "Connect an agent", Principal: &p, CSRF: sess.CSRF, Data: v})
}

// cspWriter widens the form-action of the page's Content-Security-Policy.
type cspWriter struct {
	http.ResponseWriter
	formAction string
}

func (c *cspWriter) WriteHeader(status int) {
	h := c.Header()
	if csp := h.Get("Content-Security-Policy"); csp != "" {
		h.Set("Content-Security-Policy", strings.Replace(csp, "form-action 'self'", "form-action "+c.formAction, 1))
	}
	c.ResponseWriter.WriteHeader(status)
}

// Bounds of the consent form.
const maxAgentName = 100

// handleConsent takes the person's decision.
func (s *Server) handleConsent(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	// Parsed before anything reads it: the CSRF token may come in a
	// header, and then nothing else would parse the form.
	if err := r.ParseForm(); err != nil {
		s.h.Web.Render(w, http.StatusBadRequest, "consent", host.Page{Title: "Connect an agent", Data: consentView{Error: "the form could not be read; go back to the application and connect again"}})
		return
	}
	p, sess, ok := s.h.WebSession(r)
	if !ok {
		s.h.Web.Render(w, http.StatusUnauthorized, "consent", host.Page{Title: "Connect an agent", Data: consentView{SignIn: true, ClientName: "An application"}})
		return
	}
	if e := s.h.CheckWebChange(r, sess); e != nil {
		host.WriteAPIError(w, e)
		return
	}
	if p.Kind != store.KindHuman {
		s.refuse(w, r, authRequest{}, false, errorf("access_denied", "only a person can connect an agent"))
		return
	}
	a := readAuthRequest(r.PostForm)
	c, redirect, err := s.check(r.Context(), r, &a)
	if err != nil {
		s.refuse(w, r, a, redirect, err)
		return
	}
	if r.PostFormValue("decision") != "approve" {
		s.audit(r.Context(), p.ID, "user", "oauth.deny", c.ID, map[string]string{"client_id": c.ID, "redirect_host": redirectHost(a.RedirectURI)})
		s.redirectError(w, r, a, "access_denied", "the person declined to connect this agent")
		return
	}
	grants, sups := r.PostForm["grant"], r.PostForm["supervisor"]
	v, err := s.view(r.Context(), p, c, a, grants, sups)
	if err != nil {
		s.refuse(w, r, a, false, err)
		return
	}
	problem := ""
	offered := map[string]bool{}
	for _, g := range v.Grants {
		offered[g.Value] = true
	}
	people := map[string]bool{}
	for _, h := range v.Supervisors {
		people[h.Value] = true
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	switch {
	case len(sups) == 0:
		problem = "Choose at least one person to supervise the agent."
	case slices.ContainsFunc(sups, func(id string) bool { return !people[id] }):
		problem = "A chosen supervisor is not a person here; choose from the list."
	case slices.ContainsFunc(grants, func(g string) bool { return !offered[g] }):
		problem = "A chosen grant is not one you can give; choose from the list."
	case name == "" || len(name) > maxAgentName:
		problem = "Name the agent (at most 100 characters)."
	}
	if problem != "" {
		v.Error, v.Name = problem, name
		s.render(w, http.StatusBadRequest, p, sess, v)
		return
	}
	slices.Sort(grants)
	grants = slices.Compact(grants)
	slices.Sort(sups)
	sups = slices.Compact(sups)
	s.pruneSometimes(r.Context())
	now := s.h.Now().UTC()
	agent := store.Principal{ID: auth.NewID("p_"), Kind: store.KindAgent, Name: name, Grants: grants, Supervisors: sups, CreatedAt: now}
	if grants == nil {
		agent.Grants = []string{}
	}
	if err := s.h.Store.CreatePrincipal(r.Context(), agent, nil); err != nil {
		s.h.Log.Error("oauth consent failed", "err", err)
		s.refuse(w, r, a, true, errorf("temporarily_unavailable", "the authorization could not be stored; try again"))
		return
	}
	code := newSecret(auth.AuthCodePrefix)
	data := grantData{RedirectURI: a.RedirectURI, Challenge: a.Challenge, Resource: a.Resource, Scope: a.Scope, Consenter: p.ID}
	if err := s.st.CreateOAuthGrant(r.Context(), hashOf(code), store.OAuthGrant{Kind: store.OAuthCode, ClientID: c.ID, PrincipalID: agent.ID, Data: mustJSON(data), ExpiresAt: now.Add(s.opt.CodeTTL)}); err != nil {
		s.h.Log.Error("oauth consent failed", "err", err)
		s.refuse(w, r, a, true, errorf("temporarily_unavailable", "the authorization could not be stored; try again"))
		return
	}
	s.audit(r.Context(), p.ID, "user", "oauth.consent", agent.ID, map[string]any{
		"client_id": c.ID, "client_name": c.Name, "redirect_host": redirectHost(a.RedirectURI),
		"grants": agent.Grants, "supervisors": sups, "resource": a.Resource,
	})
	s.h.Log.Info("agent connected by oauth", "principal", agent.ID, "client", c.ID, "by", p.ID)
	s.redirectBack(w, r, a, url.Values{"code": {code}})
}

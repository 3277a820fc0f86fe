package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/wire"
)

// badRequest is one malformed or unauthorized request sent to a route.
type badRequest struct {
	name    string
	auth    string // "none", "wrong", "token", "cookie", "cookie+csrf"
	body    []byte
	ctype   string
	headers map[string]string
}

// badRequests are the requests every route receives.
func badRequests(method, path string) []badRequest {
	out := []badRequest{
		{name: "no token", auth: "none"},
		{name: "wrong token", auth: "wrong"},
		{name: "unknown ids", auth: "token"},
		{name: "cookie without CSRF", auth: "cookie"},
	}
	if method == http.MethodGet || method == http.MethodDelete {
		return append(out, badRequest{name: "cookie, unknown ids", auth: "cookie+csrf"})
	}
	jsonType := "application/json"
	limit := 1<<20 + 1
	var mcpHeaders map[string]string
	if path == "/mcp" {
		limit = 4<<20 + 1
		mcpHeaders = map[string]string{"Accept": "application/json, text/event-stream"}
	}
	return append(out,
		badRequest{name: "bad JSON", auth: "token", body: []byte(`{"not json`), ctype: jsonType, headers: mcpHeaders},
		badRequest{name: "wrong types", auth: "token", body: []byte(`{"id": 7, "tool": [], "params": "x", "action": 1, "recipe": false, "items": {}}`), ctype: jsonType, headers: mcpHeaders},
		badRequest{name: "array body", auth: "token", body: []byte(`[1, 2]`), ctype: jsonType, headers: mcpHeaders},
		badRequest{name: "empty object", auth: "token", body: []byte(`{}`), ctype: jsonType, headers: mcpHeaders},
		badRequest{name: "no Accept", auth: "token", body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), ctype: jsonType},
		badRequest{name: "text body", auth: "token", body: []byte("hello"), ctype: "text/plain", headers: mcpHeaders},
		badRequest{name: "body over the limit", auth: "token", body: bytes.Repeat([]byte(" "), limit), ctype: jsonType, headers: mcpHeaders},
		badRequest{name: "cookie, bad form", auth: "cookie+csrf", body: []byte("%zz=&revision=x"), ctype: "application/x-www-form-urlencoded"},
	)
}

// concrete turns a route pattern into a method and a path that names
// things that do not exist.
func concrete(pattern string) (method, path string) {
	method, path, found := strings.Cut(pattern, " ")
	if !found {
		method, path = http.MethodPost, pattern
	}
	path = strings.TrimSuffix(path, "{$}")
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			b.WriteString(path)
			break
		}
		b.WriteString(path[:i])
		j := strings.IndexByte(path[i:], '}')
		name := strings.TrimSuffix(path[i+1:i+j], "...")
		b.WriteString("nope-" + name)
		path = path[i+j+1:]
	}
	return method, b.String()
}

// forPeople reports whether path serves pages to people, which may
// answer an error with an HTML page instead of the wire shape.
func forPeople(path string) bool {
	for _, prefix := range []string{"/v1/", "/api/", "/mcp"} {
		if strings.HasPrefix(path, prefix) {
			return false
		}
	}
	return true
}

// checkErrorAnswer fails t unless resp, an error answer, has the one wire
// shape with the status of its code.
func checkErrorAnswer(t *testing.T, what string, resp *http.Response, body []byte, people bool) {
	t.Helper()
	ct := resp.Header.Get("Content-Type")
	if people && strings.HasPrefix(ct, "text/html") {
		return
	}
	if !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: %d answered %q, not JSON: %.200s", what, resp.StatusCode, ct, body)
		return
	}
	if err := wire.Check(body); err != nil {
		t.Errorf("%s: %d: %v: %.300s", what, resp.StatusCode, err, body)
		return
	}
	e, _ := wire.Decode(body)
	if want, listed := wire.StatusOf(e.Code); listed && want != resp.StatusCode {
		t.Errorf("%s: %s answered with %d; the wire table gives %d", what, e.Code, resp.StatusCode, want)
	}
}

func TestEveryRouteErrorHasTheWireShape(t *testing.T) {
	f := assenttest.Start(t, func(c *server.Config) { c.RateLimit, c.SignInRate = -1, -1 })
	if len(f.Srv.Patterns()) < 40 {
		t.Fatalf("only %d routes registered: %v", len(f.Srv.Patterns()), f.Srv.Patterns())
	}
	patterns := slices.Clone(f.Srv.Patterns())
	// Signing out ends the session the other requests use: it goes last.
	slices.SortStableFunc(patterns, func(a, b string) int {
		return boolInt(strings.Contains(a, "signout")) - boolInt(strings.Contains(b, "signout"))
	})
	cookie, csrf := f.SignIn()
	client := f.NoRedirect()
	errorsSeen := 0
	for _, pattern := range patterns {
		method, path := concrete(pattern)
		for _, br := range badRequests(method, path) {
			what := fmt.Sprintf("%s %s (%s)", method, path, br.name)
			var body io.Reader
			if br.body != nil {
				body = bytes.NewReader(br.body)
			}
			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, method, f.HTTP.URL+path, body)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			if br.ctype != "" {
				req.Header.Set("Content-Type", br.ctype)
			}
			for k, v := range br.headers {
				req.Header.Set(k, v)
			}
			switch br.auth {
			case "wrong":
				req.Header.Set("Authorization", "Bearer asnt_wrong")
			case "token":
				req.Header.Set("Authorization", "Bearer "+f.Token)
			case "cookie":
				req.AddCookie(cookie)
			case "cookie+csrf":
				req.AddCookie(cookie)
				req.Header.Set("Origin", f.HTTP.URL)
				req.Header.Set(host.CSRFHeader, csrf)
			}
			resp, err := client.Do(req)
			if err != nil {
				cancel()
				t.Fatalf("%s: %v", what, err)
			}
			var raw []byte
			if resp.StatusCode >= 400 {
				raw, _ = io.ReadAll(resp.Body)
				errorsSeen++
				if strings.HasPrefix(path, "/oauth/") && method == "POST" && path != "/oauth/authorize" {
					// OAuth endpoints answer in the shape OAuth clients
					// read (RFC 6749 section 5.2).
					checkOAuthError(t, what, raw)
				} else {
					checkErrorAnswer(t, what, resp, raw, forPeople(path))
				}
			}
			// A success may be a stream (events, MCP): stop it unread.
			cancel()
			resp.Body.Close()
		}
	}
	t.Logf("%d routes, %d error answers checked", len(patterns), errorsSeen)
	if errorsSeen < 4*len(patterns) {
		t.Errorf("only %d error answers over %d routes; the bad requests no longer reach the routes", errorsSeen, len(patterns))
	}
}

// checkOAuthError fails t unless body is an OAuth error answer: an error
// code and a description.
func checkOAuthError(t *testing.T, what string, body []byte) {
	t.Helper()
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || e.Description == "" {
		t.Errorf("%s: not an OAuth error answer: %.300s", what, body)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// wrongArgs returns arguments for a tool whose input schema is schema:
// every declared property with a value of another type, and an unknown
// property.
func wrongArgs(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{"no_such_argument": true}
	for name, p := range s.Properties {
		if p.Type == "string" {
			args[name] = 12345
		} else {
			args[name] = "not-this-type"
		}
	}
	return args
}

// unknownArgs returns arguments that name things that do not exist: every
// string property of schema set to an unknown id.
func unknownArgs(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for name, p := range s.Properties {
		if p.Type == "string" {
			args[name] = "nope-" + name
		}
	}
	return args
}

func TestEveryToolErrorHasTheWireShape(t *testing.T) {
	f := assenttest.Start(t, func(c *server.Config) { c.RateLimit = -1 })
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	refusals := 0
	for _, tl := range f.Srv.Tools().List() {
		if server.AppOnly(server.MCPTool(tl)) {
			// SPEC 10.28 fixes a view tool's refusal as {code, message};
			// TestScreenViewRefusalShape covers it.
			continue
		}
		schema := tl.InputSchema
		for _, args := range []any{wrongArgs(schema), unknownArgs(schema), []int{1}, "text"} {
			what := fmt.Sprintf("%s(%v)", tl.Name, args)
			if tl.Name == "inbox_wait" {
				if m, ok := args.(map[string]any); ok && len(m) == 0 {
					continue // would wait for nothing
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tl.Name, Arguments: args})
			if err != nil {
				// A JSON-RPC error (arguments that are not an object):
				// the protocol's own shape.
				continue
			}
			if !res.IsError {
				continue
			}
			refusals++
			b, _ := json.Marshal(res.StructuredContent)
			if err := wire.Check(b); err != nil {
				t.Errorf("%s: structuredContent: %v: %s", what, err, b)
				continue
			}
			if msg := string(b); strings.Contains(msg, "Go value") || strings.Contains(msg, "Go struct") || strings.Contains(msg, "cannot unmarshal") {
				t.Errorf("%s: the refusal speaks of Go types: %s", what, b)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if tl.Name != "controls_execute" && text != string(b) {
				t.Errorf("%s: text %s differs from structuredContent %s", what, text, b)
			}
		}
	}
	t.Logf("%d tools, %d refusals checked", len(f.Srv.Tools().List()), refusals)
	if refusals < len(f.Srv.Tools().List()) {
		t.Errorf("only %d refusals over %d tools; the bad arguments no longer reach the tools", refusals, len(f.Srv.Tools().List()))
	}
}

func TestToolErrorCarriesRetryable(t *testing.T) {
	f := assenttest.Start(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "controls_inspect", Arguments: map[string]any{"identity": map[string]any{"formId": "nope", "controlId": "nope"}}})
	if err != nil || !res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	e, ok := wire.Decode(b)
	if !ok || e.Code != wire.NotFound || e.Retryable {
		t.Fatalf("structuredContent = %s", b)
	}
}

func TestMCPTransportErrorsAreJSON(t *testing.T) {
	f := assenttest.Start(t, nil)
	mcpHeaders := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	for _, tc := range []struct {
		name   string
		token  string
		body   string
		hdr    map[string]string
		status int
		code   wire.Code
	}{
		{"no token", "", `{}`, mcpHeaders, 401, wire.SignInRequired},
		{"wrong token", "asnt_wrong", `{}`, mcpHeaders, 401, wire.SignInRequired},
		{"bad JSON", f.Token, `{"jsonrpc":`, mcpHeaders, 400, wire.InvalidRequest},
		{"no Accept", f.Token, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Content-Type": "application/json"}, 400, wire.InvalidRequest},
		{"wrong content type", f.Token, `{}`, map[string]string{"Content-Type": "text/plain", "Accept": "application/json, text/event-stream"}, 415, wire.UnsupportedMediaType},
		{"unknown session", f.Token, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Session-Id": "nope"}, 404, wire.NotFound},
		{"too large", f.Token, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 4<<20) + `"}}`, mcpHeaders, 413, wire.TooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.Req("POST", "/mcp", tc.token, strings.NewReader(tc.body), tc.hdr)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if err := wire.Check(body); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if e, _ := wire.Decode(body); e.Code != tc.code {
				t.Fatalf("code %s, want %s", e.Code, tc.code)
			}
		})
	}
}

// TestDomainCodesHaveAStatus holds the wire table to the codes the Flow
// kernel and the control registry define: each has its row, so none
// silently falls back to 400. (Run codes are the table's own constants.)
func TestDomainCodesHaveAStatus(t *testing.T) {
	codes := []string{
		// Flows.
		flow.CodeCapabilityDenied, flow.CodeCapabilityNotDeclared, flow.CodeProgramNotActive,
		flow.CodeStalePrescription, flow.CodePrescriptionExpired, flow.CodeRevisionConflict,
		flow.CodeApprovalClosed, flow.CodeRecoveryRequired, flow.CodeNotPrescribed,
		flow.CodeEffectFailed, flow.CodeEffectUnavailable, flow.CodeEffectCapabilityDenied,
		// Control refusals.
		string(control.ReasonNotFound), string(control.ReasonInvalidRequest), string(control.ReasonLimitExceeded),
		string(control.ReasonStaleRevision), string(control.ReasonStagedValueStale), string(control.ReasonNoStagedValue),
		string(control.ReasonNothingToUndo), string(control.ReasonCommandFailed),
	}
	for _, c := range codes {
		if _, ok := wire.StatusOf(wire.Code(c)); !ok {
			t.Errorf("code %q has no row in the wire table", c)
		}
	}
}

func TestControlRefusalCarriesTheWireError(t *testing.T) {
	f := assenttest.Start(t, nil)
	body := `{"action":"apply","identity":{"formId":"nope","controlId":"nope"},"value":"x"}`
	resp := f.Req("POST", "/v1/controls/execute", f.Token, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var res struct {
		OK     *bool  `json:"ok"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.OK == nil || *res.OK || res.Reason != "not_found" {
		t.Fatalf("the registry result is not kept: %s", raw)
	}
	if err := wire.Check(raw); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if e, _ := wire.Decode(raw); e.Code != "not_found" || e.Data["reason"] != "not_found" {
		t.Fatalf("error = %+v", e)
	}
}

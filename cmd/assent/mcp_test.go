package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/view"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store/sqlite"
)

// stdioSession runs "assent ARGS…" in process with its stdin and stdout
// connected to an MCP client session.
func stdioSession(t *testing.T, args ...string) (*mcp.ClientSession, <-chan int) {
	t.Helper()
	return stdioSessionWith(t, nil, args...)
}

// stdioSessionWith is stdioSession with a client of options opts.
func stdioSessionWith(t *testing.T, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, <-chan int) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		c := execute(args, inR, outW, &stderr)
		outW.Close()
		code <- c
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		t.Fatalf("connect: %v (stderr: %s)", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		select {
		case <-code:
		case <-time.After(10 * time.Second):
			t.Error("assent mcp did not exit after stdin closed")
		}
	})
	return cs, code
}

func callStatus(t *testing.T, cs *mcp.ClientSession) map[string]any {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range list.Tools {
		found = found || tl.Name == "runtime_status"
	}
	if !found {
		t.Fatal("runtime_status not listed over stdio")
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "runtime_status", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("runtime_status: %v %+v", err, res)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	return out
}

func TestMCPStdioInProcess(t *testing.T) {
	dir := t.TempDir()
	cs, _ := stdioSession(t, "mcp", "--data", dir)
	st := callStatus(t, cs)
	if p, _ := st["principal"].(map[string]any); p["kind"] != "agent" {
		t.Fatalf("status = %v", st)
	}
}

func TestMCPStdioRelay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	boot, _ := auth.EnsureBootstrap(ctx, db, time.Now())
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer hs.CloseClientConnections()

	cs, _ := stdioSession(t, "mcp", "--url", hs.URL, "--token-file", writeTokenFile(t, boot.AgentToken))
	st := callStatus(t, cs)
	if p, _ := st["principal"].(map[string]any); p["id"] != boot.Agent.ID {
		t.Fatalf("status = %v", st)
	}
	// The relay carries the server's instructions and its resources: the
	// screen view an MCP Apps host draws show_screen with.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: hs.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token: boot.AgentToken, base: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if got, want := cs.InitializeResult().Instructions, direct.InitializeResult().Instructions; got == "" || got != want {
		t.Errorf("the relay's instructions are %q, want the server's %q", got, want)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: view.URI})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].MIMEType != view.MIMEType || !strings.Contains(rr.Contents[0].Text, "<html") {
		t.Fatalf("the screen view through the relay: %v", err)
	}
	// A tool meant for a view is listed to a client that declares MCP Apps
	// support, and only to it.
	if err := srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{Name: "orders.note",
		Params:  json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"}}}`),
		Handler: func(context.Context, confirm.Request) (confirm.Result, error) { return confirm.Result{}, nil }}}); err != nil {
		t.Fatal(err)
	}
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(server.AppsExtension, map[string]any{"mimeTypes": []string{view.MIMEType}})
	host, _ := stdioSessionWith(t, &mcp.ClientOptions{Capabilities: caps}, "mcp", "--url", hs.URL, "--token-file", writeTokenFile(t, boot.AgentToken))
	listed := func(cs *mcp.ClientSession) bool {
		t.Helper()
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range list.Tools {
			if tl.Name == "orders.note" {
				return true
			}
		}
		return false
	}
	if !listed(host) {
		t.Error("a view's tool is not listed to an MCP Apps host through the relay")
	}
	plain, _ := stdioSession(t, "mcp", "--url", hs.URL, "--token-file", writeTokenFile(t, boot.AgentToken))
	if listed(plain) {
		t.Error("a view's tool is listed to a client without MCP Apps support")
	}

	// A wrong token is refused before anything is served.
	var stderr bytes.Buffer
	code := execute([]string{"mcp", "--url", hs.URL, "--token-file", writeTokenFile(t, "asnt_wrong")}, strings.NewReader(""), io.Discard, &stderr)
	if code != exitRefused || !strings.Contains(stderr.String(), "sign_in_required") {
		t.Fatalf("wrong token: exit %d, stderr %q", code, stderr.String())
	}
}

func TestTokenCommands(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := execute(append(args, "--data", dir), strings.NewReader(""), &out, &errw)
		return code, out.String(), errw.String()
	}
	code, out, _ := run("token", "create", "--kind", "agent", "--name", "planner", "--grant", "a.b,c.d", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, out)
	}
	var created struct {
		Token     string `json:"token"`
		Principal struct {
			ID     string   `json:"id"`
			Grants []string `json:"grants"`
		} `json:"principal"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Token, "asnt_") || len(created.Principal.Grants) != 2 {
		t.Fatalf("create output %q: %v", out, err)
	}
	code, out, _ = run("token", "list")
	if code != 0 || !strings.Contains(out, "planner") || strings.Contains(out, created.Token) {
		t.Fatalf("list: %d %q", code, out)
	}
	if code, _, _ = run("token", "revoke", created.Principal.ID); code != 0 {
		t.Fatalf("revoke: %d", code)
	}
	code, out, _ = run("token", "list", "--json")
	if code != 0 || !strings.Contains(out, `"revoked": true`) {
		t.Fatalf("list after revoke: %q", out)
	}
	if code, _, errs := run("token", "revoke", "p_missing"); code != exitRefused || !strings.Contains(errs, "not_found") {
		t.Fatalf("revoke missing: %d %q", code, errs)
	}
	if code, _, _ := run("token", "create", "--kind", "robot", "--name", "x"); code != exitUsage {
		t.Fatalf("bad kind: exit %d, want 2", code)
	}
	if code, _, _ := run("token", "create", "--bogus"); code != exitUsage {
		t.Fatalf("unknown flag: exit %d, want 2", code)
	}
}

// TestMCPStdioInProcessDemo: "assent mcp --data … --demo" serves the
// demo the server serves: the profile form, the payment screen's tool, the
// player Recipe and the expense Flow.
func TestMCPStdioInProcessDemo(t *testing.T) {
	cs, _ := stdioSession(t, "mcp", "--data", t.TempDir(), "--demo")
	ctx := context.Background()
	call := func(name string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"controls_list", map[string]any{"formId": "profile"}, `"controlId":"plan"`},
		{"actors_inspect", map[string]any{"target": "recipes", "view": "summary"}, "demo-player"},
		{"flows_list", map[string]any{}, "expense-1001"},
		{"show_screen", map[string]any{"screen": "root = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(root, tool=\"payments.confirm\", params={amount: 1})\n"}, `"rejected":[]`},
	} {
		if out := call(tc.tool, tc.args); !strings.Contains(out, tc.want) {
			t.Errorf("%s: %s lacks %s", tc.tool, out, tc.want)
		}
	}
	var errw bytes.Buffer
	if code := execute([]string{"mcp", "--demo"}, strings.NewReader(""), io.Discard, &errw); code != exitUsage || !strings.Contains(errw.String(), "--data") {
		t.Errorf("--demo without --data: exit %d %q", code, errw.String())
	}
}

// The relay's bearer token never follows a redirect to another origin:
// a server at --url that redirects /mcp elsewhere gets the token, the
// other origin does not, and the relay refuses the redirect.
func TestMCPRelayTokenStaysWithItsOrigin(t *testing.T) {
	const token = "asnt_relay-secret"
	seen := make(chan string, 8)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	// The transport alone: a request to another origin goes without the
	// token.
	tr := bearerTransport{token: token, base: http.DefaultTransport, origin: originOf(first.URL)}
	req, _ := http.NewRequest("GET", other.URL+"/x", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
	}
	if got := <-seen; got != "" {
		t.Errorf("a request to another origin carried %q", got)
	}
	// The relay: refused, and the other origin saw no token.
	var out, errw bytes.Buffer
	code := execute([]string{"mcp", "--url", first.URL, "--token-file", writeTokenFile(t, token)}, strings.NewReader(""), &out, &errw)
	if code == 0 {
		t.Errorf("the relay followed a redirect to another origin: exit 0")
	}
	close(seen)
	for got := range seen {
		if strings.Contains(got, token) {
			t.Fatalf("the other origin received the token: %q", got)
		}
	}
}

// One malformed line on stdin is answered with a JSON-RPC parse error and
// the session goes on.
func TestMCPStdioSurvivesMalformedLine(t *testing.T) {
	var out bytes.Buffer
	in := "not json at all\n\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
	r := jsonLines(strings.NewReader(in), &out)
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n" {
		t.Errorf("passed on %q", got)
	}
	if !strings.Contains(out.String(), `"code":-32700`) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("answered %q; want one parse error", out.String())
	}
	// Through the whole command: a session that sent a broken line still
	// answers the next request.
	dir := t.TempDir()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"mcp", "--data", dir}, inR, outW, io.Discard)
		outW.Close()
	}()
	go func() {
		io.WriteString(inW, "{broken\n")
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	}()
	dec := json.NewDecoder(outR)
	var gotParseError, gotInit bool
	for i := 0; i < 2; i++ {
		var msg map[string]any
		if err := dec.Decode(&msg); err != nil {
			t.Fatalf("reading answers: %v", err)
		}
		if e, ok := msg["error"].(map[string]any); ok && e["code"] == float64(-32700) {
			gotParseError = true
		}
		if msg["id"] == float64(1) && msg["result"] != nil {
			gotInit = true
		}
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("assent mcp did not exit after stdin closed")
	}
	if !gotParseError || !gotInit {
		t.Errorf("parse error %v, initialize answered %v; want both", gotParseError, gotInit)
	}
}

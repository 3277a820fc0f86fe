// Package assenttest starts an assent server for tests and drives it the
// ways its users do: HTTP with a bearer token, a person's browser session
// (sign-in link, cookie, CSRF token), the event stream, and MCP.
//
// A Kit runs a whole server on a fresh store in a temporary directory, with
// the workspace bootstrapped (an owner and an agent with a token).
// Everything is closed when the test ends.
//
// The store is SQLite in the data directory unless the environment variable
// ASSENT_TEST_KIT_BACKEND is "postgres": then every Kit gets a fresh schema
// of its own in the PostgreSQL database named by ASSENT_TEST_POSTGRES,
// dropped when its test ends. A test that needs one backend says so: with
// StartOn, to run on it whatever the environment says, or with SkipUnless,
// to run only in the suite's run on it. Restart starts the next server on
// a Kit's store, as a new process would.
package assenttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/postgres/pgtest"
	"github.com/assent-run/assent/store/sqlite"
)

// Backend names the store a Kit runs on.
type Backend string

// The backends a Kit runs on.
const (
	// SQLite is a database file in the Kit's data directory.
	SQLite Backend = "sqlite"
	// Postgres is a fresh schema in the database named by
	// ASSENT_TEST_POSTGRES (see package pgtest).
	Postgres Backend = "postgres"
)

// EnvBackend names the environment variable that chooses the backend of
// Start, StartListening and StartIn: "sqlite" (the default) or "postgres".
const EnvBackend = "ASSENT_TEST_KIT_BACKEND"

// DefaultBackend returns the backend EnvBackend chooses, failing t when it
// names none.
func DefaultBackend(t testing.TB) Backend {
	t.Helper()
	switch b := Backend(os.Getenv(EnvBackend)); b {
	case "", SQLite:
		return SQLite
	case Postgres:
		return Postgres
	default:
		t.Fatalf("%s=%q: want %q or %q", EnvBackend, b, SQLite, Postgres)
		return ""
	}
}

// pgURLFile holds, in a data directory used on PostgreSQL, the URL of its
// schema, so that a Kit started again in the same directory finds the same
// store, as a SQLite Kit finds its database file.
const pgURLFile = "assenttest-postgres-url"

// Kit is a running server and the clients to reach it.
type Kit struct {
	T   testing.TB
	Srv *server.Server
	// DB is the server's store, on Backend.
	DB      store.Store
	Backend Backend
	HTTP    *httptest.Server
	// Dir is the server's data directory.
	Dir string
	// Boot holds the workspace's owner and first agent.
	Boot auth.Bootstrap
	// Token is the first agent's bearer token.
	Token string
	// Demo is the demo application, on a Kit that StartDemo started.
	Demo *demo.App

	sqlite *sqlite.DB // DB on SQLite, or nil
	demo   bool       // the demo application is installed on every server
	pgURL  string     // the URL of DB's schema on PostgreSQL
	listen bool       // the server's BaseURL is its address
	stop   func()     // stops the server, once
}

// SQLite returns the Kit's store as the SQLite database it is, failing the
// test when the Kit runs on another backend: a test that needs SQLite
// starts its Kit with StartOn(t, SQLite, …).
func (k *Kit) SQLite() *sqlite.DB {
	k.T.Helper()
	if k.sqlite == nil {
		k.T.Fatalf("the kit runs on %s, and this test needs SQLite: start it with assenttest.StartOn(t, assenttest.SQLite, …)", k.Backend)
	}
	return k.sqlite
}

// Start runs a server on a fresh data directory. mod, when not nil, may
// change the configuration before the server is built.
func Start(t testing.TB, mod func(*server.Config)) *Kit {
	t.Helper()
	return start(t, false, mod)
}

// StartListening is Start with the server's BaseURL set to its real
// address before it is built, for Runs and tools that call the server back.
func StartListening(t testing.TB, mod func(*server.Config)) *Kit {
	t.Helper()
	return start(t, true, mod)
}

// StartIn is StartListening on the data directory dir, created when
// missing; dir may be relative, as a person's command line gives it.
func StartIn(t testing.TB, dir string, mod func(*server.Config)) *Kit {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return startIn(t, dir, true, mod)
}

// StartOn is Start on the backend b, whatever EnvBackend says.
func StartOn(t testing.TB, b Backend, mod func(*server.Config)) *Kit {
	t.Helper()
	return startOn(t, b, t.TempDir(), false, false, mod)
}

// StartDemo runs a server with the demo application installed (package
// demo, as assent serve --demo installs it). mod, when given, may change
// the configuration before the server is built.
func StartDemo(t testing.TB, mod ...func(*server.Config)) *Kit {
	t.Helper()
	return startOn(t, DefaultBackend(t), t.TempDir(), false, true, func(c *server.Config) {
		for _, m := range mod {
			m(c)
		}
	})
}

// StartDemoOn is StartDemo on the backend b, whatever EnvBackend says.
func StartDemoOn(t testing.TB, b Backend, mod func(*server.Config)) *Kit {
	t.Helper()
	return startOn(t, b, t.TempDir(), false, true, mod)
}

// StartDemoIn is StartIn with the demo application installed, as
// StartDemo installs it.
func StartDemoIn(t testing.TB, dir string, mod func(*server.Config)) *Kit {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return startOn(t, DefaultBackend(t), dir, true, true, mod)
}

func start(t testing.TB, listen bool, mod func(*server.Config)) *Kit {
	t.Helper()
	return startIn(t, t.TempDir(), listen, mod)
}

func startIn(t testing.TB, dir string, listen bool, mod func(*server.Config)) *Kit {
	t.Helper()
	return startOn(t, DefaultBackend(t), dir, listen, false, mod)
}

func startOn(t testing.TB, b Backend, dir string, listen, withDemo bool, mod func(*server.Config)) *Kit {
	t.Helper()
	ctx := context.Background()
	k := &Kit{T: t, Backend: b, Dir: dir, demo: withDemo}
	switch b {
	case SQLite:
		db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
		if err != nil {
			t.Fatal(err)
		}
		k.DB, k.sqlite = db, db
	case Postgres:
		u, err := postgresURL(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		db, err := postgres.Open(ctx, u)
		if err != nil {
			t.Fatalf("assenttest: open the PostgreSQL store: %v", err)
		}
		k.DB, k.pgURL = db, u
	default:
		t.Fatalf("assenttest: no backend %q", b)
	}
	// The store is closed after the server, and before a PostgreSQL
	// schema is dropped (registered earlier, so it runs later).
	t.Cleanup(func() { k.DB.Close() })
	boot, err := auth.EnsureBootstrap(ctx, k.DB, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	k.Boot, k.Token = boot, boot.AgentToken
	k.serve(listen, mod)
	return k
}

// OpenStore opens k's store again, as another process on the same
// database does (assent token revoke, a second node). The caller closes
// it.
func (k *Kit) OpenStore(ctx context.Context) store.Store {
	k.T.Helper()
	var (
		st  store.Store
		err error
	)
	switch k.Backend {
	case SQLite:
		st, err = sqlite.Open(ctx, filepath.Join(k.Dir, "assent.db"))
	case Postgres:
		st, err = postgres.Open(ctx, k.pgURL)
	}
	if err != nil {
		k.T.Fatalf("assenttest: open the %s store again: %v", k.Backend, err)
	}
	return st
}

// SkipUnless skips t, saying why, unless the kits of Start, StartListening
// and StartIn run on b: for a test of one backend's own behaviour (SQLite's
// files on disk), which the run of the suite on that backend covers.
func SkipUnless(t testing.TB, b Backend) {
	t.Helper()
	if got := DefaultBackend(t); got != b {
		t.Skipf("this test is of the %s backend; the kit runs on %s (%s)", b, got, EnvBackend)
	}
}

// postgresURL returns the URL of the PostgreSQL schema of the data
// directory dir, making a fresh schema when dir has none yet.
func postgresURL(t testing.TB, dir string) (string, error) {
	t.Helper()
	file := filepath.Join(dir, pgURLFile)
	b, err := os.ReadFile(file)
	if err == nil {
		return string(b), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("assenttest: read the data directory's PostgreSQL schema: %w", err)
	}
	if os.Getenv(pgtest.EnvURL) == "" {
		// Asked for by name, PostgreSQL missing is a failure, not a skip.
		return "", fmt.Errorf("assenttest: the kit runs on PostgreSQL, and %s names no database: set it to postgres://USER:PASSWORD@HOST:PORT/DATABASE", pgtest.EnvURL)
	}
	u, _ := pgtest.URL(t)
	if err := os.WriteFile(file, []byte(u), 0o600); err != nil {
		return "", fmt.Errorf("assenttest: record the data directory's PostgreSQL schema: %w", err)
	}
	return u, nil
}

// serve builds the server on k's store and serves it, on a listener whose
// address is the server's BaseURL when listen is set.
func (k *Kit) serve(listen bool, mod func(*server.Config)) {
	k.T.Helper()
	cfg := server.Config{DataDir: k.Dir, Store: k.DB}
	var ln net.Listener
	if listen {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			k.T.Fatal(err)
		}
		cfg.BaseURL = "http://" + ln.Addr().String()
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		k.T.Fatal(err)
	}
	if k.demo {
		// As assent serve --demo: the demo is installed before the
		// server serves, on every start.
		if k.Demo, err = demo.Install(context.Background(), srv, cfg); err != nil {
			srv.Close()
			if ln != nil {
				ln.Close()
			}
			k.T.Fatal(err)
		}
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	if ln != nil {
		hs.Listener.Close()
		hs.Listener = ln
	}
	hs.Start()
	k.Srv, k.HTTP, k.listen = srv, hs, listen
	k.stop = sync.OnceFunc(func() {
		hs.CloseClientConnections()
		srv.Close()
		hs.Close()
	})
	k.T.Cleanup(k.stop)
}

// Restart stops k's server, as a process that dies, and starts a new one
// on the same store and data directory, as the next process would. The new
// server is configured by mod alone (nil for the defaults); it listens on a
// new address, its BaseURL when k's server had one. k is left stopped; its
// store stays open for the Kit returned.
func (k *Kit) Restart(mod func(*server.Config)) *Kit {
	k.T.Helper()
	k.stop()
	next := &Kit{T: k.T, DB: k.DB, Backend: k.Backend, Dir: k.Dir, Boot: k.Boot, Token: k.Token, sqlite: k.sqlite, pgURL: k.pgURL, demo: k.demo}
	next.serve(k.listen, mod)
	return next
}

// URL is the server's base URL.
func (k *Kit) URL() string { return k.HTTP.URL }

// Req sends a request with the bearer token (none when token is empty)
// and the headers in hdr. The response body is closed when the test ends.
func (k *Kit) Req(method, path, token string, body io.Reader, hdr map[string]string) *http.Response {
	k.T.Helper()
	r, err := http.NewRequest(method, k.HTTP.URL+path, body)
	if err != nil {
		k.T.Fatal(err)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for name, v := range hdr {
		r.Header.Set(name, v)
	}
	resp, err := k.HTTP.Client().Do(r)
	if err != nil {
		k.T.Fatal(err)
	}
	k.T.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Do sends body as JSON with the bearer token, decodes the answer into out
// when out is not nil, and returns the status code.
func (k *Kit) Do(method, path, token string, body, out any) int {
	k.T.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			k.T.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	resp := k.Req(method, path, token, rd, map[string]string{"Content-Type": "application/json"})
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			k.T.Fatalf("%s %s: answer is not JSON: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// ErrorCode reads an error answer and returns its code. It fails the test
// when the body is not the wire's error shape (code, message, retryable).
func ErrorCode(t testing.TB, resp *http.Response) string {
	t.Helper()
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable *bool  `json:"retryable"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("error body is not JSON: %v", err)
	}
	if body.Error.Message == "" || body.Error.Retryable == nil {
		t.Fatalf("error body lacks message or retryable: %+v", body)
	}
	return body.Error.Code
}

// ReadAll returns the body of resp as a string.
func ReadAll(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// SignIn signs the workspace's owner in and returns the session cookie and
// the CSRF token of their pages.
func (k *Kit) SignIn() (*http.Cookie, string) {
	k.T.Helper()
	cookie, csrf := k.SignInAs(k.Boot.Owner.ID)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		k.T.Fatalf("session cookie %+v", cookie)
	}
	return cookie, csrf
}

// SignInAs follows a fresh sign-in link for the person id and returns the
// session cookie and the CSRF token of their pages.
func (k *Kit) SignInAs(id string) (*http.Cookie, string) {
	k.T.Helper()
	link, err := auth.NewSignInLink(context.Background(), k.DB.Sessions(), id, k.HTTP.URL, time.Now())
	if err != nil {
		k.T.Fatal(err)
	}
	resp := k.PostForm("/signin", url.Values{"link": {link[strings.LastIndex(link, "/")+1:]}}, nil, k.HTTP.URL)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.SessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		k.T.Fatalf("sign in: %d, no cookie", resp.StatusCode)
	}
	page := ReadAll(k.Get("/inbox", cookie))
	const meta = `name="csrf-token" content="`
	i := strings.Index(page, meta)
	if i < 0 {
		k.T.Fatal("inbox has no CSRF token")
	}
	rest := page[i+len(meta):]
	return cookie, rest[:strings.IndexByte(rest, '"')]
}

// NoRedirect returns a client of the server that does not follow
// redirects.
func (k *Kit) NoRedirect() *http.Client {
	c := *k.HTTP.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// PostForm posts a form as a browser would, with the session cookie and
// the Origin header when they are given. Redirects are not followed.
func (k *Kit) PostForm(path string, v url.Values, cookie *http.Cookie, origin string) *http.Response {
	k.T.Helper()
	r, err := http.NewRequest("POST", k.HTTP.URL+path, strings.NewReader(v.Encode()))
	if err != nil {
		k.T.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if cookie != nil {
		r.AddCookie(cookie)
	}
	return k.send(r)
}

// Get fetches a page with the session cookie, when given. Redirects are
// not followed.
func (k *Kit) Get(path string, cookie *http.Cookie) *http.Response {
	k.T.Helper()
	r, err := http.NewRequest("GET", k.HTTP.URL+path, nil)
	if err != nil {
		k.T.Fatal(err)
	}
	if cookie != nil {
		r.AddCookie(cookie)
	}
	return k.send(r)
}

func (k *Kit) send(r *http.Request) *http.Response {
	k.T.Helper()
	resp, err := k.NoRedirect().Do(r)
	if err != nil {
		k.T.Fatal(err)
	}
	k.T.Cleanup(func() { resp.Body.Close() })
	return resp
}

// SSE reads a stream of server-sent events.
type SSE struct {
	Resp *http.Response
	rd   *bufio.Reader
}

// Event is one server-sent event.
type Event struct {
	ID, Type, Data string
}

// Events opens the event stream with the agent's token, resuming after
// lastID when it is not empty.
func (k *Kit) Events(lastID string) *SSE {
	k.T.Helper()
	hdr := map[string]string{}
	if lastID != "" {
		hdr["Last-Event-ID"] = lastID
	}
	resp := k.Req("GET", "/v1/events", k.Token, nil, hdr)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		k.T.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return NewSSE(resp)
}

// NewSSE reads the events of resp.
func NewSSE(resp *http.Response) *SSE { return &SSE{Resp: resp, rd: bufio.NewReader(resp.Body)} }

// Next returns the next event, skipping comments; it fails the test when
// the stream ends first.
func (s *SSE) Next(t testing.TB) Event {
	t.Helper()
	var e Event
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if e.Type != "" {
				return e
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			e.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.Data = line[6:]
		}
	}
}

// MCPSession connects the official SDK client to /mcp over streamable
// HTTP with token, asking for protocol version when it is not empty.
func (k *Kit) MCPSession(token, version string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	hc := &http.Client{Transport: bearerTransport(token)}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: k.HTTP.URL + "/mcp", HTTPClient: hc}, opts)
}

// bearerTransport adds "Authorization: Bearer token" to every request.
type bearerTransport string

func (tok bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+string(tok))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// appsExtension is the MCP Apps extension a client declares to be shown
// views.
const appsExtension = "io.modelcontextprotocol/ui"

// AppsSession connects to /mcp as an MCP Apps client: one that declares it
// can show views, so app-only tools are listed to it.
func (k *Kit) AppsSession(token string) (*mcp.ClientSession, error) {
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(appsExtension, map[string]any{"mimeTypes": []string{"text/html;profile=mcp-app"}})
	client := mcp.NewClient(&mcp.Implementation{Name: "apps", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	hc := &http.Client{Transport: bearerTransport(token)}
	return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: k.HTTP.URL + "/mcp", HTTPClient: hc}, nil)
}

// Client returns an HTTP client that sends token as a bearer token with
// every request.
func Client(token string) *http.Client { return &http.Client{Transport: bearerTransport(token)} }

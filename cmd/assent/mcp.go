package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/client"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/screen/view"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

func newMCPCmd(c *cli) *cobra.Command {
	var (
		o         clientOpts
		data      string
		storeFlag storeFlags
		withDemo  bool
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP over stdio, for clients that start assent as a subprocess",
		Long: `Serve the Model Context Protocol on standard input and output.

With --url (or ASSENT_URL) it relays to a running assent server with the
bearer token from ASSENT_TOKEN or --token-file (a token on the command line,
--token, is refused secret_on_command_line): the instructions, the tools, their
results and their refusals, and the resources (the screen view an MCP Apps
host draws show_screen with) are the server's; a client that declares MCP
Apps support also sees the tools meant for a view. With --data it runs in process on a data directory
instead, acting as the agent created at first start (or as the principal of
the token in ASSENT_TOKEN or --token-file). With --data and --demo it loads the same demo workspace as
"assent serve --demo": the profile form, the screens, the player Recipe and
the Flows. Proposals and screens made in process are kept in the store, but
a server already running on it reads them only when it next starts; Runs
and Flow instances are seen by both at once. --store names a PostgreSQL
store instead of the data directory's SQLite. Runs started in
process report to this process's own loopback HTTP API, so a service Run
(such as the demo player) can be steered only while it runs.`,
		Example: `  ASSENT_TOKEN=asnt_… assent mcp --url http://127.0.0.1:7410
  assent mcp --data ./assent-data --demo`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			out := &lockedWriter{w: c.out}
			t := &mcp.IOTransport{Reader: io.NopCloser(jsonLines(c.in, out)), Writer: nopWriteCloser{out}}
			if data != "" {
				tok, err := readToken(o.token, o.tokenFile, "ASSENT_TOKEN")
				if err != nil {
					return err
				}
				return serveMCPInProcess(ctx, c, data, storeFlag, tok, withDemo, t)
			}
			if withDemo {
				return usageErr("--demo goes with --data; a server started with assent serve --demo already serves the demo")
			}
			api, err := newAPIClient(o)
			if err != nil {
				return err
			}
			return relayMCP(ctx, api, t)
		},
	}
	addClientFlags(cmd, &o)
	cmd.Flags().StringVar(&data, "data", "", "run in process on this data directory instead of relaying to a server")
	cmd.Flags().BoolVar(&withDemo, "demo", false, "with --data: load the demo workspace, as assent serve --demo does")
	storeFlag.add(cmd.Flags(), "with --data: "+storeFlagUsage)
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveMCPInProcess runs the full runtime on the data directory and serves
// its tools over t.
func serveMCPInProcess(ctx context.Context, c *cli, dir string, storeFlag storeFlags, token string, withDemo bool, t mcp.Transport) error {
	rt, err := startInProcess(ctx, c, dir, storeFlag, token, withDemo)
	if err != nil {
		return err
	}
	defer rt.close()
	if err := rt.mcp.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return refused("%v", err)
	}
	return nil
}

// inProcess is the runtime on a data directory, in this process.
type inProcess struct {
	// mcp serves the tools, acting as one principal.
	mcp *mcp.Server
	// base is the loopback URL of this process's HTTP API and web UI, which
	// Runs started here call back (ASSENT_URL) while the process lives.
	base  string
	db    store.Store
	owner string
	close func()
}

// signInLink returns a one-time sign-in link to this process's web UI for
// the workspace's owner.
func (rt *inProcess) signInLink(ctx context.Context) (string, error) {
	return auth.NewSignInLink(ctx, rt.db.Sessions(), rt.owner, rt.base, time.Now())
}

// startInProcess opens the data directory, builds the runtime, serves its
// HTTP API on a loopback port (so Runs can reach it) and builds an MCP
// server over its tools that acts as the agent created at first start, or
// as token's principal.
func startInProcess(ctx context.Context, c *cli, data string, storeFlag storeFlags, token string, withDemo bool) (*inProcess, error) {
	dir, err := absDataDir(data)
	if err != nil {
		return nil, err
	}
	db, err := openCommandStore(ctx, dir, storeFlag, true)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*inProcess, error) {
		db.Close()
		return nil, err
	}
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		return fail(refused("%v", err))
	}
	p := boot.Agent
	if token != "" {
		if p, err = db.Principals().PrincipalByToken(ctx, auth.Hash(token)); err != nil {
			return fail(refused("sign_in_required: the token is unknown or revoked"))
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(refused("cannot_listen: cannot listen on a loopback port: %v", err))
	}
	base := "http://" + ln.Addr().String()
	log := slog.New(slog.NewTextHandler(c.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := server.Config{DataDir: dir, Store: db, Logger: log, BaseURL: base}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		ln.Close()
		return fail(refused("%v", err))
	}
	if withDemo {
		app, err := demo.Install(ctx, srv, cfg)
		if err != nil {
			srv.Close()
			ln.Close()
			return fail(refused("%v", err))
		}
		if _, err := app.Seed(ctx); err != nil {
			log.Warn("the demo inbox was not seeded", "err", err)
		}
	}
	sctx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(sctx, ln); err != nil {
			log.Warn("in-process HTTP API stopped", "err", err)
		}
	}()
	ms, stop := server.NewMCPServer(srv.Tools(), log, func(context.Context, *mcp.CallToolRequest) (store.Principal, bool) { return p, true })
	srv.AddScreenView(ms)
	return &inProcess{mcp: ms, base: base, db: db, owner: boot.Owner.ID, close: func() {
		stop()
		stopHTTP()
		<-served
		srv.Close()
		db.Close()
	}}, nil
}

// bearerTransport adds the bearer token to every request to origin (a
// scheme://host[:port]; any origin when empty), and to no other: a
// redirect to another origin never carries it.
type bearerTransport struct {
	token  string
	base   http.RoundTripper
	origin string
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.origin == "" || sameOrigin(r.URL, b.origin) {
		r.Header.Set("Authorization", "Bearer "+b.token)
	} else {
		r.Header.Del("Authorization")
	}
	return b.base.RoundTrip(r)
}

// originOf returns the scheme://host[:port] of raw, "" when it does not
// parse.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// sameOrigin reports whether u is at origin.
func sameOrigin(u *url.URL, origin string) bool {
	return strings.ToLower(u.Scheme)+"://"+strings.ToLower(u.Host) == origin
}

// sameOriginRedirects refuses a redirect to another origin, so that what
// a request carries never follows it there.
func sameOriginRedirects(origin string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if !sameOrigin(req.URL, origin) {
			return fmt.Errorf("redirect_refused: the server redirected to another origin (%s); pass --url with the address that answers itself", req.URL.Scheme+"://"+req.URL.Host)
		}
		return nil
	}
}

// parseErrorLine is the JSON-RPC answer to a line that is not JSON.
const parseErrorLine = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}` + "\n"

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// jsonLines passes on the lines of in that are JSON, and answers each
// other non-empty line with a JSON-RPC parse error on out, so that one
// malformed line does not end the session.
func jsonLines(in io.Reader, out io.Writer) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if t := bytes.TrimSpace(line); len(t) > 0 {
				if json.Valid(t) {
					if _, werr := pw.Write(append(t, '\n')); werr != nil {
						return
					}
				} else {
					_, _ = io.WriteString(out, parseErrorLine)
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// relayMCP serves over t what the server client points at serves: its
// instructions, its tools and its resources (the screen view of MCP Apps
// among them). The relay declares MCP Apps support to the server, so it
// sees the tools meant for a view, and lists those only to a client that
// declares that support itself, as the server does.
func relayMCP(ctx context.Context, api *client.Client, t mcp.Transport) error {
	var (
		mu     sync.Mutex
		local  *mcp.Server
		remote *mcp.ClientSession
		tools  = map[string]bool{}
		res    = map[string]bool{}
	)
	syncTools := func(ctx context.Context) error {
		mu.Lock()
		cs, srv := remote, local
		mu.Unlock()
		if cs == nil || srv == nil {
			return nil
		}
		seen := map[string]bool{}
		for tl, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			seen[tl.Name] = true
			name := tl.Name
			srv.AddTool(tl, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments, Meta: req.Params.Meta})
			})
		}
		mu.Lock()
		gone := missing(tools, seen)
		tools = seen
		mu.Unlock()
		if len(gone) > 0 {
			srv.RemoveTools(gone...)
		}
		return nil
	}
	syncResources := func(ctx context.Context) error {
		mu.Lock()
		cs, srv := remote, local
		mu.Unlock()
		if cs == nil || srv == nil {
			return nil
		}
		read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI, Meta: req.Params.Meta})
		}
		seen := map[string]bool{}
		if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Resources == nil {
			return nil
		}
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return err
			}
			seen[r.URI] = true
			srv.AddResource(r, read)
		}
		for rt, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return err
			}
			srv.AddResourceTemplate(rt, read)
		}
		mu.Lock()
		gone := missing(res, seen)
		res = seen
		mu.Unlock()
		if len(gone) > 0 {
			srv.RemoveResources(gone...)
		}
		return nil
	}
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(server.AppsExtension, map[string]any{"mimeTypes": []string{view.MIMEType}})
	mc := mcp.NewClient(&mcp.Implementation{Name: "assent-relay", Version: assent.Version}, &mcp.ClientOptions{
		Capabilities:               caps,
		ToolListChangedHandler:     func(ctx context.Context, _ *mcp.ToolListChangedRequest) { _ = syncTools(ctx) },
		ResourceListChangedHandler: func(ctx context.Context, _ *mcp.ResourceListChangedRequest) { _ = syncResources(ctx) },
	})
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: api.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: api.Token(), base: http.DefaultTransport, origin: originOf(api.BaseURL())},
			CheckRedirect: sameOriginRedirects(originOf(api.BaseURL()))},
	}, nil)
	if err != nil {
		if strings.Contains(err.Error(), "401") || strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			return refused("sign_in_required: the server refused the token (unknown or revoked)")
		}
		return refused("unreachable: cannot reach assent at %s: %v (is assent serve running? pass --url or set ASSENT_URL to where it listens)", api.BaseURL(), err)
	}
	defer cs.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "assent", Version: assent.Version}, &mcp.ServerOptions{
		Instructions: cs.InitializeResult().Instructions,
	})
	// A client that does not declare MCP Apps support is not shown the
	// tools meant for a view.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			out, err := next(ctx, method, req)
			if lr, ok := out.(*mcp.ListToolsResult); ok && err == nil && !server.DeclaresApps(req) {
				kept := lr.Tools[:0:0]
				for _, tl := range lr.Tools {
					if !server.AppOnly(tl) {
						kept = append(kept, tl)
					}
				}
				lr.Tools = kept
			}
			return out, err
		}
	})
	mu.Lock()
	remote, local = cs, srv
	mu.Unlock()
	if err := syncTools(ctx); err != nil {
		return refused("unreachable: listing the server's tools: %v", err)
	}
	if err := syncResources(ctx); err != nil {
		return refused("unreachable: listing the server's resources: %v", err)
	}
	if err := srv.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return refused("%v", err)
	}
	return nil
}

// missing returns the keys of was that now lacks.
func missing(was, now map[string]bool) []string {
	var out []string
	for k := range was {
		if !now[k] {
			out = append(out, k)
		}
	}
	return out
}

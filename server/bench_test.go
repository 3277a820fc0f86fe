package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/unsaved"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchmarkMCP measures one tools/call round trip over streamable HTTP on
// loopback, for a protocol revision ("" = the client's latest, served
// statelessly).
func benchmarkMCP(b *testing.B, version, name string, args map[string]any) {
	benchmarkMCPOn(b, nil, version, name, args)
}

// benchmarkMCPOn is benchmarkMCP on a server whose store is wrap's
// (nil: the test database itself).
func benchmarkMCPOn(b *testing.B, wrap func(store.Store) store.Store, version, name string, args map[string]any) {
	t := &testing.T{}
	f := assenttest.StartDemo(t, func(c *server.Config) {
		c.RateLimit = -1
		if wrap != nil {
			c.Store = wrap(c.Store)
		}
	})
	f.T = t
	defer func() {
		f.HTTP.CloseClientConnections()
		f.Srv.Close()
		f.HTTP.Close()
		f.DB.Close()
	}()
	callLoop(b, func() (*mcp.ClientSession, error) { return f.MCPSession(f.Token, version) }, name, args)
}

// callLoop calls tool name with args over sessions made by connect: one
// session, or with -cpu and b.SetParallelism one per parallel goroutine.
func callLoop(b *testing.B, connect func() (*mcp.ClientSession, error), name string, args map[string]any) {
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	b.ReportAllocs()
	if par := benchParallelism; par > 0 {
		b.SetParallelism(par)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			cs, err := connect()
			if err != nil {
				b.Error(err)
				return
			}
			defer cs.Close()
			for pb.Next() {
				if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
					b.Errorf("%v %+v", err, res)
					return
				}
			}
		})
		return
	}
	cs, err := connect()
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// benchParallelism, when positive, makes the MCP benchmarks call from
// GOMAXPROCS×benchParallelism concurrent sessions (set by the *Parallel
// benchmarks).
var benchParallelism int

func parallel(b *testing.B, perProc int, bench func(*testing.B)) {
	benchParallelism = perProc
	defer func() { benchParallelism = 0 }()
	bench(b)
}

// benchmarkMCPFloor is benchmarkMCP against the floor: a server on the same
// SDK with one trivial tool, served the same way, with the same client.
// Its figures are what the MCP benchmarks above are compared with.
func benchmarkMCPFloor(b *testing.B, version string, args map[string]any) {
	ms := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "1"}, nil)
	ms.AddTool(&mcp.Tool{Name: "floor", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":true}`}}, StructuredContent: map[string]any{"ok": true}}, nil
		})
	get := func(*http.Request) *mcp.Server { return ms }
	stateful := mcp.NewStreamableHTTPHandler(get, nil)
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= server.StatelessRevision {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	}))
	defer hs.Close()
	defer hs.CloseClientConnections()
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	connect := func() (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hs.Client()}, opts)
	}
	callLoop(b, connect, "floor", args)
}

var stagePlan = map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "pro"}

func BenchmarkMCPStatusStateless(b *testing.B) {
	benchmarkMCP(b, "", "runtime_status", map[string]any{})
}

func BenchmarkMCPStatusSession(b *testing.B) {
	benchmarkMCP(b, "2025-11-25", "runtime_status", map[string]any{})
}

func BenchmarkMCPControlsExecuteStateless(b *testing.B) {
	benchmarkMCP(b, "", "controls_execute", stagePlan)
}

// BenchmarkMCPControlsExecuteUnsaved is BenchmarkMCPControlsExecuteStateless
// with the control registry's writes dropped: the difference between the
// two is what the durable write of a stage (one SQLite transaction that
// saves the proposal and appends its audit record) costs a call in a
// loaded server. It measures; no server runs this way.
func BenchmarkMCPControlsExecuteUnsaved(b *testing.B) {
	benchmarkMCPOn(b, unsaved.Controls, "", "controls_execute", stagePlan)
}

func BenchmarkMCPControlsExecuteSession(b *testing.B) {
	benchmarkMCP(b, "2025-11-25", "controls_execute", stagePlan)
}

func BenchmarkMCPFloorStateless(b *testing.B) {
	benchmarkMCPFloor(b, "", map[string]any{})
}

func BenchmarkMCPFloorSession(b *testing.B) {
	benchmarkMCPFloor(b, "2025-11-25", map[string]any{})
}

// The Parallel benchmarks call from 16 concurrent sessions on two CPUs
// (8 per GOMAXPROCS).

func BenchmarkMCPStatusStatelessParallel(b *testing.B) {
	parallel(b, 8, BenchmarkMCPStatusStateless)
}

func BenchmarkMCPFloorStatelessParallel(b *testing.B) {
	parallel(b, 8, BenchmarkMCPFloorStateless)
}

// BenchmarkPageOpenItems measures loading a web page (the Runs page) for
// the workspace's owner while 200 questions from an agent they supervise
// wait, on the demo: the inbox badge counts them on every page.
func BenchmarkPageOpenItems(b *testing.B) {
	t := &testing.T{}
	f := assenttest.StartDemo(t, func(c *server.Config) { c.RateLimit = -1 })
	f.T = t
	defer func() {
		f.HTTP.CloseClientConnections()
		f.Srv.Close()
		f.HTTP.Close()
		f.DB.Close()
	}()
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range 200 {
		a := store.Ask{ID: fmt.Sprintf("ask-bench-%03d", i), Asker: f.Boot.Agent.ID, Question: fmt.Sprintf("Ship order %d today?", i),
			Kind: store.AskYesNo, CreatedAt: now, State: store.AskOpen}
		if err := f.DB.Asks().CreateAsk(ctx, a, 0); err != nil {
			b.Fatal(err)
		}
	}
	cookie, _ := f.SignIn()
	// The demo's own open items are counted too.
	m := regexp.MustCompile(`class="badge" aria-label="(\d+) open"`).FindStringSubmatch(assenttest.ReadAll(f.Get("/runs", cookie)))
	if m == nil {
		b.Fatal("the page shows no badge")
	}
	if n, _ := strconv.Atoi(m[1]); n < 200 {
		b.Fatalf("badge %v, want at least the 200 questions", m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp := f.Get("/runs", cookie)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET /runs: %d", resp.StatusCode)
		}
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agent connects the official MCP client with the first agent's token.
func (a *app) agent() *mcp.ClientSession {
	a.t.Helper()
	return a.connect(a.boot.AgentToken, nil)
}

// connect opens an MCP session over streamable HTTP with token, as a
// client with opts (nil for a plain client), closed when the test ends.
func (a *app) connect(token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	a.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, opts)
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: a.http.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		a.t.Fatalf("connect: %v", err)
	}
	a.t.Cleanup(func() { cs.Close() })
	return cs
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// call calls a tool and returns its structured content and error flag.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	return out, res.IsError
}

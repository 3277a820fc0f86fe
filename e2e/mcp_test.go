package e2e

import (
	"context"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agent connects the official MCP client with the first agent's token.
func (a *app) agent() *mcp.ClientSession {
	a.T.Helper()
	return a.connect(a.Boot.AgentToken, nil)
}

// connect opens an MCP session over streamable HTTP with token, as a
// client with opts (nil for a plain client), closed when the test ends.
func (a *app) connect(token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	a.T.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: a.HTTP.URL + "/mcp", HTTPClient: assenttest.Client(token)}, nil)
	if err != nil {
		a.T.Fatalf("connect: %v", err)
	}
	a.T.Cleanup(func() { cs.Close() })
	return cs
}

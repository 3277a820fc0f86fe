package server

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchmarkMCP measures one tools/call round trip over streamable HTTP on
// loopback, for a protocol revision ("" = the client's latest, served
// statelessly).
func benchmarkMCP(b *testing.B, version, name string, args map[string]any) {
	t := &testing.T{}
	f := newFixture(t, func(c *Config) { c.Demo, c.RateLimit = true, -1 })
	f.t = t
	defer func() {
		f.http.CloseClientConnections()
		f.srv.Close()
		f.http.Close()
		f.db.Close()
	}()
	cs, err := f.mcpSession(f.token, version)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
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

func BenchmarkMCPControlsExecuteSession(b *testing.B) {
	benchmarkMCP(b, "2025-11-25", "controls_execute", stagePlan)
}

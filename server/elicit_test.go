package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// A decision an agent files reaches the person in the agent's host: a
// client that declared URL-mode elicitation (protocol 2025-11-25) is asked
// to open the decision's page; one that did not gets the URL in the result
// only.
func TestDecisionComesAsURLElicitation(t *testing.T) {
	f := assenttest.StartDemo(t)
	agent, _ := f.Issue(store.KindAgent, "submitter", "state.write", "tool.invoke")
	for i, tc := range []struct {
		declares bool
		version  string
		asked    bool
	}{
		{true, "2025-11-25", true},
		{false, "2025-11-25", false},
		// From 2026-07-28 a server sends no request during a call; the URL
		// is in the result.
		{true, "", false},
	} {
		declares := tc.declares
		var mu sync.Mutex
		var asked []*mcp.ElicitParams
		opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params)
			return &mcp.ElicitResult{Action: "accept"}, nil
		}}
		if declares {
			opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		} else {
			opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, opts)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: f.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearer(agent)}}, &mcp.ClientSessionOptions{ProtocolVersion: tc.version})
		if err != nil {
			t.Fatal(err)
		}
		call := func(name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
			t.Helper()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("%s: %v %+v", name, err, res)
			}
			var out map[string]any
			b, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(b, &out)
			return res, out
		}
		id := fmt.Sprintf("elicit-%d", i)
		call("flows_start", map[string]any{"program": "expense-approval", "phase": "draft", "id": id, "objective": "expense-paid",
			"facts": map[string]any{"expense.amount": map[string]string{"status": "known", "value": "9999.00 EUR"}}})
		_, out := call("flows_prescribe", map[string]any{"instance": id})
		var prx string
		if p := assenttest.As[api.Prescription](t, out).Decision.Prescription; p != nil {
			prx = p.ID
		}
		call("flows_apply", map[string]any{"prescription": prx})
		if len(asked) != 0 {
			t.Fatalf("asked to open %d pages before anything waits for a person", len(asked))
		}
		res, out := call("flows_prescribe", map[string]any{"instance": id})
		link, _ := out["url"].(string)
		if assenttest.As[api.Prescription](t, out).Decision.Awaiting != "human" || !strings.HasSuffix(link, "/flows/instances/"+id) {
			t.Fatalf("no approval filed: %v", out)
		}
		mu.Lock()
		if !tc.asked {
			if len(asked) != 0 || res.Meta[server.ElicitationMeta] != nil {
				t.Errorf("a client without URL elicitation was asked: %+v", asked)
			}
		} else if len(asked) != 1 || asked[0].Mode != "url" || asked[0].URL != f.URL()+"/flows/instances/"+id || asked[0].ElicitationID == "" {
			t.Errorf("elicitations %+v, want one url elicitation of %s", asked, f.URL()+"/flows/instances/"+id)
		} else if res.Meta[server.ElicitationMeta] != "accept" {
			t.Errorf("result _meta %v lacks the client's answer", res.Meta)
		}
		mu.Unlock()
		cs.Close()
	}
}

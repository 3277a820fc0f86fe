package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testclock"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

func TestRevokedTokenRefused(t *testing.T) {
	if host.PrincipalCacheTTL > time.Second {
		t.Fatalf("host.PrincipalCacheTTL is %s; a revocation must take effect within a second", host.PrincipalCacheTTL)
	}
	tests := []struct {
		name string
		// revoke revokes p and reports how far the cache's clock must
		// move before the next request has to be refused.
		revoke func(t *testing.T, f *assenttest.Kit, p store.Principal) time.Duration
	}{
		{"through the server", func(t *testing.T, f *assenttest.Kit, p store.Principal) time.Duration {
			if err := f.Srv.RevokePrincipal(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{"in the store, then announced on the bus", func(t *testing.T, f *assenttest.Kit, p store.Principal) time.Duration {
			if err := f.DB.Principals().RevokePrincipal(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
			// What the server announces when it revokes a principal.
			data, _ := json.Marshal(map[string]string{"principal": p.ID})
			// On PostgreSQL the bus is the store's shared log: the event
			// reaches this node's subscribers, the cache among them, after
			// a round trip.
			sub := f.Srv.Events().Subscribe(f.Srv.Events().Seq(), 0, func(e event.Event) bool { return e.Type == host.PrincipalRevoked })
			defer sub.Close()
			f.Srv.Events().Publish(event.Event{Type: host.PrincipalRevoked, Owner: p.ID, Data: data})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := sub.Next(ctx); err != nil {
				t.Fatalf("the announcement was not delivered: %v", err)
			}
			return 0
		}},
		{"in the store only, as another process does", func(t *testing.T, f *assenttest.Kit, p store.Principal) time.Duration {
			if err := f.DB.Principals().RevokePrincipal(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
			return host.PrincipalCacheTTL
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(time.Now())
			f := assenttest.Start(t, func(c *server.Config) { c.RateLimit, c.Now = -1, clock.Now })
			tok, p, err := auth.IssueToken(context.Background(), f.DB, store.KindAgent, "svc", []string{"tool.invoke"}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if resp := f.Req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 200 {
				t.Fatalf("new token: %d", resp.StatusCode)
			}
			cs, err := f.MCPSession(tok, "")
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call := func() error {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "runtime_status", Arguments: map[string]any{}})
				return err
			}
			if err := call(); err != nil {
				t.Fatalf("runtime_status before revocation: %v", err)
			}
			if n := f.Srv.CachedPrincipals(); n != 1 {
				t.Fatalf("cache holds %d tokens, want 1", n)
			}
			if wait := tc.revoke(t, f, p); wait > 0 {
				// Until the entry is stale it may still be trusted; once
				// it is, the store is asked again.
				clock.Advance(wait)
			}
			if resp := f.Req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 401 {
				t.Fatalf("whoami with the revoked token: %d, want 401", resp.StatusCode)
			}
			if err := call(); err == nil {
				t.Fatal("runtime_status with the revoked token succeeded")
			}
			// The other principal's token is remembered again. An answer
			// loaded while a revocation event arrives is used once and not
			// remembered, and on PostgreSQL the server's own announcement
			// arrives through the shared log a little later: the next
			// request remembers it.
			testwait.Eventually(t, 10*time.Second, func() bool {
				if resp := f.Req("GET", "/v1/whoami", f.Token, nil, nil); resp.StatusCode != 200 {
					t.Fatalf("another principal's token after the revocation: %d, want 200", resp.StatusCode)
				}
				return f.Srv.CachedPrincipals() == 1
			}, "the cache holds the other principal's token, and only it, after the revocation")
		})
	}
}

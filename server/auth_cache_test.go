package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestRevokedTokenRefused(t *testing.T) {
	if principalCacheTTL > time.Second {
		t.Fatalf("principalCacheTTL is %s; a revocation must take effect within a second", principalCacheTTL)
	}
	tests := []struct {
		name string
		// revoke revokes p and reports how far the cache's clock must
		// move before the next request has to be refused.
		revoke func(t *testing.T, f *fixture, p store.Principal) time.Duration
	}{
		{"through the server", func(t *testing.T, f *fixture, p store.Principal) time.Duration {
			if err := f.srv.RevokePrincipal(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{"in the store, then announced on the bus", func(t *testing.T, f *fixture, p store.Principal) time.Duration {
			if err := f.db.RevokePrincipal(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
			f.srv.announceRevoked(p.ID)
			return 0
		}},
		{"in the store only, as another process does", func(t *testing.T, f *fixture, p store.Principal) time.Duration {
			if err := f.db.RevokePrincipal(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
			return principalCacheTTL
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.RateLimit = -1 })
			clock := &fakeClock{t: time.Unix(1e9, 0)}
			f.srv.principals.now = clock.now
			tok, p, err := IssueToken(context.Background(), f.db, store.KindAgent, "svc", []string{"tool.invoke"}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if resp := f.req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 200 {
				t.Fatalf("new token: %d", resp.StatusCode)
			}
			cs, err := f.mcpSession(tok, "")
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
			if n := f.srv.principals.len(); n != 1 {
				t.Fatalf("cache holds %d tokens, want 1", n)
			}
			if wait := tc.revoke(t, f, p); wait > 0 {
				// Until the entry is stale it may still be trusted; once
				// it is, the store is asked again.
				clock.advance(wait)
			}
			if resp := f.req("GET", "/v1/whoami", tok, nil, nil); resp.StatusCode != 401 {
				t.Fatalf("whoami with the revoked token: %d, want 401", resp.StatusCode)
			}
			if err := call(); err == nil {
				t.Fatal("runtime_status with the revoked token succeeded")
			}
			if resp := f.req("GET", "/v1/whoami", f.token, nil, nil); resp.StatusCode != 200 {
				t.Fatalf("another principal's token after the revocation: %d, want 200", resp.StatusCode)
			}
			if n := f.srv.principals.len(); n != 1 {
				t.Fatalf("cache holds %d tokens after the revocation, want 1 (the other principal's)", n)
			}
		})
	}
}

// countingLoad is a principal loader that counts its calls per token.
type countingLoad struct {
	mu     sync.Mutex
	calls  map[string]int
	during func() // run inside each load, before it answers
}

func principalIDOf(tok string) string { return fmt.Sprintf("p_%x", auth.Hash(tok)[:4]) }

func (l *countingLoad) load(_ context.Context, hash []byte) (store.Principal, error) {
	l.mu.Lock()
	l.calls[string(hash)]++
	during := l.during
	l.mu.Unlock()
	if during != nil {
		during()
	}
	if string(hash) == string(auth.Hash("unknown")) {
		return store.Principal{}, store.ErrNotFound
	}
	return store.Principal{ID: fmt.Sprintf("p_%x", hash[:4]), Kind: store.KindAgent, Grants: []string{"a", "b"}}, nil
}

func (l *countingLoad) count(tok string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[string(auth.Hash(tok))]
}

func TestPrincipalCache(t *testing.T) {
	ctx := context.Background()
	type env struct {
		bus   *event.Bus
		load  *countingLoad
		clock *fakeClock
	}
	type step struct {
		before    func(e env)
		tok       string
		wantErr   error
		wantLoads int // loads of tok so far, after this step's lookup
	}
	revoke := func(bus *event.Bus, tok string) {
		data, _ := json.Marshal(revokedData{Principal: principalIDOf(tok)})
		bus.Publish(event.Event{Type: PrincipalRevoked, Owner: principalIDOf(tok), Data: data})
	}
	tests := []struct {
		name  string
		size  int
		steps []step
	}{
		{"a fresh entry is served without the store", 8, []step{
			{tok: "a", wantLoads: 1},
			{tok: "a", wantLoads: 1},
			{before: func(e env) { e.clock.advance(principalCacheTTL / 2) }, tok: "a", wantLoads: 1},
		}},
		{"a stale entry is checked again", 8, []step{
			{tok: "a", wantLoads: 1},
			{before: func(e env) { e.clock.advance(principalCacheTTL) }, tok: "a", wantLoads: 2},
			{tok: "a", wantLoads: 2},
		}},
		{"an unknown token is not remembered", 8, []step{
			{tok: "unknown", wantErr: store.ErrNotFound, wantLoads: 1},
			{tok: "unknown", wantErr: store.ErrNotFound, wantLoads: 2},
		}},
		{"a revocation event drops only its principal", 8, []step{
			{tok: "a", wantLoads: 1},
			{tok: "b", wantLoads: 1},
			{before: func(e env) { revoke(e.bus, "a") }, tok: "a", wantLoads: 2},
			{tok: "b", wantLoads: 1},
		}},
		{"an answer loaded across a revocation is not remembered", 8, []step{
			{before: func(e env) { e.load.during = func() { revoke(e.bus, "other") } }, tok: "a", wantLoads: 1},
			{before: func(e env) { e.load.during = nil }, tok: "a", wantLoads: 2},
			{tok: "a", wantLoads: 2},
		}},
		{"the least recently used token is forgotten first", 2, []step{
			{tok: "a", wantLoads: 1},
			{tok: "b", wantLoads: 1},
			{tok: "a", wantLoads: 1}, // a is now the most recent
			{tok: "c", wantLoads: 1}, // evicts b
			{tok: "a", wantLoads: 1},
			{tok: "b", wantLoads: 2},
		}},
		{"a gap in the events forgets everything", 8, []step{
			{tok: "a", wantLoads: 1},
			{before: func(e env) {
				for range 300 { // more than the subscription holds
					revoke(e.bus, "other")
				}
			}, tok: "a", wantLoads: 2},
		}},
		{"a closed bus turns the cache off", 8, []step{
			{tok: "a", wantLoads: 1},
			{before: func(e env) { e.bus.Close() }, tok: "a", wantLoads: 2},
			{tok: "a", wantLoads: 3},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := env{bus: event.New(event.Options{}), load: &countingLoad{calls: map[string]int{}}, clock: &fakeClock{t: time.Unix(1e9, 0)}}
			defer e.bus.Close()
			c := newPrincipalCache(e.bus, tc.size, principalCacheTTL)
			defer c.close()
			c.now = e.clock.now
			for i, s := range tc.steps {
				if s.before != nil {
					s.before(e)
				}
				p, err := c.lookup(ctx, auth.Hash(s.tok), e.load.load)
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d: lookup(%q) error %v, want %v", i, s.tok, err, s.wantErr)
				}
				if err == nil && p.ID != principalIDOf(s.tok) {
					t.Fatalf("step %d: lookup(%q) = %q, want %q", i, s.tok, p.ID, principalIDOf(s.tok))
				}
				if got := e.load.count(s.tok); got != s.wantLoads {
					t.Fatalf("step %d: %q loaded %d times, want %d", i, s.tok, got, s.wantLoads)
				}
				if n := c.len(); n > tc.size {
					t.Fatalf("step %d: cache holds %d tokens, more than its size %d", i, n, tc.size)
				}
			}
		})
	}
}

func TestPrincipalCacheCopiesAreIndependent(t *testing.T) {
	bus := event.New(event.Options{})
	defer bus.Close()
	c := newPrincipalCache(bus, 8, principalCacheTTL)
	defer c.close()
	l := &countingLoad{calls: map[string]int{}}
	p, err := c.lookup(context.Background(), auth.Hash("a"), l.load)
	if err != nil {
		t.Fatal(err)
	}
	p.Grants = append(p.Grants, "extra")
	p2, err := c.lookup(context.Background(), auth.Hash("a"), l.load)
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Grants) != 2 {
		t.Fatalf("a caller's append changed the cached grants: %v", p2.Grants)
	}
}

func TestOpenMemo(t *testing.T) {
	p := store.Principal{ID: "p_a", Kind: store.KindAgent}
	tests := []struct {
		name      string
		between   func(bus *event.Bus, clock *fakeClock)
		wantCount int // counts made after the second get
	}{
		{"nothing happened", func(*event.Bus, *fakeClock) {}, 1},
		{"an event was published", func(bus *event.Bus, _ *fakeClock) { bus.Publish(event.Event{Type: "run.status"}) }, 2},
		{"the counts grew old", func(_ *event.Bus, c *fakeClock) { c.advance(openMemoTTL) }, 2},
		{"some time passed", func(_ *event.Bus, c *fakeClock) { c.advance(openMemoTTL / 2) }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bus := event.New(event.Options{})
			defer bus.Close()
			clock := &fakeClock{t: time.Unix(1e9, 0)}
			memo := &openMemo{now: clock.now}
			counted := 0
			count := func() map[string]int {
				counted++
				return map[string]int{"runs": counted}
			}
			if got := memo.get(bus, p, count); got["runs"] != 1 {
				t.Fatalf("first get = %v", got)
			}
			tc.between(bus, clock)
			got := memo.get(bus, p, count)
			if counted != tc.wantCount || got["runs"] != tc.wantCount {
				t.Fatalf("counted %d times, got %v; want %d counts", counted, got, tc.wantCount)
			}
			// Another principal never shares the counts.
			if other := memo.get(bus, store.Principal{ID: "p_b"}, count); other["runs"] != tc.wantCount+1 {
				t.Fatalf("another principal got %v", other)
			}
		})
	}
}

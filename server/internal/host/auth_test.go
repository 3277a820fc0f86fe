package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/testclock"
	"github.com/assent-run/assent/store"
)

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
		clock *testclock.Clock
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
			{before: func(e env) { e.clock.Advance(PrincipalCacheTTL / 2) }, tok: "a", wantLoads: 1},
		}},
		{"a stale entry is checked again", 8, []step{
			{tok: "a", wantLoads: 1},
			{before: func(e env) { e.clock.Advance(PrincipalCacheTTL) }, tok: "a", wantLoads: 2},
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
			e := env{bus: event.New(event.Options{}), load: &countingLoad{calls: map[string]int{}}, clock: testclock.New(time.Unix(1e9, 0))}
			defer e.bus.Close()
			c := newPrincipalCache(e.bus, tc.size, PrincipalCacheTTL)
			defer c.close()
			c.now = e.clock.Now
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
	c := newPrincipalCache(bus, 8, PrincipalCacheTTL)
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

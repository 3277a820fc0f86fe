package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// downStore is a store whose settings cannot be read while down is set,
// as when its database is unreachable.
type downStore struct {
	store.Store
	down *atomic.Bool
}

func (d downStore) Settings() store.Settings { return downSettings{d.Store.Settings(), d.down} }

type downSettings struct {
	store.Settings
	down *atomic.Bool
}

func (d downSettings) Setting(ctx context.Context, name string) (string, error) {
	if d.down.Load() {
		return "", fmt.Errorf("read: %w", syscall.ECONNREFUSED)
	}
	return d.Settings.Setting(ctx, name)
}

// GET /v1/ready answers 200 while the node reaches its store and 503 with
// the failed check while it cannot; /v1/health, which says the process is
// alive, stays 200.
func TestReady(t *testing.T) {
	down := &atomic.Bool{}
	f := assenttest.Start(t, func(c *server.Config) { c.Store = downStore{c.Store, down} })
	ready := func() (int, map[string]any) {
		t.Helper()
		resp := f.Req("GET", "/v1/ready", "", nil, nil)
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	if code, m := ready(); code != 200 || m["status"] != "ready" || m["store"] != "ok" || m["leases"] != "ok" {
		t.Fatalf("ready = %d %v", code, m)
	}
	down.Store(true)
	if code, m := ready(); code != 503 || m["status"] != "not_ready" || m["store"] != "unreachable" || assenttest.ErrCode(m) != "unavailable" {
		t.Fatalf("ready with the store down = %d %v", code, m)
	}
	if resp := f.Req("GET", "/v1/health", "", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("health with the store down = %d", resp.StatusCode)
	}
	down.Store(false)
	if code, m := ready(); code != 200 {
		t.Fatalf("ready with the store back = %d %v", code, m)
	}
}

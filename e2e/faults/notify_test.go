package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
)

// Proposals staged before a kill -9, whose webhooks had not been
// delivered yet, are all delivered after the restart: the outbox and its
// retries are stored, not held in memory. The receiver drops duplicates
// by webhook-id, as a receiver of an at-least-once delivery must.
func TestKillBeforeDeliveryLosesNoMessage(t *testing.T) {
	exe := buildAssent(t)
	dir := t.TempDir()
	secret := notify.NewSecret()
	key, err := notify.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	var (
		accept atomic.Bool // false: answer 503, so nothing is delivered yet
		mu     sync.Mutex
		seen   = map[string]bool{} // webhook-ids delivered
		items  = map[string]bool{} // proposal ids announced
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if !accept.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		if _, err := notify.Verify(key, r.Header, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var m struct {
			Data struct {
				ItemID string `json:"item_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		if id := r.Header.Get("webhook-id"); !seen[id] {
			seen[id] = true
			items[m.Data.ItemID] = true
		}
		mu.Unlock()
	}))
	defer rcv.Close()
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, exe, dir)
	if out, err := exec.Command(exe, "webhook", "add", "--data", dir, "--url", rcv.URL, "--secret-file", file).CombinedOutput(); err != nil {
		t.Fatalf("webhook add: %v\n%s", err, out)
	}
	const n = 10
	var staged []string
	for i := range n {
		code, v, err := s.call("POST", "/v1/runs", s.token, nil, map[string]any{"template": fmt.Sprintf("echo kill %d", i)})
		id, _ := v["proposal"].(string)
		if err != nil || code != http.StatusAccepted || id == "" {
			t.Fatalf("propose %d: %d %v %v", i, code, v, err)
		}
		staged = append(staged, id)
	}
	s.kill()
	mu.Lock()
	before := len(items)
	mu.Unlock()

	accept.Store(true)
	serve(t, exe, dir)
	testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range staged {
			if !items[id] {
				c.Errorf("proposal %s not announced; %d of %d were", id, len(items), n)
				return
			}
		}
	}, "every staged proposal announced after the restart")
	if before != 0 {
		t.Errorf("%d messages were delivered before the kill; the receiver refused all of them", before)
	}
}

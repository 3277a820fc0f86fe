package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
)

// relativeServer starts a demo server on the relative data directory
// "assent-data" of the current directory and returns its URL; stop shuts
// it down.
func relativeServer(t *testing.T) (base string, db *sqlite.DB, stop func()) {
	t.Helper()
	ctx := context.Background()
	if err := os.MkdirAll("assent-data", 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, filepath.Join("assent-data", "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = "http://" + ln.Addr().String()
	srv, _, err := demo.NewServer(ctx, server.Config{DataDir: "assent-data", Store: db, BaseURL: base, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		hs.CloseClientConnections()
		srv.Close()
		hs.Close()
		db.Close()
	}
	t.Cleanup(stop)
	return base, db, stop
}

// relCall sends a JSON request with token and decodes the JSON answer.
func relCall(t *testing.T, method, url, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &v)
	if v == nil {
		v = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, v
}

// waitTrace waits until Run id's Trace shows an event of kind.
func waitTrace(t *testing.T, base, token, id, kind string) {
	t.Helper()
	testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
		_, last := relCall(t, "GET", base+"/v1/runs/"+id+"/views/trace?lines=200", token, nil)
		b, _ := json.Marshal(last)
		if !strings.Contains(string(b), `"kind":"`+kind+`"`) {
			_, st := relCall(t, "GET", base+"/v1/runs/"+id, token, nil)
			c.Errorf("trace %v; status %v", last, st)
		}
	}, fmt.Sprintf("%s in the Trace of %s", kind, id))
}

// From a relative data directory the demo player Recipe, written with the
// running binary's absolute path, starts, is paused and resumed, and starts
// again after a restart of the server.
func TestDemoPlayerFromRelativeDataDir(t *testing.T) {
	t.Chdir(t.TempDir())
	base, db, stop := relativeServer(t)
	boot, err := auth.EnsureBootstrap(context.Background(), db, time.Now())
	if err != nil || boot.AgentToken == "" {
		t.Fatalf("bootstrap: %v (first=%v)", err, boot.First)
	}
	token := boot.AgentToken

	var recipe struct {
		Template string `json:"template"`
	}
	b, err := os.ReadFile(filepath.Join("assent-data", "recipes", "demo-player.json"))
	if err != nil || json.Unmarshal(b, &recipe) != nil {
		t.Fatalf("demo-player recipe: %v %s", err, b)
	}
	exe := strings.Trim(strings.Fields(strings.TrimPrefix(recipe.Template, "exec "))[0], "'")
	if fi, err := os.Stat(exe); !filepath.IsAbs(exe) || err != nil || fi.IsDir() {
		t.Fatalf("demo-player runs %q (%v); want an absolute path to an existing binary", exe, err)
	}

	play := func(t *testing.T) {
		code, v := relCall(t, "POST", base+"/v1/runs", token, map[string]any{"recipe": "demo-player", "values": map[string]any{"interval": 0.05}})
		if code != http.StatusOK && code != http.StatusCreated || v["status"] != "running" {
			t.Fatalf("spawn demo-player: %d %v", code, v)
		}
		id, _ := v["run"].(string)
		waitTrace(t, base, token, id, "player.started")
		for _, step := range []struct{ action, kind string }{{"pause", "player.paused"}, {"resume", "player.resumed"}} {
			code, v := relCall(t, "POST", base+"/v1/runs/"+id+"/controls", token, map[string]any{"action": step.action})
			if code >= 300 {
				t.Fatalf("%s: %d %v", step.action, code, v)
			}
			waitTrace(t, base, token, id, step.kind)
		}
		if code, v := relCall(t, "POST", base+"/v1/runs/"+id+"/kill", token, nil); code >= 300 || v["killed"] != true {
			t.Fatalf("kill: %d %v", code, v)
		}
	}
	play(t)
	stop()

	// A restart rewrites the Recipe for the binary running now; the
	// player starts again.
	base, _, _ = relativeServer(t)
	play(t)
}

package service

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/assent-run/assent/run"
)

func TestFromEnvRefusesWithoutGeneration(t *testing.T) {
	for _, k := range []string{"ASSENT_URL", "ASSENT_RUN_TOKEN", "ASSENT_RUN_ID", "ASSENT_RUN_INSTANCE_ID", "ASSENT_CONTROL_FIFO"} {
		t.Setenv(k, "x")
	}
	t.Setenv("ASSENT_RUN_INSTANCE_ID", "")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "ASSENT_RUN_INSTANCE_ID") {
		t.Fatalf("FromEnv: %v", err)
	}
}

// fakeAssent answers the service API: it knows one claimable Control id
// and records what the service did.
type fakeAssent struct {
	mu        sync.Mutex
	claimable string
	calls     []string
	events    []string
	done      chan struct{}
}

func (f *fakeAssent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	if r.Header.Get("Authorization") != "Bearer tok" || body["run_instance_id"] != nil && body["run_instance_id"] != "gen-1" {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/v1/runs/r1")
	f.calls = append(f.calls, path)
	switch {
	case path == "/controls/claim":
		if body["id"] != f.claimable {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "not_found", "message": "no claimable Control"}})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id": f.claimable, "action": "pause", "status": "claimed"})
	case path == "/trace":
		f.events = append(f.events, body["kind"].(string))
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{})
	case strings.HasSuffix(path, "/failed"):
		json.NewEncoder(w).Encode(map[string]any{"status": "failed"})
		close(f.done)
	default:
		json.NewEncoder(w).Encode(map[string]any{"status": "handled"})
	}
}

func TestServeClaimsByIDAndNeverRunsStaleControls(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "control.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := &fakeAssent{claimable: "good", done: make(chan struct{})}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	svc := &Service{URL: hs.URL, Token: "tok", RunID: "r1", InstanceID: "gen-1", FIFO: fifo, HTTP: hs.Client()}
	ctx, cancel := context.WithCancel(context.Background())
	var handled []string
	served := make(chan error, 1)
	go func() {
		served <- svc.Serve(ctx, func(ctx context.Context, c Control) error {
			handled = append(handled, c.ID)
			return errors.New("device busy")
		})
	}()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A record of another generation (not claimable), then a good one.
	w.Write(run.WireRecord("stale", "pause", nil))
	w.Write(run.WireRecord("good", "pause", json.RawMessage(`{"a":1}`)))
	w.Close()
	select {
	case <-fake.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the good Control was not settled")
	}
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v", err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(handled) != 1 || handled[0] != "good" {
		t.Fatalf("handled %v", handled)
	}
	if len(fake.events) != 1 || fake.events[0] != "service.control_rejected" {
		t.Fatalf("events %v", fake.events)
	}
	if want := "/controls/claim,/trace,/controls/claim,/controls/good/failed"; strings.Join(fake.calls, ",") != want {
		t.Fatalf("calls %v, want %s", fake.calls, want)
	}
}

// A nil context is refused with invalid_request, never a panic.
func TestNilContextRefused(t *testing.T) {
	svc := &Service{URL: "http://127.0.0.1:1", RunID: "r", InstanceID: "i", FIFO: filepath.Join(t.TempDir(), "f"), HTTP: http.DefaultClient}
	var ctx context.Context // nil
	calls := map[string]func() error{
		"Claim":   func() error { _, err := svc.Claim(ctx, "c"); return err },
		"Handled": func() error { return svc.Handled(ctx, "c") },
		"Failed":  func() error { return svc.Failed(ctx, "c", "x") },
		"Emit":    func() error { return svc.Emit(ctx, Event{Kind: "a"}) },
		"Serve":   func() error { return svc.Serve(ctx, func(context.Context, Control) error { return nil }) },
	}
	for name, call := range calls {
		var e *Error
		if err := call(); !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Errorf("%s(nil ctx) = %v, want code invalid_request", name, err)
		}
	}
}

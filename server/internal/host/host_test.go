package host

import (
	"path/filepath"
	"testing"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

// sharedStore is a store that says other nodes share it.
type sharedStore struct{ store.Store }

func (sharedStore) Shared() bool { return true }

// TestBusSharedWithTheStore: the event bus runs on the store's event log
// exactly when the store says nodes share it, whatever its backend.
func TestBusSharedWithTheStore(t *testing.T) {
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tests := []struct {
		name string
		st   store.Store
		want bool
	}{
		{"one node", db, false},
		{"shared", sharedStore{db}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHost(t.Context(), Config{DataDir: t.TempDir(), Store: tt.st})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if h.SharedBus != tt.want {
				t.Fatalf("SharedBus = %v, want %v", h.SharedBus, tt.want)
			}
		})
	}
}

package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/store/storetest"
)

// TestConformance holds the SQLite store to the contracts every backend
// keeps.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
		})
		return db
	})
}

package postgres_test

import (
	"testing"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/postgres/pgtest"
	"github.com/assent-run/assent/store/storetest"
)

// open opens a store on a fresh schema of the test database, closed and
// dropped when t ends.
func open(t *testing.T) *postgres.DB {
	t.Helper()
	u, _ := pgtest.URL(t)
	db, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return db
}

// TestConformance holds the PostgreSQL store to the contracts every backend
// keeps: the suite the SQLite store passes.
func TestConformance(t *testing.T) {
	pgtest.BaseURL(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

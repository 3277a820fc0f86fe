package sqlite

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// TestCreateAskAnnounceInOneTransaction makes the announce insert fail
// after the question's insert succeeded: the question must not be
// stored either.
func TestCreateAskAnnounceInOneTransaction(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.db.ExecContext(t.Context(), `INSERT INTO ask_announce (ask_id, queued_at) VALUES ('ask_taken', 1)`); err != nil {
		t.Fatal(err)
	}
	a := store.Ask{ID: "ask_taken", Asker: "p_agent", Question: "Go on?", Kind: store.AskYesNo,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), State: store.AskOpen}
	if err := db.CreateAsk(t.Context(), a, 0); err == nil {
		t.Fatal("CreateAsk succeeded although its announce row could not be written")
	}
	if _, err := db.Ask(t.Context(), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the question was stored without its announce row: %v", err)
	}
}

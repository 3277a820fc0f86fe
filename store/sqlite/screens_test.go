package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// TestScreenDocumentsMoveOut opens a database whose screens keep their
// documents in their rows (screens migration 1) and finds each document
// again after they move to a table of their own.
func TestScreenDocumentsMoveOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "assent.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE schema_migrations (component TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component, version))`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(screenMigrations[0].sql); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO schema_migrations VALUES ('screens', 1)`); err != nil {
		t.Fatal(err)
	}
	doc := "# omni-ir 0.8\nText(\"hello\")\n"
	if _, err := raw.Exec(`INSERT INTO screens (id, owner_id, document, version, state, last_seq, created_at, updated_at) VALUES ('scr_a', 'p1', ?, 2, '{}', 0, 1, 1)`, doc); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Screens().Screen(context.Background(), "scr_a")
	if err != nil || got.Document != doc || got.Version != 2 {
		t.Fatalf("after the move: %+v, %v; want document %q at version 2", got, err, doc)
	}
	if err := db.Screens().DeleteScreen(context.Background(), "scr_a"); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.SQL().QueryRow(`SELECT count(*) FROM screen_documents`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("documents left after the screen was deleted: %d (%v)", left, err)
	}
}

// BenchmarkSaveScreenState measures a save of a screen's state (a person's
// entry) beside documents of growing size, which it leaves as they are.
func BenchmarkSaveScreenState(b *testing.B) {
	for _, size := range []int{1 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("document=%dKiB", size>>10), func(b *testing.B) {
			db := openTest(b)
			ctx := context.Background()
			now := time.Now()
			sc := store.Screen{ID: "scr_a", OwnerID: "p1", Document: strings.Repeat("x", size), Version: 1,
				State: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
			if _, err := db.Screens().CreateScreen(ctx, sc); err != nil {
				b.Fatal(err)
			}
			sc.SameDocument = true
			for i := 0; b.Loop(); i++ {
				prev := sc.Version
				sc.Version++
				sc.State = fmt.Appendf(nil, `{"values":{"$note":"%d"}}`, i)
				if err := db.Screens().UpdateScreen(ctx, sc, prev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

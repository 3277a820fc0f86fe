package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// TestCheckpointerCopiesTheLog writes with no checkpoint in any commit and
// finds the rows in the database file itself once the checkpointer has run.
func TestCheckpointerCopiesTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "assent.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	detail := strings.Repeat("x", 512)
	for i := range 400 {
		rec := store.AuditRecord{Time: time.Now(), PrincipalID: "p", Source: "agent", Action: "stage", OK: true, FormID: "f", Detail: detail}
		if _, err := db.AppendAudit(context.Background(), rec); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return size() > before },
		fmt.Sprintf("the log checkpointed (the database file stayed at %d bytes)", before))
}

// TestCheckpointerStops checks Close ends the checkpointer and that a
// second stop is harmless.
func TestCheckpointerStops(t *testing.T) {
	db := openTest(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-db.ckpt.done:
	default:
		t.Fatal("the checkpointer still runs after Close")
	}
	db.ckpt.stop()
}

// TestAuditKeepsItsNumbersAcrossTheRebuild opens a database whose audit
// log predates migration core 3 and checks every record keeps its number
// and the next one follows the highest.
func TestAuditKeepsItsNumbersAcrossTheRebuild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "assent.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE schema_migrations (component TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component, version))`); err != nil {
		t.Fatal(err)
	}
	for _, m := range coreMigrations[:2] {
		if _, err := raw.Exec(m.sql); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`INSERT INTO schema_migrations VALUES ('core', ?)`, m.version); err != nil {
			t.Fatal(err)
		}
	}
	// Numbers with a gap, as a deleted row would leave.
	for _, seq := range []int{1, 2, 7} {
		if _, err := raw.Exec(`INSERT INTO audit (seq, ts, principal_id, source, action, ok, form_id) VALUES (?, 0, 'p', 'agent', 'stage', 1, 'f')`, seq); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ddl string
	if err := db.SQL().QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'audit'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToUpper(ddl), "AUTOINCREMENT") {
		t.Fatalf("audit still numbers with AUTOINCREMENT: %s", ddl)
	}
	recs, err := db.ListAudit(context.Background(), store.AuditFilter{FormID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range recs {
		got = append(got, r.Seq)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 7 {
		t.Fatalf("records after the rebuild = %v, want [1 2 7]", got)
	}
	seq, err := db.AppendAudit(context.Background(), store.AuditRecord{Time: time.Now(), PrincipalID: "p", Source: "agent", Action: "stage", OK: true})
	if err != nil {
		t.Fatal(err)
	}
	if seq != 8 {
		t.Fatalf("next record numbered %d, want 8", seq)
	}
}

// TestCloseLeavesOthersAlone closes one handle on a database another
// handle (another process, such as the server beside a CLI command) is
// reading: Close must neither wait for that reader nor hold the write
// lock while it does, and the file is left whole for both.
func TestCloseLeavesOthersAlone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "assent.db")
	server, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	rec := store.AuditRecord{Time: time.Now(), PrincipalID: "p", Source: "agent", Action: "stage", OK: true, FormID: "f"}
	if _, err := server.AppendAudit(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// A reader holding its snapshot, as a long listing does.
	reader, err := server.SQL().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback()
	var n int
	if err := reader.QueryRow(`SELECT count(*) FROM audit`).Scan(&n); err != nil {
		t.Fatal(err)
	}

	cli, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AppendAudit(ctx, rec); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- cli.Close() }()
	// The busy timeout is 10 s; a Close that waits for the reader takes
	// that long and keeps the server's writers out meanwhile.
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for another handle's reader")
	}
	if _, err := server.AppendAudit(ctx, rec); err != nil {
		t.Fatalf("the server's write after the other handle closed: %v", err)
	}
	reader.Rollback()
	recs, err := server.ListAudit(ctx, store.AuditFilter{FormID: "f"})
	if err != nil || len(recs) != 3 {
		t.Fatalf("the log holds %d records (%v), want 3", len(recs), err)
	}
	// The last handle to close copies the log into the file and removes
	// it, so a stopped server leaves one file behind.
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("after the last Close the log holds %d bytes", fi.Size())
	}
}

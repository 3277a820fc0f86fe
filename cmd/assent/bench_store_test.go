package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStoreRows runs every store row once, briefly, on SQLite and, when
// ASSENT_TEST_POSTGRES names a database, on PostgreSQL beside it: one row
// per case and backend, in that order, each with figures, and the targets
// on the PostgreSQL rows that have one.
func TestStoreRows(t *testing.T) {
	if testing.Short() {
		t.Skip("writes to the stores")
	}
	o := benchOpts{calls: 70, rounds: 1, rate: 20, duration: 200 * time.Millisecond, batchTimeout: time.Minute}
	backends, done, err := benchStores(context.Background(), t.TempDir(), os.Getenv("ASSENT_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	rows, err := storeRows(context.Background(), o, io.Discard, backends)
	if err != nil {
		t.Fatal(err)
	}
	cases := storeCases(o)
	want := len(cases) * len(backends)
	if len(backends) > 1 {
		want++ // the cross-node event row
	}
	if len(rows) != want {
		t.Fatalf("%d rows, want %d: %+v", len(rows), want, rows)
	}
	for i, c := range cases {
		for k, b := range backends {
			r := rows[i*len(backends)+k]
			if r.Name != c.name+", "+b.name {
				t.Errorf("row %q, want %q", r.Name, c.name+", "+b.name)
			}
			if r.PerSec <= 0 || r.N == 0 || r.P50ms <= 0 {
				t.Errorf("%s: per_s %v, n %d, p50 %v; want all positive", r.Name, r.PerSec, r.N, r.P50ms)
			}
			if want := b.name == "postgres" && c.target > 0; want != (r.TargetPerSec > 0) {
				t.Errorf("%s: target_per_s %v", r.Name, r.TargetPerSec)
			}
		}
	}
	if len(backends) > 1 {
		r := rows[len(rows)-1]
		if !strings.HasPrefix(r.Name, "event fan-out across nodes") || r.N == 0 || r.TargetP99ms != targetCrossNodeP99ms {
			t.Errorf("cross-node row %+v", r)
		}
	}
}

// TestStoreRowsOnly keeps the rows --only names and no others.
func TestStoreRowsOnly(t *testing.T) {
	o := benchOpts{calls: 20, rounds: 1, batchTimeout: time.Minute, only: "trace append, 1 appender"}
	backends, done, err := benchStores(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	rows, err := storeRows(context.Background(), o, io.Discard, backends)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Name != "store trace append, 1 appender, sqlite" {
		t.Fatalf("rows %+v, want only the SQLite 1-appender trace row", rows)
	}
}

func TestBenchSchemaRefusesAnotherURL(t *testing.T) {
	if _, _, err := benchSchema(context.Background(), "mysql://u@h/db"); err == nil || !strings.Contains(err.Error(), "store_url_invalid") {
		t.Fatalf("benchSchema on a MySQL URL = %v, want store_url_invalid", err)
	}
}

// TestPostgresServerRows runs the server rows on PostgreSQL once, briefly:
// the durable rows against the floor on the same database, and the mixed
// load on one node and on two.
func TestPostgresServerRows(t *testing.T) {
	url := os.Getenv("ASSENT_TEST_POSTGRES")
	if url == "" || testing.Short() {
		t.Skip("ASSENT_TEST_POSTGRES names no PostgreSQL database")
	}
	o := benchOpts{calls: 5, rounds: 1, batchTimeout: time.Minute}
	rows, err := postgresServerRows(context.Background(), o, io.Discard, t.TempDir(), url)
	if err != nil {
		t.Fatal(err)
	}
	want := len(durableCases("")) + 2
	if len(rows) != want {
		t.Fatalf("%d rows, want %d: %+v", len(rows), want, rows)
	}
	for _, r := range rows {
		if !strings.Contains(r.Name, ", postgres") || r.Ratio <= 0 || r.PerSec <= 0 || r.FloorPerSec <= 0 {
			t.Errorf("row %+v; want a PostgreSQL row with a ratio", r)
		}
	}
	if last := rows[len(rows)-1]; !strings.HasSuffix(last.Name, ", postgres, 2 nodes") {
		t.Errorf("last row %q, want the two-node row", last.Name)
	}
}

func TestFailedNote(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	tests := []struct {
		err  string
		want string
	}{
		{"RECOVERY_REQUIRED", "failed: RECOVERY_REQUIRED"},
		{long, "failed: " + strings.Repeat("é", 150) + "…"},
	}
	for _, tc := range tests {
		if got := failedNote(errors.New(tc.err)); got != tc.want {
			t.Errorf("failedNote(%.20q…) = %.40q…, want %.40q…", tc.err, got, tc.want)
		}
	}
}

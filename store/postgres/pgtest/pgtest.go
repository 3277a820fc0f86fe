// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema in the database named by the ASSENT_TEST_POSTGRES environment
// variable, dropped when the test ends, so runs of the same tests never see
// each other's data.
//
// Without ASSENT_TEST_POSTGRES a test that asks for a schema is skipped with
// a message, unless ASSENT_REQUIRE_POSTGRES=1 is set (as CI does), in which
// case it fails.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables read by URL.
const (
	// EnvURL names the PostgreSQL database tests use, as a URL:
	// postgres://USER:PASSWORD@HOST:PORT/DATABASE. The user needs the
	// right to create schemas in it.
	EnvURL = "ASSENT_TEST_POSTGRES"
	// EnvRequire, set to 1, makes a missing EnvURL a failure rather than
	// a skip.
	EnvRequire = "ASSENT_REQUIRE_POSTGRES"
)

// BaseURL returns the URL of EnvURL, skipping t without it (failing it
// when EnvRequire is 1).
func BaseURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but %s is not set: set it to postgres://USER:PASSWORD@HOST:PORT/DATABASE (.ci/run does)", EnvRequire, EnvURL)
		}
		t.Skipf("PostgreSQL tests skipped: set %s=postgres://USER:PASSWORD@HOST:PORT/DATABASE to run them", EnvURL)
	}
	return base
}

// URL creates a new, empty schema in the database of EnvURL and returns a
// URL whose connections use it (search_path), and the schema's name. The
// schema and everything in it is dropped when t ends. Connections opened on
// the URL must be closed before then (register their cleanup after calling
// URL, so that it runs first).
func URL(t testing.TB) (string, string) {
	t.Helper()
	base := BaseURL(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "assent_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, base, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, base, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

func exec(ctx context.Context, base, sql string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

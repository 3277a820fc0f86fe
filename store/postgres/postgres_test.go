package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// TestOpenErrors checks that a store that cannot be opened says why, with a
// stable code, and never shows the password.
func TestOpenErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	tests := []struct {
		name string
		url  string
		code string
	}{
		{"not PostgreSQL", "mysql://u:" + secret + "@127.0.0.1/db", postgres.CodeURLInvalid},
		{"bad port", "postgres://u:" + secret + "@127.0.0.1:notaport/db", postgres.CodeURLInvalid},
		{"bad parameter", "postgres://u:" + secret + "@127.0.0.1/db?sslmode=sometimes", postgres.CodeURLInvalid},
		{"nothing listening", "postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=5", postgres.CodeUnreachable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := postgres.Open(t.Context(), tc.url)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			checkOpenError(t, err, tc.code, secret)
		})
	}
}

// TestOpenRefused checks the errors of a server that answers but refuses:
// a wrong password and a database that does not exist.
func TestOpenRefused(t *testing.T) {
	base, err := url.Parse(pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "not-the-password"
	wrongPW := *base
	wrongPW.User = url.UserPassword(base.User.Username(), secret)
	noDB := *base
	noDB.Path = "/assent_no_such_database"
	// The right password is not shown either (unless it is also the
	// user's name, which the message names).
	pw, _ := base.User.Password()
	if pw == base.User.Username() {
		pw = ""
	}
	tests := []struct {
		name, url, code, secret string
	}{
		{"wrong password", wrongPW.String(), postgres.CodeAuthFailed, secret},
		{"no such database", noDB.String(), postgres.CodeDatabaseMissing, pw},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := postgres.Open(t.Context(), tc.url)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			checkOpenError(t, err, tc.code, tc.secret)
		})
	}
}

func checkOpenError(t *testing.T, err error, code, secret string) {
	t.Helper()
	var oe *postgres.OpenError
	if !errors.As(err, &oe) || oe.Code != code {
		t.Fatalf("Open = %v, want an *OpenError with code %s", err, code)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, code+": ") {
		t.Errorf("message %q does not start with its code", msg)
	}
	if secret != "" && strings.Contains(msg, secret) {
		t.Errorf("message %q shows the password", msg)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db", "postgres://h/db"},
		{"postgres://u:p%40w@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:pw@h:port/db", "postgres://u:xxxxx@h:port/db"},
	}
	for _, tc := range tests {
		if got := postgres.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// countSteps returns the rows of schema_migrations in the test schema.
func countSteps(t *testing.T, db *postgres.DB) int {
	t.Helper()
	var n int
	if err := db.Pool().QueryRow(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMigrateConcurrently opens one empty schema from several pools at once,
// as nodes starting together do: every open succeeds and each step is
// applied once; a later open applies nothing.
func TestMigrateConcurrently(t *testing.T) {
	u, _ := pgtest.URL(t)
	const nodes = 4
	dbs := make([]*postgres.DB, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { dbs[i], errs[i] = postgres.Open(t.Context(), u) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(func() { dbs[i].Close() })
	}
	// core 2, runs 7, flows 3, proposals 1, controls 2, screens 1,
	// cluster 1, oauth 1, notify 1, rules 1, asks 4, groups 1,
	// deadlines 2.
	const steps = 27
	if n := countSteps(t, dbs[0]); n != steps {
		t.Errorf("schema_migrations holds %d steps, want %d", n, steps)
	}
	if err := dbs[0].Settings().SetSetting(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	again, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if v, err := again.Settings().Setting(t.Context(), "k"); err != nil || v != "v" {
		t.Errorf("after reopening, Setting = %q, %v; want the value kept", v, err)
	}
	if n := countSteps(t, again); n != steps {
		t.Errorf("reopening changed schema_migrations to %d steps", n)
	}
}

// nodes opens n stores on one fresh schema: n nodes sharing a database.
func nodes(t *testing.T, n int) []*postgres.DB {
	t.Helper()
	u, _ := pgtest.URL(t)
	out := make([]*postgres.DB, n)
	for i := range out {
		db, err := postgres.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		out[i] = db
	}
	return out
}

// TestAdmissionAcrossNodes races more admitters than the pending bound,
// spread over three pools on one database: exactly the bound is admitted
// and the rest refused with control_backpressure.
func TestAdmissionAcrossNodes(t *testing.T) {
	dbs := nodes(t, 3)
	run := store.RunRecord{ID: "r", OwnerID: "p", InstanceID: "r-1", Generation: 1, CreatedAt: time.Now(), StartedAt: time.Now()}
	if err := dbs[0].Runs().ClaimRun(t.Context(), run, ""); err != nil {
		t.Fatal(err)
	}
	const admitters = store.ControlPendingLimit + 12
	errs := make([]error, admitters)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range admitters {
		wg.Go(func() {
			<-start
			q := time.Now()
			_, errs[i] = dbs[i%len(dbs)].Runs().AdmitControl(t.Context(), run.ID,
				store.Control{ID: fmt.Sprint("c", i), InstanceID: run.InstanceID, Action: "pause", QueuedAt: &q})
		})
	}
	close(start)
	wg.Wait()
	admitted, refused := 0, 0
	for _, err := range errs {
		var ce *store.ControlError
		switch {
		case err == nil:
			admitted++
		case errors.As(err, &ce) && ce.Reason == "control_backpressure":
			refused++
		default:
			t.Errorf("admission: %v", err)
		}
	}
	if admitted != store.ControlPendingLimit || refused != admitters-store.ControlPendingLimit {
		t.Errorf("%d admitted and %d refused; want %d and %d", admitted, refused, store.ControlPendingLimit, admitters-store.ControlPendingLimit)
	}
	cs, err := dbs[1].Runs().Controls(t.Context(), run.ID)
	if err != nil || len(cs) != store.ControlPendingLimit {
		t.Errorf("journal holds %d records, %v; want %d", len(cs), err, store.ControlPendingLimit)
	}
}

// TestFlowApplyAcrossNodes races applies of one revision from two pools:
// exactly one commits the next revision, the others see a conflict.
func TestFlowApplyAcrossNodes(t *testing.T) {
	dbs := nodes(t, 2)
	base := flow.Instance{ID: "i", Program: "sha256:ab", Phase: "draft", Revision: 1}
	if err := dbs[0].Flows().Update(t.Context(), func(tx flow.Tx) error { return tx.CreateInstance(base) }); err != nil {
		t.Fatal(err)
	}
	const appliers = 8
	errs := make([]error, appliers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range appliers {
		wg.Go(func() {
			<-start
			errs[i] = dbs[i%len(dbs)].Flows().Update(t.Context(), func(tx flow.Tx) error {
				cur, err := tx.Instance("i")
				if err != nil {
					return err
				}
				if cur.Revision != base.Revision {
					return flow.ErrConflict
				}
				next := cur
				next.Revision, next.Phase = cur.Revision+1, fmt.Sprint("by-", i)
				if err := tx.UpdateInstance(next, cur.Revision, ""); err != nil {
					return err
				}
				return tx.AppendJournal(flow.JournalEntry{Instance: "i", Prescription: fmt.Sprint("prx-", i), Revision: cur.Revision, Status: flow.JournalCommitted})
			})
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, flow.ErrConflict):
			t.Errorf("applier %d: %v", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d applies committed, want exactly 1", ok)
	}
	err := dbs[1].Flows().View(t.Context(), func(tx flow.Tx) error {
		j, err := tx.Journal("i")
		if err != nil || len(j) != 1 {
			t.Errorf("journal = %+v, %v; want one entry", j, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSchemaDropped checks that pgtest leaves nothing behind: the schema a
// test used is gone once it ends.
func TestSchemaDropped(t *testing.T) {
	base := pgtest.BaseURL(t)
	var schema string
	t.Run("use", func(t *testing.T) { _, schema = pgtest.URL(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %s survived its test", schema)
	}
}

// TestFlowUpdateRetries makes one Flow Update fail to serialize: it read
// an instance that another node then changed before it wrote. Its function
// turns the database's error into one of its own, as a caller may; the
// Update still runs it again, and the second run sees the other node's
// revision.
func TestFlowUpdateRetries(t *testing.T) {
	dbs := nodes(t, 2)
	ctx := t.Context()
	if err := dbs[0].Flows().Update(ctx, func(tx flow.Tx) error {
		return tx.CreateInstance(flow.Instance{ID: "i", Program: "sha256:ab", Phase: "draft", Revision: 1})
	}); err != nil {
		t.Fatal(err)
	}
	bump := func(tx flow.Tx, phase string) error {
		cur, err := tx.Instance("i")
		if err != nil {
			return err
		}
		next := cur
		next.Revision, next.Phase = cur.Revision+1, phase
		return tx.UpdateInstance(next, cur.Revision, "")
	}
	read, committed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	other := make(chan error, 1)
	go func() {
		<-read
		other <- dbs[0].Flows().Update(ctx, func(tx flow.Tx) error { return bump(tx, "other") })
		close(committed)
	}()
	attempts := 0
	err := dbs[1].Flows().Update(ctx, func(tx flow.Tx) error {
		attempts++
		cur, err := tx.Instance("i")
		if err != nil {
			return err
		}
		if attempts == 1 {
			once.Do(func() { close(read) })
			<-committed
		}
		next := cur
		next.Revision, next.Phase = cur.Revision+1, "mine"
		if err := tx.UpdateInstance(next, cur.Revision, ""); err != nil {
			return fmt.Errorf("update refused: %v", err) // the cause's type is lost
		}
		return nil
	})
	if err := <-other; err != nil {
		t.Fatalf("the other node's Update: %v", err)
	}
	if err != nil || attempts != 2 {
		t.Fatalf("Update = %v after %d runs; want success on the second run", err, attempts)
	}
	_ = dbs[1].Flows().View(ctx, func(tx flow.Tx) error {
		got, err := tx.Instance("i")
		if err != nil || got.Revision != 3 || got.Phase != "mine" {
			t.Errorf("instance = %+v, %v; want revision 3 by the retried Update", got, err)
		}
		return nil
	})
}

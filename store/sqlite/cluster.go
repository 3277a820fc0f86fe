package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
)

// clusterMigrations holds Run leases and the event log. On SQLite one node
// owns the file, so both keep the semantics of several nodes for a single
// one: a lease has exactly one holder, and the event log numbers events
// across restarts.
var clusterMigrations = []migration{{1, `
CREATE TABLE run_leases (
	run_id TEXT PRIMARY KEY,
	node TEXT NOT NULL,
	acquired_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX run_leases_expiry ON run_leases(expires_at, run_id);
CREATE INDEX run_leases_node ON run_leases(node, run_id);
CREATE TABLE cluster_events (
	seq INTEGER PRIMARY KEY,
	at INTEGER NOT NULL,
	type TEXT NOT NULL,
	owner TEXT NOT NULL DEFAULT '',
	audience TEXT,
	people INTEGER NOT NULL DEFAULT 0,
	data TEXT
);
`}}

// EventLogKeep is how many of the newest events the event log keeps.
const EventLogKeep = 16384

// eventSignal wakes the followers of the event log of one DB when events
// are appended through it. Its zero value is ready to use.
type eventSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next append.
func (e *eventSignal) wait() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ch == nil {
		e.ch = make(chan struct{})
	}
	return e.ch
}

func (e *eventSignal) notify() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ch != nil {
		close(e.ch)
		e.ch = nil
	}
}

// Cluster returns s, which keeps Run leases and the event log.
func (s *DB) Cluster() store.Cluster { return s }

const leaseColumns = `run_id, node, acquired_at, expires_at`

func scanLease(row interface{ Scan(...any) error }) (store.Lease, error) {
	var l store.Lease
	var acquired, expires int64
	if err := row.Scan(&l.RunID, &l.Node, &acquired, &expires); err != nil {
		return store.Lease{}, err
	}
	l.AcquiredAt, l.ExpiresAt = fromMS(acquired), fromMS(expires)
	return l, nil
}

// currentLease reads runID's lease in tx; held is false when there is none.
func currentLease(ctx context.Context, tx *sql.Tx, runID string) (cur store.Lease, held bool, err error) {
	cur, err = scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM run_leases WHERE run_id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, false, nil
	}
	return cur, err == nil, err
}

// leaseTx runs fn in a write transaction and commits it when fn succeeds.
func (s *DB) leaseTx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// AcquireLease implements store.Cluster.
func (s *DB) AcquireLease(ctx context.Context, runID, node string, now time.Time, ttl time.Duration) (store.Lease, error) {
	if err := store.CheckLeaseRequest(runID, node, ttl); err != nil {
		return store.Lease{}, err
	}
	var out store.Lease
	err := s.leaseTx(ctx, "acquire lease", func(tx *sql.Tx) error {
		cur, held, err := currentLease(ctx, tx, runID)
		if err != nil {
			return fmt.Errorf("acquire lease: %w", err)
		}
		if out, err = store.DecideAcquire(cur, held, runID, node, now, ttl); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_leases (`+leaseColumns+`) VALUES (?, ?, ?, ?)
			ON CONFLICT (run_id) DO UPDATE SET node = excluded.node, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`,
			runID, node, ms(out.AcquiredAt), ms(out.ExpiresAt)); err != nil {
			return fmt.Errorf("acquire lease: %w", err)
		}
		return nil
	})
	return out, err
}

// RenewLease implements store.Cluster.
func (s *DB) RenewLease(ctx context.Context, runID, node string, now time.Time, ttl time.Duration) (store.Lease, error) {
	if err := store.CheckLeaseRequest(runID, node, ttl); err != nil {
		return store.Lease{}, err
	}
	var out store.Lease
	err := s.leaseTx(ctx, "renew lease", func(tx *sql.Tx) error {
		cur, held, err := currentLease(ctx, tx, runID)
		if err != nil {
			return fmt.Errorf("renew lease: %w", err)
		}
		if out, err = store.DecideRenew(cur, held, runID, node, now, ttl); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE run_leases SET expires_at = ? WHERE run_id = ?`, ms(out.ExpiresAt), runID); err != nil {
			return fmt.Errorf("renew lease: %w", err)
		}
		return nil
	})
	return out, err
}

// RenewLeases implements store.Cluster.
func (s *DB) RenewLeases(ctx context.Context, node string, now time.Time, ttl time.Duration) ([]store.Lease, error) {
	if err := store.CheckLeaseHolder(node, ttl); err != nil {
		return nil, err
	}
	var out []store.Lease
	err := s.leaseTx(ctx, "renew leases", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE run_leases SET expires_at = ? WHERE node = ?`, ms(now.Add(ttl)), node); err != nil {
			return fmt.Errorf("renew leases: %w", err)
		}
		var err error
		out, err = queryLeases(ctx, tx, `SELECT `+leaseColumns+` FROM run_leases WHERE node = ? ORDER BY run_id`, node)
		return err
	})
	return out, err
}

// ReleaseLease implements store.Cluster.
func (s *DB) ReleaseLease(ctx context.Context, runID, node string) error {
	return s.leaseTx(ctx, "release lease", func(tx *sql.Tx) error {
		cur, held, err := currentLease(ctx, tx, runID)
		if err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		if err := store.DecideRelease(cur, held, runID, node); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_leases WHERE run_id = ?`, runID); err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		return nil
	})
}

// RestartRun implements store.Cluster.
func (s *DB) RestartRun(ctx context.Context, rec store.RunRecord, lostInstance string) error {
	if lostInstance == "" {
		return fmt.Errorf("%w: restarting a Run needs the generation it replaces", store.ErrInvalid)
	}
	return s.leaseTx(ctx, "restart run", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET owner_id = ?, instance_id = ?, generation = ?, pid = ?, start_time = ?,
			exit_code = ?, stop = ?, started_at = ?, ended_at = ?, archived = ?, archive_dir = ?, doc = ?
			WHERE id = ? AND instance_id = ?`,
			rec.OwnerID, rec.InstanceID, rec.Generation, rec.PID, rec.StartTime, exitArg(rec.ExitCode), rec.Stop,
			ms(rec.StartedAt), endedArg(rec.EndedAt), boolInt(rec.Archived), rec.ArchiveDir, docText(rec.Doc), rec.ID, lostInstance)
		if err != nil {
			return fmt.Errorf("restart run: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = ?`, rec.ID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return fmt.Errorf("restart run: %w", err)
		}
		return fmt.Errorf("%w: Run %s is no longer at generation %s", store.ErrConflict, rec.ID, lostInstance)
	})
}

// Lease implements store.Cluster.
func (s *DB) Lease(ctx context.Context, runID string) (store.Lease, error) {
	l, err := scanLease(s.db.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM run_leases WHERE run_id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, store.ErrNotFound
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("lease: %w", err)
	}
	return l, nil
}

// ExpiredLeases implements store.Cluster.
func (s *DB) ExpiredLeases(ctx context.Context, now time.Time) ([]store.Lease, error) {
	return queryLeases(ctx, s.db, `SELECT `+leaseColumns+` FROM run_leases WHERE expires_at <= ? ORDER BY expires_at, run_id`, ms(now))
}

func queryLeases(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) ([]store.Lease, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	defer rows.Close()
	var out []store.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("leases: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	return out, nil
}

// EventLog implements store.Cluster: the events table of this file. A
// follower is woken by appends through this DB and, for appends by another
// process on the same file, checks every second.
func (s *DB) EventLog() event.Log { return eventLog{s} }

type eventLog struct{ s *DB }

// eventPoll is how often a follower looks for events appended by another
// process.
const eventPoll = time.Second

// Append implements event.Log.
func (l eventLog) Append(ctx context.Context, events []event.Event) (int64, error) {
	if len(events) == 0 {
		return l.last(ctx)
	}
	var last int64
	err := l.s.leaseTx(ctx, "append events", func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM cluster_events`).Scan(&last); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO cluster_events (seq, at, type, owner, audience, people, data) VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		defer stmt.Close()
		for _, e := range events {
			last++
			var audience, data any
			if e.Audience != nil {
				b, _ := json.Marshal(e.Audience)
				audience = string(b)
			}
			if e.Data != nil {
				data = string(e.Data)
			}
			if _, err := stmt.ExecContext(ctx, last, e.Time.UnixNano(), e.Type, e.Owner, audience, e.People, data); err != nil {
				return fmt.Errorf("append events: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM cluster_events WHERE seq <= ?`, last-EventLogKeep); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	l.s.events.notify()
	return last, nil
}

func (l eventLog) last(ctx context.Context) (int64, error) {
	var last int64
	if err := l.s.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM cluster_events`).Scan(&last); err != nil {
		return 0, fmt.Errorf("event log: %w", err)
	}
	return last, nil
}

const eventColumns = `seq, at, type, owner, audience, people, data`

func (l eventLog) query(ctx context.Context, query string, args ...any) ([]event.Event, error) {
	rows, err := l.s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	defer rows.Close()
	var out []event.Event
	for rows.Next() {
		var e event.Event
		var at int64
		var audience, data sql.NullString
		if err := rows.Scan(&e.Seq, &at, &e.Type, &e.Owner, &audience, &e.People, &data); err != nil {
			return nil, fmt.Errorf("event log: %w", err)
		}
		e.Time = time.Unix(0, at).UTC()
		if audience.Valid {
			if err := json.Unmarshal([]byte(audience.String), &e.Audience); err != nil {
				return nil, fmt.Errorf("event log: event %d: audience: %w", e.Seq, err)
			}
			if e.Audience == nil {
				e.Audience = []string{}
			}
		}
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	return out, nil
}

// Tail implements event.Log.
func (l eventLog) Tail(ctx context.Context, n int) ([]event.Event, error) {
	out, err := l.query(ctx, `SELECT `+eventColumns+` FROM cluster_events ORDER BY seq DESC LIMIT ?`, max(n, 0))
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}

// followBatch is the most events a follower reads at once.
const followBatch = 1000

// Follow implements event.Log.
func (l eventLog) Follow(ctx context.Context, after int64, deliver func([]event.Event)) error {
	t := time.NewTicker(eventPoll)
	defer t.Stop()
	for {
		// Take the wake-up channel first, so an append after the read
		// below is not missed.
		woken := l.s.events.wait()
		batch, err := l.query(ctx, `SELECT `+eventColumns+` FROM cluster_events WHERE seq > ? ORDER BY seq LIMIT ?`, after, followBatch)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if len(batch) > 0 {
			deliver(batch)
			after = batch[len(batch)-1].Seq
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-woken:
		case <-t.C:
		}
	}
}

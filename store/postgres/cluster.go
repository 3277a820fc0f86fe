package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
)

// clusterMigrations holds what several nodes coordinate through: Run
// leases, and the event log that numbers every node's events in one
// sequence.
//
// The event log draws its numbers from a one-row counter, not a sequence:
// an append updates the row, so appends hold its lock until they commit
// and commit in the order of their numbers. A reader that sees an event
// therefore sees every event before it, and the numbers have no gaps.
var clusterMigrations = []migration{{1, `
CREATE TABLE run_leases (
	run_id TEXT COLLATE "C" PRIMARY KEY,
	node TEXT NOT NULL,
	acquired_at TIMESTAMPTZ NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX run_leases_expiry ON run_leases(expires_at, run_id);
CREATE INDEX run_leases_node ON run_leases(node, run_id);
CREATE TABLE cluster_event_seq (
	one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
	seq BIGINT NOT NULL
);
INSERT INTO cluster_event_seq (seq) VALUES (0);
CREATE TABLE cluster_events (
	seq BIGINT PRIMARY KEY,
	at TIMESTAMPTZ NOT NULL,
	type TEXT NOT NULL,
	owner TEXT NOT NULL DEFAULT '',
	audience TEXT[],
	people BOOLEAN NOT NULL DEFAULT false,
	data TEXT
);
`}}

// EventLogKeep is how many of the newest events the event log keeps: an
// append removes the events that fall out of it.
const EventLogKeep = 16384

// Cluster returns s, which keeps Run leases and the event log.
func (s *DB) Cluster() store.Cluster { return s }

const leaseColumns = `run_id, node, acquired_at, expires_at`

func scanLease(row pgx.Row) (store.Lease, error) {
	var l store.Lease
	if err := row.Scan(&l.RunID, &l.Node, &l.AcquiredAt, &l.ExpiresAt); err != nil {
		return store.Lease{}, err
	}
	l.AcquiredAt, l.ExpiresAt = utc(l.AcquiredAt), utc(l.ExpiresAt)
	return l, nil
}

// lockLease locks runID's lease row in tx and returns it; held is false
// when there is none. A missing row cannot be locked, so it is inserted as
// ins when ins is not nil, and held and inserted are reported; when a
// concurrent transaction inserted it first, that row is locked and read
// instead.
func lockLease(ctx context.Context, tx pgx.Tx, runID string, ins *store.Lease) (cur store.Lease, held, inserted bool, err error) {
	for {
		cur, err = scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+` FROM run_leases WHERE run_id = $1 FOR UPDATE`, runID))
		if err == nil {
			return cur, true, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.Lease{}, false, false, err
		}
		if ins == nil {
			return store.Lease{}, false, false, nil
		}
		tag, err := tx.Exec(ctx, `INSERT INTO run_leases (`+leaseColumns+`) VALUES ($1, $2, $3, $4) ON CONFLICT (run_id) DO NOTHING`,
			runID, ins.Node, ins.AcquiredAt, ins.ExpiresAt)
		if err != nil {
			return store.Lease{}, false, false, err
		}
		if tag.RowsAffected() == 1 {
			return *ins, false, true, nil
		}
		// Another node inserted the row meanwhile: lock it and decide.
	}
}

// AcquireLease implements store.Cluster.
func (s *DB) AcquireLease(ctx context.Context, runID, node string, now time.Time, ttl time.Duration) (store.Lease, error) {
	fresh, err := store.DecideAcquire(store.Lease{}, false, runID, node, now, ttl)
	if err != nil {
		return store.Lease{}, err
	}
	var out store.Lease
	err = s.write(ctx, "acquire lease", func(tx pgx.Tx) error {
		cur, held, inserted, err := lockLease(ctx, tx, runID, &fresh)
		if err != nil {
			return fmt.Errorf("acquire lease: %w", err)
		}
		if inserted {
			out = fresh
			return nil
		}
		if out, err = store.DecideAcquire(cur, held, runID, node, now, ttl); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE run_leases SET node = $2, acquired_at = $3, expires_at = $4 WHERE run_id = $1`,
			runID, out.Node, out.AcquiredAt, out.ExpiresAt); err != nil {
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
	err := s.write(ctx, "renew lease", func(tx pgx.Tx) error {
		cur, held, _, err := lockLease(ctx, tx, runID, nil)
		if err != nil {
			return fmt.Errorf("renew lease: %w", err)
		}
		if out, err = store.DecideRenew(cur, held, runID, node, now, ttl); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE run_leases SET expires_at = $2 WHERE run_id = $1`, runID, out.ExpiresAt); err != nil {
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
	return s.queryLeases(ctx, `UPDATE run_leases SET expires_at = $2 WHERE node = $1 RETURNING `+leaseColumns, node, now.Add(ttl))
}

// ReleaseLease implements store.Cluster.
func (s *DB) ReleaseLease(ctx context.Context, runID, node string) error {
	return s.write(ctx, "release lease", func(tx pgx.Tx) error {
		cur, held, _, err := lockLease(ctx, tx, runID, nil)
		if err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		if err := store.DecideRelease(cur, held, runID, node); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM run_leases WHERE run_id = $1`, runID); err != nil {
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
	return s.write(ctx, "restart run", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE runs SET owner_id = $2, instance_id = $3, generation = $4, pid = $5, start_time = $6,
			exit_code = $7, stop = $8, started_at = $9, ended_at = $10, archived = $11, archive_dir = $12, doc = $13
			WHERE id = $1 AND instance_id = $14`,
			rec.ID, rec.OwnerID, rec.InstanceID, rec.Generation, rec.PID, rec.StartTime, rec.ExitCode, rec.Stop,
			rec.StartedAt, optTime(rec.EndedAt), rec.Archived, rec.ArchiveDir, docText(rec.Doc), lostInstance)
		if err != nil {
			return fmt.Errorf("restart run: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var one int
		if err := rowErr(tx.QueryRow(ctx, `SELECT 1 FROM runs WHERE id = $1`, rec.ID).Scan(&one), "restart run"); err != nil {
			return err
		}
		return fmt.Errorf("%w: Run %s is no longer at generation %s", store.ErrConflict, rec.ID, lostInstance)
	})
}

// Lease implements store.Cluster.
func (s *DB) Lease(ctx context.Context, runID string) (store.Lease, error) {
	l, err := scanLease(s.pool.QueryRow(ctx, `SELECT `+leaseColumns+` FROM run_leases WHERE run_id = $1`, runID))
	return l, rowErr(err, "lease")
}

// ExpiredLeases implements store.Cluster.
func (s *DB) ExpiredLeases(ctx context.Context, now time.Time) ([]store.Lease, error) {
	return s.queryLeases(ctx, `SELECT `+leaseColumns+` FROM run_leases WHERE expires_at <= $1 ORDER BY expires_at, run_id`, now)
}

func (s *DB) queryLeases(ctx context.Context, query string, args ...any) ([]store.Lease, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Lease, error) { return scanLease(r) })
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	// RETURNING gives no order.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// less orders leases as ExpiredLeases and RenewLeases return them: by
// expiry, then Run id.
func less(a, b store.Lease) bool {
	if !a.ExpiresAt.Equal(b.ExpiresAt) {
		return a.ExpiresAt.Before(b.ExpiresAt)
	}
	return a.RunID < b.RunID
}

// EventLog implements store.Cluster. Appends notify (pg_notify) a channel
// named after the log's table, so logs in different schemas of one
// database do not wake each other; each follower listens on a connection
// of its own, taken out of the pool, and reads the rows after the last one
// it delivered.
func (s *DB) EventLog() event.Log { return &eventLog{s: s} }

type eventLog struct {
	s       *DB
	mu      sync.Mutex
	channel string // found once, then kept
}

// Bounds of the event log's followers.
const (
	// followBatch is the most events a follower reads at once.
	followBatch = 1000
	// followPoll is how long a follower waits for a notification before
	// it looks for new rows anyway.
	followPoll = 5 * time.Second
)

// channelName returns the notification channel of the log.
func (l *eventLog) channelName(ctx context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.channel != "" {
		return l.channel, nil
	}
	var oid uint32
	if err := l.s.pool.QueryRow(ctx, `SELECT 'cluster_events'::regclass::oid`).Scan(&oid); err != nil {
		return "", fmt.Errorf("event log: %w", err)
	}
	l.channel = "assent_events_" + strconv.FormatUint(uint64(oid), 10)
	return l.channel, nil
}

// Append implements event.Log. The counter update, the inserts, the trim
// and the notification are sent as one batch, which PostgreSQL runs as one
// implicit transaction: one round trip per append.
func (l *eventLog) Append(ctx context.Context, events []event.Event) (int64, error) {
	channel, err := l.channelName(ctx)
	if err != nil {
		return 0, err
	}
	n := int64(len(events))
	b := &pgx.Batch{}
	b.Queue(`UPDATE cluster_event_seq SET seq = seq + $1 RETURNING seq`, n)
	for i, e := range events {
		var data any
		if e.Data != nil {
			data = string(e.Data)
		}
		b.Queue(`INSERT INTO cluster_events (seq, at, type, owner, audience, people, data)
			SELECT seq - $1, $2, $3, $4, $5, $6, $7 FROM cluster_event_seq`,
			n-1-int64(i), e.Time, e.Type, e.Owner, e.Audience, e.People, data)
	}
	if n > 0 {
		// Exactly the n events that fall out of the log now: the ranges
		// of successive appends tile the sequence.
		b.Queue(`DELETE FROM cluster_events WHERE seq > (SELECT seq FROM cluster_event_seq) - $1 - $2
			AND seq <= (SELECT seq FROM cluster_event_seq) - $1`, int64(EventLogKeep), n)
		b.Queue(`SELECT pg_notify($1, seq::text) FROM cluster_event_seq`, channel)
	}
	br := l.s.pool.SendBatch(ctx, b)
	var last int64
	err = br.QueryRow().Scan(&last)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("append events: %w", err)
	}
	return last, nil
}

const eventColumns = `seq, at, type, owner, audience, people, data`

func collectEvents(rows pgx.Rows) ([]event.Event, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (event.Event, error) {
		var e event.Event
		var data *string
		if err := r.Scan(&e.Seq, &e.Time, &e.Type, &e.Owner, &e.Audience, &e.People, &data); err != nil {
			return e, err
		}
		e.Time = utc(e.Time)
		if data != nil {
			e.Data = []byte(*data)
		}
		return e, nil
	})
}

// Tail implements event.Log.
func (l *eventLog) Tail(ctx context.Context, n int) ([]event.Event, error) {
	rows, err := l.s.pool.Query(ctx, `SELECT `+eventColumns+` FROM (
		SELECT `+eventColumns+` FROM cluster_events ORDER BY seq DESC LIMIT $1) t ORDER BY seq`, max(n, 0))
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	out, err := collectEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	return out, nil
}

// Follow implements event.Log.
func (l *eventLog) Follow(ctx context.Context, after int64, deliver func([]event.Event)) error {
	channel, err := l.channelName(ctx)
	if err != nil {
		return err
	}
	pc, err := l.s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	// The connection listens for as long as the follower runs: it leaves
	// the pool, which opens another in its place.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return followErr(ctx, err)
	}
	known := int64(-1) // the newest sequence a notification named
	for {
		if known < 0 || known > after {
			rows, err := conn.Query(ctx, `SELECT `+eventColumns+` FROM cluster_events WHERE seq > $1 ORDER BY seq LIMIT $2`, after, followBatch)
			if err != nil {
				return followErr(ctx, err)
			}
			batch, err := collectEvents(rows)
			if err != nil {
				return followErr(ctx, err)
			}
			if len(batch) > 0 {
				deliver(batch)
				after = batch[len(batch)-1].Seq
			}
			if len(batch) == followBatch {
				continue
			}
		}
		wait, cancel := context.WithTimeout(ctx, followPoll)
		note, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			known = -1 // look anyway
		case err != nil:
			return followErr(ctx, err)
		default:
			if known, err = strconv.ParseInt(note.Payload, 10, 64); err != nil {
				known = -1
			}
		}
	}
}

func followErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("event log: %w", err)
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/store"
)

// screenMigrations holds the schema of screens: the screen with its
// version and state, and apart its document; the presses waiting for confirmation; the
// kept updates of its live feed; and the idempotency keys of the requests
// that change screens.
var screenMigrations = []migration{{1, `
CREATE TABLE screens (
	id TEXT PRIMARY KEY,
	owner_id TEXT NOT NULL,
	document TEXT NOT NULL,
	version INTEGER NOT NULL,
	state TEXT NOT NULL DEFAULT '',
	last_seq INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX screens_owner ON screens(owner_id, created_at);
CREATE TABLE screen_pending (
	screen_id TEXT NOT NULL REFERENCES screens(id) ON DELETE CASCADE,
	id TEXT NOT NULL,
	button TEXT NOT NULL,
	tool TEXT NOT NULL,
	params TEXT NOT NULL DEFAULT '',
	sentence TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	PRIMARY KEY (screen_id, id)
);
CREATE TABLE screen_updates (
	screen_id TEXT NOT NULL REFERENCES screens(id) ON DELETE CASCADE,
	seq INTEGER NOT NULL,
	text TEXT NOT NULL,
	PRIMARY KEY (screen_id, seq)
);
CREATE TABLE idempotency_keys (
	key TEXT PRIMARY KEY,
	fingerprint BLOB NOT NULL,
	done INTEGER NOT NULL,
	status INTEGER NOT NULL,
	body BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX idempotency_age ON idempotency_keys(created_at, key);
`}, {2, `
-- A screen's document is written once and read at start, while its
-- version, state and feed number change with every save: kept in the
-- screen's row, a large document was written again with each of them.
CREATE TABLE screen_documents (
	screen_id TEXT PRIMARY KEY REFERENCES screens(id) ON DELETE CASCADE,
	document TEXT NOT NULL
);
INSERT INTO screen_documents (screen_id, document) SELECT id, document FROM screens;
ALTER TABLE screens DROP COLUMN document;
`}}

// screenStore implements store.Screens on the database.
type screenStore struct{ db *sql.DB }

var _ store.Screens = screenStore{}

// Screens returns the store of screens.
func (s *DB) Screens() store.Screens { return screenStore{s.db} }

// selectScreens reads screens with their documents.
const selectScreens = `SELECT s.id, s.owner_id, d.document, s.version, s.state, s.last_seq, s.created_at, s.updated_at
	FROM screens s JOIN screen_documents d ON d.screen_id = s.id`

func scanScreen(sc scanner) (store.Screen, error) {
	var (
		s                store.Screen
		state            string
		created, updated int64
	)
	if err := sc.Scan(&s.ID, &s.OwnerID, &s.Document, &s.Version, &state, &s.LastSeq, &created, &updated); err != nil {
		return s, err
	}
	if state != "" {
		s.State = []byte(state)
	}
	s.CreatedAt, s.UpdatedAt = fromMS(created), fromMS(updated)
	return s, nil
}

// tx runs fn in a write transaction and commits it. Errors of fn that
// wrap a store error are returned as they are.
func (c screenStore) tx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalid) {
			return err
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// CreateScreen implements store.Screens.
func (c screenStore) CreateScreen(ctx context.Context, sc store.Screen) ([]string, error) {
	if err := sc.Check(); err != nil {
		return nil, err
	}
	var evicted []string
	err := c.tx(ctx, "create screen", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO screens (id, owner_id, version, state, last_seq, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, ?)`,
			sc.ID, sc.OwnerID, sc.Version, string(sc.State), ms(sc.CreatedAt), ms(sc.UpdatedAt))
		if isUnique(err) {
			return store.ErrConflict
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO screen_documents (screen_id, document) VALUES (?, ?)`, sc.ID, sc.Document); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id FROM screens WHERE owner_id = ? ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET ?`,
			sc.OwnerID, store.ScreensPerOwner)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			evicted = append(evicted, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range evicted {
			if _, err := tx.ExecContext(ctx, `DELETE FROM screens WHERE id = ?`, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evicted, nil
}

// UpdateScreen implements store.Screens. The version is compared in the
// UPDATE itself, so the check and the write are one statement; the
// document, in its own table, is written only when it changed.
func (c screenStore) UpdateScreen(ctx context.Context, sc store.Screen, prev int64) error {
	if err := sc.Check(); err != nil {
		return err
	}
	if sc.Version <= prev {
		return fmt.Errorf("%w: screen %s: version %d must be greater than %d", store.ErrInvalid, sc.ID, sc.Version, prev)
	}
	return c.tx(ctx, "update screen", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE screens SET version = ?, state = ?, updated_at = ? WHERE id = ? AND version = ?`,
			sc.Version, string(sc.State), ms(sc.UpdatedAt), sc.ID, prev)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if sc.SameDocument {
				return nil
			}
			_, err := tx.ExecContext(ctx, `UPDATE screen_documents SET document = ? WHERE screen_id = ?`, sc.Document, sc.ID)
			return err
		}
		var version int64
		err = tx.QueryRowContext(ctx, `SELECT version FROM screens WHERE id = ?`, sc.ID).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: screen %s is at version %d, not %d", store.ErrConflict, sc.ID, version, prev)
	})
}

// Screen implements store.Screens.
func (c screenStore) Screen(ctx context.Context, id string) (store.Screen, error) {
	s, err := scanScreen(c.db.QueryRowContext(ctx, selectScreens+` WHERE s.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Screen{}, store.ErrNotFound
	}
	if err != nil {
		return store.Screen{}, fmt.Errorf("screen %s: %w", id, err)
	}
	return s, nil
}

// LoadScreen implements store.Screens.
func (c screenStore) LoadScreen(ctx context.Context, id string) (store.LoadedScreen, error) {
	var out store.LoadedScreen
	tx, err := c.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return out, fmt.Errorf("load screen: %w", err)
	}
	defer tx.Rollback()
	out.Screen, err = scanScreen(tx.QueryRowContext(ctx, selectScreens+` WHERE s.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return out, store.ErrNotFound
	}
	if err != nil {
		return out, fmt.Errorf("load screen %s: %w", id, err)
	}
	if out.Pending, err = listPending(ctx, tx, id); err != nil {
		return out, err
	}
	if out.Updates, err = listUpdates(ctx, tx, id, 0); err != nil {
		return out, err
	}
	return out, nil
}

// querier is what the reads of a screen's parts need: the database or a
// transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ListScreens implements store.Screens.
func (c screenStore) ListScreens(ctx context.Context, ownerID string) ([]store.Screen, error) {
	rows, err := c.db.QueryContext(ctx, selectScreens+` WHERE (? = '' OR s.owner_id = ?) ORDER BY s.created_at, s.id`, ownerID, ownerID)
	if err != nil {
		return nil, fmt.Errorf("list screens: %w", err)
	}
	defer rows.Close()
	var out []store.Screen
	for rows.Next() {
		s, err := scanScreen(rows)
		if err != nil {
			return nil, fmt.Errorf("list screens: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// ScreenIDs implements store.Screens.
func (c screenStore) ScreenIDs(ctx context.Context) ([]string, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT id FROM screens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list screen ids: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list screen ids: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// DeleteScreen implements store.Screens.
func (c screenStore) DeleteScreen(ctx context.Context, id string) error {
	res, err := c.db.ExecContext(ctx, `DELETE FROM screens WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete screen: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// AddScreenPending implements store.Screens.
func (c screenStore) AddScreenPending(ctx context.Context, p store.ScreenPending) error {
	return c.tx(ctx, "add pending press", func(tx *sql.Tx) error {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM screen_pending WHERE screen_id = s.id) FROM screens s WHERE s.id = ?`, p.ScreenID).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if n >= store.ScreenPendingLimit {
			return fmt.Errorf("%w: screen %s has %d presses waiting for confirmation already", store.ErrInvalid, p.ScreenID, n)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO screen_pending (screen_id, id, button, tool, params, sentence, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.ScreenID, p.ID, p.Button, p.Tool, string(p.Params), p.Sentence, ms(p.CreatedAt))
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
}

const pendingColumns = `screen_id, id, button, tool, params, sentence, created_at`

func scanPending(sc scanner) (store.ScreenPending, error) {
	var (
		p       store.ScreenPending
		params  string
		created int64
	)
	if err := sc.Scan(&p.ScreenID, &p.ID, &p.Button, &p.Tool, &params, &p.Sentence, &created); err != nil {
		return p, err
	}
	if params != "" {
		p.Params = []byte(params)
	}
	p.CreatedAt = fromMS(created)
	return p, nil
}

// TakeScreenPending implements store.Screens.
func (c screenStore) TakeScreenPending(ctx context.Context, screenID, id string) (store.ScreenPending, error) {
	var p store.ScreenPending
	err := c.tx(ctx, "take pending press", func(tx *sql.Tx) error {
		var err error
		p, err = scanPending(tx.QueryRowContext(ctx, `DELETE FROM screen_pending WHERE screen_id = ? AND id = ? RETURNING `+pendingColumns, screenID, id))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT version FROM screens WHERE id = ?`, screenID).Scan(&p.ScreenVersion)
	})
	return p, err
}

// ListScreenPending implements store.Screens.
func (c screenStore) ListScreenPending(ctx context.Context, screenID string) ([]store.ScreenPending, error) {
	return listPending(ctx, c.db, screenID)
}

func listPending(ctx context.Context, q querier, screenID string) ([]store.ScreenPending, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+pendingColumns+` FROM screen_pending WHERE screen_id = ? ORDER BY created_at, id`, screenID)
	if err != nil {
		return nil, fmt.Errorf("list pending presses: %w", err)
	}
	defer rows.Close()
	var out []store.ScreenPending
	for rows.Next() {
		p, err := scanPending(rows)
		if err != nil {
			return nil, fmt.Errorf("list pending presses: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// AppendScreenUpdate implements store.Screens.
func (c screenStore) AppendScreenUpdate(ctx context.Context, screenID, text string) (int64, error) {
	var seq int64
	err := c.tx(ctx, "append screen update", func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE screens SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq`, screenID).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO screen_updates (screen_id, seq, text) VALUES (?, ?, ?)`, screenID, seq, text); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM screen_updates WHERE screen_id = ? AND seq <= ?`, screenID, seq-store.ScreenUpdatesKept)
		return err
	})
	return seq, err
}

// ScreenUpdates implements store.Screens.
func (c screenStore) ScreenUpdates(ctx context.Context, screenID string, afterSeq int64) ([]store.ScreenUpdate, error) {
	return listUpdates(ctx, c.db, screenID, afterSeq)
}

func listUpdates(ctx context.Context, q querier, screenID string, afterSeq int64) ([]store.ScreenUpdate, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, text FROM screen_updates WHERE screen_id = ? AND seq > ? ORDER BY seq`, screenID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("screen updates: %w", err)
	}
	defer rows.Close()
	var out []store.ScreenUpdate
	for rows.Next() {
		var u store.ScreenUpdate
		if err := rows.Scan(&u.Seq, &u.Text); err != nil {
			return nil, fmt.Errorf("screen updates: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// BeginIdempotent implements store.Screens.
func (c screenStore) BeginIdempotent(ctx context.Context, rec store.Idempotency, now time.Time) (store.Idempotency, bool, error) {
	var (
		got     store.Idempotency
		created bool
	)
	err := c.tx(ctx, "begin idempotent request", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, ms(now)); err != nil {
			return err
		}
		var done int
		var ca, ea int64
		err := tx.QueryRowContext(ctx, `SELECT key, fingerprint, done, status, body, created_at, expires_at FROM idempotency_keys WHERE key = ?`, rec.Key).
			Scan(&got.Key, &got.Fingerprint, &done, &got.Status, &got.Body, &ca, &ea)
		if err == nil {
			got.Done, got.CreatedAt, got.ExpiresAt = done != 0, fromMS(ca), fromMS(ea)
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (key, fingerprint, done, status, body, created_at, expires_at) VALUES (?, ?, 0, 0, ?, ?, ?)`,
			rec.Key, nonNilBytes(rec.Fingerprint), []byte{}, ms(rec.CreatedAt), ms(rec.ExpiresAt)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE key IN (SELECT key FROM idempotency_keys
			ORDER BY created_at DESC, key DESC LIMIT -1 OFFSET ?)`, store.IdempotencyKeysKept); err != nil {
			return err
		}
		got, created = rec, true
		got.Done, got.Status, got.Body = false, 0, nil
		return nil
	})
	return got, created, err
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// FinishIdempotent implements store.Screens.
func (c screenStore) FinishIdempotent(ctx context.Context, key string, status int, body []byte) error {
	res, err := c.db.ExecContext(ctx, `UPDATE idempotency_keys SET done = 1, status = ?, body = ? WHERE key = ?`, status, nonNilBytes(body), key)
	if err != nil {
		return fmt.Errorf("finish idempotent request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ForgetIdempotent implements store.Screens.
func (c screenStore) ForgetIdempotent(ctx context.Context, key string) error {
	if _, err := c.db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE key = ?`, key); err != nil {
		return fmt.Errorf("forget idempotent request: %w", err)
	}
	return nil
}

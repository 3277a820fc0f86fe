package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/assent-run/assent/store"
)

// screenMigrations holds the schema of screens, column for column that of
// store/sqlite: the screen with its document, version and state; the
// presses waiting for confirmation; the kept updates of its live feed; and
// the idempotency keys of the requests that change screens.
var screenMigrations = []migration{{1, `
CREATE TABLE screens (
	id TEXT COLLATE "C" PRIMARY KEY,
	owner_id TEXT NOT NULL,
	document TEXT NOT NULL,
	version BIGINT NOT NULL,
	state TEXT NOT NULL DEFAULT '',
	last_seq BIGINT NOT NULL DEFAULT 0,
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX screens_owner ON screens(owner_id, created_at);
CREATE TABLE screen_pending (
	screen_id TEXT COLLATE "C" NOT NULL REFERENCES screens(id) ON DELETE CASCADE,
	id TEXT COLLATE "C" NOT NULL,
	button TEXT NOT NULL,
	tool TEXT NOT NULL,
	params TEXT NOT NULL DEFAULT '',
	sentence TEXT NOT NULL DEFAULT '',
	created_at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (screen_id, id)
);
CREATE TABLE screen_updates (
	screen_id TEXT COLLATE "C" NOT NULL REFERENCES screens(id) ON DELETE CASCADE,
	seq BIGINT NOT NULL,
	text TEXT NOT NULL,
	PRIMARY KEY (screen_id, seq)
);
CREATE TABLE idempotency_keys (
	key TEXT COLLATE "C" PRIMARY KEY,
	fingerprint BYTEA NOT NULL,
	done BOOLEAN NOT NULL,
	status INTEGER NOT NULL,
	body BYTEA NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX idempotency_age ON idempotency_keys(created_at, key);
`}}

// screenStore implements store.Screens on the database.
type screenStore struct{ s *DB }

var _ store.Screens = screenStore{}

// Screens returns the store of screens.
func (s *DB) Screens() store.Screens { return screenStore{s} }

const screenColumns = `id, owner_id, document, version, state, last_seq, created_at, updated_at`

func scanScreen(row pgx.Row) (store.Screen, error) {
	var (
		s     store.Screen
		state string
	)
	if err := row.Scan(&s.ID, &s.OwnerID, &s.Document, &s.Version, &state, &s.LastSeq, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return s, err
	}
	if state != "" {
		s.State = []byte(state)
	}
	s.CreatedAt, s.UpdatedAt = utc(s.CreatedAt), utc(s.UpdatedAt)
	return s, nil
}

// write runs fn in a transaction with retries; errors of fn that are not
// store errors are wrapped with what.
func (c screenStore) write(ctx context.Context, what string, fn func(pgx.Tx) error) error {
	return c.s.write(ctx, what, func(tx pgx.Tx) error {
		err := fn(tx)
		if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalid) || retryable(err) {
			return err
		}
		return fmt.Errorf("%s: %w", what, err)
	})
}

// CreateScreen implements store.Screens. Creations for one owner are
// serialized by an advisory lock, so the bound holds on every node.
func (c screenStore) CreateScreen(ctx context.Context, sc store.Screen) ([]string, error) {
	if err := sc.Check(); err != nil {
		return nil, err
	}
	var evicted []string
	err := c.write(ctx, "create screen", func(tx pgx.Tx) error {
		evicted = nil
		if err := lockItem(ctx, tx, "screens", sc.OwnerID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO screens (`+screenColumns+`) VALUES ($1, $2, $3, $4, $5, 0, $6, $7)`,
			sc.ID, sc.OwnerID, sc.Document, sc.Version, string(sc.State), sc.CreatedAt, sc.UpdatedAt)
		if isUnique(err) {
			return store.ErrConflict
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `DELETE FROM screens WHERE id IN (SELECT id FROM screens WHERE owner_id = $1
			ORDER BY created_at DESC, id DESC OFFSET $2) RETURNING id`, sc.OwnerID, store.ScreensPerOwner)
		if err != nil {
			return err
		}
		evicted, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	return evicted, nil
}

// UpdateScreen implements store.Screens. The version is compared in the
// UPDATE itself, which locks the row, so of concurrent writers that read
// the same version exactly one succeeds.
func (c screenStore) UpdateScreen(ctx context.Context, sc store.Screen, prev int64) error {
	if err := sc.Check(); err != nil {
		return err
	}
	if sc.Version <= prev {
		return fmt.Errorf("%w: screen %s: version %d must be greater than %d", store.ErrInvalid, sc.ID, sc.Version, prev)
	}
	return c.write(ctx, "update screen", func(tx pgx.Tx) error {
		// An unchanged document is left out, so its stored value is kept
		// as it is rather than written again.
		var (
			tag pgconn.CommandTag
			err error
		)
		if sc.SameDocument {
			tag, err = tx.Exec(ctx, `UPDATE screens SET version = $1, state = $2, updated_at = $3 WHERE id = $4 AND version = $5`,
				sc.Version, string(sc.State), sc.UpdatedAt, sc.ID, prev)
		} else {
			tag, err = tx.Exec(ctx, `UPDATE screens SET document = $1, version = $2, state = $3, updated_at = $4 WHERE id = $5 AND version = $6`,
				sc.Document, sc.Version, string(sc.State), sc.UpdatedAt, sc.ID, prev)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var version int64
		err = tx.QueryRow(ctx, `SELECT version FROM screens WHERE id = $1`, sc.ID).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
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
	sc, err := scanScreen(c.s.pool.QueryRow(ctx, `SELECT `+screenColumns+` FROM screens WHERE id = $1`, id))
	if err != nil {
		return store.Screen{}, rowErr(err, "screen "+id)
	}
	return sc, nil
}

// LoadScreen implements store.Screens. The three reads run in one
// read-only repeatable-read transaction, so they see one state.
func (c screenStore) LoadScreen(ctx context.Context, id string) (store.LoadedScreen, error) {
	var out store.LoadedScreen
	err := c.s.inTx(ctx, "load screen", pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = store.LoadedScreen{}
		var err error
		out.Screen, err = scanScreen(tx.QueryRow(ctx, `SELECT `+screenColumns+` FROM screens WHERE id = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if out.Pending, err = listPending(ctx, tx, id); err != nil {
			return err
		}
		out.Updates, err = listUpdates(ctx, tx, id, 0)
		return err
	})
	if err != nil {
		return store.LoadedScreen{}, err
	}
	return out, nil
}

// querier is what the reads of a screen's parts need: the pool or a
// transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ListScreens implements store.Screens.
func (c screenStore) ListScreens(ctx context.Context, ownerID string) ([]store.Screen, error) {
	rows, err := c.s.pool.Query(ctx, `SELECT `+screenColumns+` FROM screens WHERE ($1::text = '' OR owner_id = $1) ORDER BY created_at, id`, ownerID)
	if err != nil {
		return nil, fmt.Errorf("list screens: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Screen, error) { return scanScreen(r) })
	if err != nil {
		return nil, fmt.Errorf("list screens: %w", err)
	}
	return out, nil
}

// ScreenIDs implements store.Screens.
func (c screenStore) ScreenIDs(ctx context.Context) ([]string, error) {
	rows, err := c.s.pool.Query(ctx, `SELECT id FROM screens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list screen ids: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list screen ids: %w", err)
	}
	return out, nil
}

// DeleteScreen implements store.Screens.
func (c screenStore) DeleteScreen(ctx context.Context, id string) error {
	tag, err := c.s.pool.Exec(ctx, `DELETE FROM screens WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete screen: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// AddScreenPending implements store.Screens. The screen's row is locked
// while the presses are counted, so the bound holds.
func (c screenStore) AddScreenPending(ctx context.Context, p store.ScreenPending) error {
	return c.write(ctx, "add pending press", func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM screens WHERE id = $1 FOR UPDATE`, p.ScreenID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM screen_pending WHERE screen_id = $1`, p.ScreenID).Scan(&n); err != nil {
			return err
		}
		if n >= store.ScreenPendingLimit {
			return fmt.Errorf("%w: screen %s has %d presses waiting for confirmation already", store.ErrInvalid, p.ScreenID, n)
		}
		_, err = tx.Exec(ctx, `INSERT INTO screen_pending (screen_id, id, button, tool, params, sentence, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.ScreenID, p.ID, p.Button, p.Tool, string(p.Params), p.Sentence, p.CreatedAt)
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
}

const pendingColumns = `screen_id, id, button, tool, params, sentence, created_at`

func scanPending(row pgx.Row) (store.ScreenPending, error) {
	var (
		p      store.ScreenPending
		params string
	)
	if err := row.Scan(&p.ScreenID, &p.ID, &p.Button, &p.Tool, &params, &p.Sentence, &p.CreatedAt); err != nil {
		return p, err
	}
	if params != "" {
		p.Params = []byte(params)
	}
	p.CreatedAt = utc(p.CreatedAt)
	return p, nil
}

// TakeScreenPending implements store.Screens. The screen's version is
// read in the statement that deletes the press.
func (c screenStore) TakeScreenPending(ctx context.Context, screenID, id string) (store.ScreenPending, error) {
	var (
		p      store.ScreenPending
		params string
	)
	err := c.s.pool.QueryRow(ctx, `DELETE FROM screen_pending p USING screens s WHERE p.screen_id = $1 AND p.id = $2 AND s.id = p.screen_id
		RETURNING p.screen_id, p.id, p.button, p.tool, p.params, p.sentence, p.created_at, s.version`, screenID, id).
		Scan(&p.ScreenID, &p.ID, &p.Button, &p.Tool, &params, &p.Sentence, &p.CreatedAt, &p.ScreenVersion)
	if err != nil {
		return store.ScreenPending{}, rowErr(err, "take pending press")
	}
	if params != "" {
		p.Params = []byte(params)
	}
	p.CreatedAt = utc(p.CreatedAt)
	return p, nil
}

// ListScreenPending implements store.Screens.
func (c screenStore) ListScreenPending(ctx context.Context, screenID string) ([]store.ScreenPending, error) {
	return listPending(ctx, c.s.pool, screenID)
}

func listPending(ctx context.Context, q querier, screenID string) ([]store.ScreenPending, error) {
	rows, err := q.Query(ctx, `SELECT `+pendingColumns+` FROM screen_pending WHERE screen_id = $1 ORDER BY created_at, id`, screenID)
	if err != nil {
		return nil, fmt.Errorf("list pending presses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ScreenPending, error) { return scanPending(r) })
	if err != nil {
		return nil, fmt.Errorf("list pending presses: %w", err)
	}
	return out, nil
}

// AppendScreenUpdate implements store.Screens. Incrementing the screen's
// last_seq locks its row, so concurrent appends get consecutive numbers.
func (c screenStore) AppendScreenUpdate(ctx context.Context, screenID, text string) (int64, error) {
	var seq int64
	err := c.write(ctx, "append screen update", func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE screens SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq`, screenID).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO screen_updates (screen_id, seq, text) VALUES ($1, $2, $3)`, screenID, seq, text); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM screen_updates WHERE screen_id = $1 AND seq <= $2`, screenID, seq-store.ScreenUpdatesKept)
		return err
	})
	return seq, err
}

// ScreenUpdates implements store.Screens.
func (c screenStore) ScreenUpdates(ctx context.Context, screenID string, afterSeq int64) ([]store.ScreenUpdate, error) {
	return listUpdates(ctx, c.s.pool, screenID, afterSeq)
}

func listUpdates(ctx context.Context, q querier, screenID string, afterSeq int64) ([]store.ScreenUpdate, error) {
	rows, err := q.Query(ctx, `SELECT seq, text FROM screen_updates WHERE screen_id = $1 AND seq > $2 ORDER BY seq`, screenID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("screen updates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ScreenUpdate, error) {
		var u store.ScreenUpdate
		err := r.Scan(&u.Seq, &u.Text)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("screen updates: %w", err)
	}
	return out, nil
}

// BeginIdempotent implements store.Screens. Of concurrent first uses of a
// key, the unique index lets exactly one insert.
func (c screenStore) BeginIdempotent(ctx context.Context, rec store.Idempotency, now time.Time) (store.Idempotency, bool, error) {
	var (
		got     store.Idempotency
		created bool
	)
	err := c.write(ctx, "begin idempotent request", func(tx pgx.Tx) error {
		got, created = store.Idempotency{}, false
		if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, now); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (key, fingerprint, done, status, body, created_at, expires_at)
			VALUES ($1, $2, false, 0, '', $3, $4) ON CONFLICT (key) DO NOTHING`, rec.Key, nonNilBytes(rec.Fingerprint), rec.CreatedAt, rec.ExpiresAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			created = true
			got = rec
			got.Done, got.Status, got.Body = false, 0, nil
			_, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE key IN (SELECT key FROM idempotency_keys
				ORDER BY created_at DESC, key DESC OFFSET $1)`, store.IdempotencyKeysKept)
			return err
		}
		err = tx.QueryRow(ctx, `SELECT key, fingerprint, done, status, body, created_at, expires_at FROM idempotency_keys WHERE key = $1`, rec.Key).
			Scan(&got.Key, &got.Fingerprint, &got.Done, &got.Status, &got.Body, &got.CreatedAt, &got.ExpiresAt)
		got.CreatedAt, got.ExpiresAt = utc(got.CreatedAt), utc(got.ExpiresAt)
		return err
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
	tag, err := c.s.pool.Exec(ctx, `UPDATE idempotency_keys SET done = true, status = $1, body = $2 WHERE key = $3`, status, nonNilBytes(body), key)
	if err != nil {
		return fmt.Errorf("finish idempotent request: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ForgetIdempotent implements store.Screens.
func (c screenStore) ForgetIdempotent(ctx context.Context, key string) error {
	if _, err := c.s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE key = $1`, key); err != nil {
		return fmt.Errorf("forget idempotent request: %w", err)
	}
	return nil
}

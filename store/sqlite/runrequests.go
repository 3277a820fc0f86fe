package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/store"
)

// runRequestsSchema is step 5 of the runs component: the requests one
// node makes of the node supervising a Run (store.RunRequests).
const runRequestsSchema = `
CREATE TABLE run_requests (
	id TEXT PRIMARY KEY,
	run_id TEXT NOT NULL,
	instance_id TEXT NOT NULL,
	node TEXT NOT NULL,
	kind TEXT NOT NULL,
	stream TEXT NOT NULL DEFAULT '',
	lines INTEGER NOT NULL DEFAULT 0,
	requested_at INTEGER NOT NULL,
	answered_at INTEGER NOT NULL DEFAULT 0,
	text TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX run_requests_pending ON run_requests(node, requested_at) WHERE answered_at = 0;
CREATE INDEX run_requests_age ON run_requests(requested_at);
`

const runRequestColumns = `id, run_id, instance_id, node, kind, stream, lines, requested_at, answered_at, text, error`

func scanRunRequest(sc interface{ Scan(...any) error }) (store.RunRequest, error) {
	var r store.RunRequest
	var requested, answered int64
	if err := sc.Scan(&r.ID, &r.RunID, &r.InstanceID, &r.Node, &r.Kind, &r.Stream, &r.Lines, &requested, &answered, &r.Text, &r.Error); err != nil {
		return r, err
	}
	r.RequestedAt = fromMS(requested)
	if answered != 0 {
		r.AnsweredAt = fromMS(answered)
	}
	return r, nil
}

// AddRunRequest implements store.RunRequests.
func (s *DB) AddRunRequest(ctx context.Context, r store.RunRequest) error {
	if err := store.CheckRunRequest(r); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO run_requests (id, run_id, instance_id, node, kind, stream, lines, requested_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		r.ID, r.RunID, r.InstanceID, r.Node, r.Kind, r.Stream, r.Lines, ms(r.RequestedAt))
	if err != nil {
		return fmt.Errorf("add run request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrConflict
	}
	return nil
}

// RunRequest implements store.RunRequests.
func (s *DB) RunRequest(ctx context.Context, id string) (store.RunRequest, error) {
	r, err := scanRunRequest(s.db.QueryRowContext(ctx, `SELECT `+runRequestColumns+` FROM run_requests WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("run request %s: %w", id, err)
	}
	return r, nil
}

// AnswerRunRequest implements store.RunRequests.
func (s *DB) AnswerRunRequest(ctx context.Context, id, text, errText string, at time.Time) error {
	if err := store.CheckRunAnswer(text, errText); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE run_requests SET answered_at = ?, text = ?, error = ? WHERE id = ? AND answered_at = 0`,
		max(ms(at), 1), text, errText, id)
	if err != nil {
		return fmt.Errorf("answer run request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	if _, err := s.RunRequest(ctx, id); err != nil {
		return err
	}
	return store.ErrConflict
}

// PendingRunRequests implements store.RunRequests.
func (s *DB) PendingRunRequests(ctx context.Context, node string) ([]store.RunRequest, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+runRequestColumns+` FROM run_requests
		WHERE node = ? AND answered_at = 0 ORDER BY requested_at, id`, node)
	if err != nil {
		return nil, fmt.Errorf("pending run requests: %w", err)
	}
	defer rows.Close()
	var out []store.RunRequest
	for rows.Next() {
		r, err := scanRunRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("pending run requests: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteRunRequest implements store.RunRequests.
func (s *DB) DeleteRunRequest(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM run_requests WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete run request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// DeleteRunRequestsBefore implements store.RunRequests.
func (s *DB) DeleteRunRequestsBefore(ctx context.Context, t time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM run_requests WHERE requested_at < ?`, ms(t))
	if err != nil {
		return 0, fmt.Errorf("delete run requests: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	requested_at TIMESTAMPTZ NOT NULL,
	answered_at TIMESTAMPTZ,
	text TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX run_requests_pending ON run_requests(node, requested_at) WHERE answered_at IS NULL;
CREATE INDEX run_requests_age ON run_requests(requested_at);
`

const runRequestColumns = `id, run_id, instance_id, node, kind, stream, lines, requested_at, answered_at, text, error`

func scanRunRequest(sc pgx.Row) (store.RunRequest, error) {
	var r store.RunRequest
	var answered *time.Time
	if err := sc.Scan(&r.ID, &r.RunID, &r.InstanceID, &r.Node, &r.Kind, &r.Stream, &r.Lines, &r.RequestedAt, &answered, &r.Text, &r.Error); err != nil {
		return r, err
	}
	r.RequestedAt = r.RequestedAt.UTC()
	if answered != nil {
		r.AnsweredAt = answered.UTC()
	}
	return r, nil
}

// AddRunRequest implements store.RunRequests.
func (s *DB) AddRunRequest(ctx context.Context, r store.RunRequest) error {
	if err := store.CheckRunRequest(r); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO run_requests (id, run_id, instance_id, node, kind, stream, lines, requested_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
		r.ID, r.RunID, r.InstanceID, r.Node, r.Kind, r.Stream, r.Lines, r.RequestedAt)
	if err != nil {
		return fmt.Errorf("add run request: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrConflict
	}
	return nil
}

// RunRequest implements store.RunRequests.
func (s *DB) RunRequest(ctx context.Context, id string) (store.RunRequest, error) {
	r, err := scanRunRequest(s.pool.QueryRow(ctx, `SELECT `+runRequestColumns+` FROM run_requests WHERE id = $1`, id))
	return r, rowErr(err, "run request "+id)
}

// AnswerRunRequest implements store.RunRequests.
func (s *DB) AnswerRunRequest(ctx context.Context, id, text, errText string, at time.Time) error {
	if err := store.CheckRunAnswer(text, errText); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE run_requests SET answered_at = $1, text = $2, error = $3 WHERE id = $4 AND answered_at IS NULL`,
		at, text, errText, id)
	if err != nil {
		return fmt.Errorf("answer run request: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.RunRequest(ctx, id); err != nil {
		return err
	}
	return store.ErrConflict
}

// PendingRunRequests implements store.RunRequests.
func (s *DB) PendingRunRequests(ctx context.Context, node string) ([]store.RunRequest, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runRequestColumns+` FROM run_requests
		WHERE node = $1 AND answered_at IS NULL ORDER BY requested_at, id`, node)
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
	tag, err := s.pool.Exec(ctx, `DELETE FROM run_requests WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete run request: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// DeleteRunRequestsBefore implements store.RunRequests.
func (s *DB) DeleteRunRequestsBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM run_requests WHERE requested_at < $1`, t)
	if err != nil {
		return 0, fmt.Errorf("delete run requests: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

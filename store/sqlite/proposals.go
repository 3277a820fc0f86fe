package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/assent-run/assent/store"
)

// proposalMigrations holds the schema of command proposals: what an agent
// asked to run or register, kept until a person decides. The columns a
// person filters on are columns; the recorded request is one JSON document
// written once and never changed.
var proposalMigrations = []migration{{1, `
CREATE TABLE command_proposals (
	id TEXT PRIMARY KEY,
	kind TEXT NOT NULL,
	proposer_id TEXT NOT NULL,
	supervisor_id TEXT NOT NULL DEFAULT '',
	target TEXT NOT NULL,
	doc TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	status TEXT NOT NULL,
	decided_by TEXT NOT NULL DEFAULT '',
	decided_at INTEGER NOT NULL DEFAULT 0,
	reason TEXT NOT NULL DEFAULT '',
	result TEXT NOT NULL DEFAULT ''
);
CREATE INDEX command_proposals_status ON command_proposals(status, created_at);
CREATE INDEX command_proposals_proposer ON command_proposals(proposer_id, created_at);
`}}

const proposalColumns = `id, kind, proposer_id, supervisor_id, target, doc, created_at, status, decided_by, decided_at, reason, result`

// CreateProposal implements store.Proposals.
func (s *DB) CreateProposal(ctx context.Context, p store.Proposal) error {
	if err := p.Check(); err != nil {
		return err
	}
	doc, err := p.Document()
	if err != nil {
		return fmt.Errorf("create proposal: %w", err)
	}
	var decided int64
	if !p.DecidedAt.IsZero() {
		decided = ms(p.DecidedAt)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO command_proposals (`+proposalColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.Kind, p.ProposerID, p.SupervisorID, p.Target, string(doc), ms(p.CreatedAt), store.ProposalPending,
		p.DecidedBy, decided, p.Reason, string(p.Result))
	if err != nil {
		if isUnique(err) {
			return store.ErrConflict
		}
		return fmt.Errorf("create proposal: %w", err)
	}
	return nil
}

func scanProposal(sc scanner) (store.Proposal, error) {
	var p store.Proposal
	var doc, result string
	var created, decided int64
	if err := sc.Scan(&p.ID, &p.Kind, &p.ProposerID, &p.SupervisorID, &p.Target, &doc, &created, &p.Status,
		&p.DecidedBy, &decided, &p.Reason, &result); err != nil {
		return p, err
	}
	if err := p.SetDocument([]byte(doc)); err != nil {
		return p, err
	}
	p.CreatedAt = fromMS(created)
	if decided != 0 {
		p.DecidedAt = fromMS(decided)
	}
	if result != "" {
		p.Result = json.RawMessage(result)
	}
	return p, nil
}

// Proposal implements store.Proposals.
func (s *DB) Proposal(ctx context.Context, id string) (store.Proposal, error) {
	p, err := scanProposal(s.db.QueryRowContext(ctx, `SELECT `+proposalColumns+` FROM command_proposals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, store.ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("proposal %s: %w", id, err)
	}
	return p, nil
}

// ListProposals implements store.Proposals.
func (s *DB) ListProposals(ctx context.Context, status, proposerID string, limit int) ([]store.Proposal, error) {
	q := `SELECT ` + proposalColumns + ` FROM command_proposals WHERE (? = '' OR status = ?) AND (? = '' OR proposer_id = ?) ORDER BY created_at, id`
	args := []any{status, status, proposerID, proposerID}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list proposals: %w", err)
	}
	defer rows.Close()
	var out []store.Proposal
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, fmt.Errorf("list proposals: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// DecideProposal implements store.Proposals.
func (s *DB) DecideProposal(ctx context.Context, d store.ProposalDecision) error {
	if err := d.Check(); err != nil {
		return err
	}
	var decided int64
	if !d.DecidedAt.IsZero() {
		decided = ms(d.DecidedAt)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE command_proposals SET status = ?, decided_by = ?, decided_at = ?, reason = ?, result = ? WHERE id = ? AND status = ?`,
		d.To, d.DecidedBy, decided, d.Reason, string(d.Result), d.ID, d.From)
	if err != nil {
		return fmt.Errorf("decide proposal: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	if _, err := s.Proposal(ctx, d.ID); err != nil {
		return err
	}
	return store.ErrConflict
}

package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/store"
)

// proposalMigrations holds the schema of command proposals: what an agent
// asked to run or register, kept until a person decides. The columns a
// person filters on are columns; the recorded request is one JSON document
// written once and never changed, kept as text so that it reads back byte
// for byte.
var proposalMigrations = []migration{{1, `
CREATE TABLE command_proposals (
	id TEXT COLLATE "C" PRIMARY KEY,
	kind TEXT NOT NULL,
	proposer_id TEXT NOT NULL,
	supervisor_id TEXT NOT NULL DEFAULT '',
	target TEXT NOT NULL,
	doc TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	status TEXT NOT NULL,
	decided_by TEXT NOT NULL DEFAULT '',
	decided_at TIMESTAMPTZ,
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
	_, err = s.pool.Exec(ctx, `INSERT INTO command_proposals (`+proposalColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		p.ID, p.Kind, p.ProposerID, p.SupervisorID, p.Target, string(doc), p.CreatedAt, store.ProposalPending,
		p.DecidedBy, optTime(p.DecidedAt), p.Reason, string(p.Result))
	if err != nil {
		if isUnique(err) {
			return store.ErrConflict
		}
		return fmt.Errorf("create proposal: %w", err)
	}
	return nil
}

func scanProposal(row pgx.Row) (store.Proposal, error) {
	var (
		p           store.Proposal
		doc, result string
		decided     *time.Time
	)
	if err := row.Scan(&p.ID, &p.Kind, &p.ProposerID, &p.SupervisorID, &p.Target, &doc, &p.CreatedAt, &p.Status,
		&p.DecidedBy, &decided, &p.Reason, &result); err != nil {
		return p, err
	}
	if err := p.SetDocument([]byte(doc)); err != nil {
		return p, err
	}
	p.CreatedAt = utc(p.CreatedAt)
	p.DecidedAt = fromOpt(decided)
	if result != "" {
		p.Result = json.RawMessage(result)
	}
	return p, nil
}

// Proposal implements store.Proposals.
func (s *DB) Proposal(ctx context.Context, id string) (store.Proposal, error) {
	p, err := scanProposal(s.pool.QueryRow(ctx, `SELECT `+proposalColumns+` FROM command_proposals WHERE id = $1`, id))
	if err != nil {
		return store.Proposal{}, rowErr(err, "proposal "+id)
	}
	return p, nil
}

// ListProposals implements store.Proposals.
func (s *DB) ListProposals(ctx context.Context, status, proposerID string, limit int) ([]store.Proposal, error) {
	q := `SELECT ` + proposalColumns + ` FROM command_proposals WHERE ($1::text = '' OR status = $1) AND ($2::text = '' OR proposer_id = $2) ORDER BY created_at, id`
	args := []any{status, proposerID}
	if limit > 0 {
		q += ` LIMIT $3`
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list proposals: %w", err)
	}
	return out, nil
}

// DecideProposal implements store.Proposals. The update is conditional on
// the current status, so of concurrent decisions from one status exactly
// one applies.
func (s *DB) DecideProposal(ctx context.Context, d store.ProposalDecision) error {
	if err := d.Check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE command_proposals SET status = $1, decided_by = $2, decided_at = $3, reason = $4, result = $5
		WHERE id = $6 AND status = $7`,
		d.To, d.DecidedBy, optTime(d.DecidedAt), d.Reason, string(d.Result), d.ID, d.From)
	if err != nil {
		return fmt.Errorf("decide proposal: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.Proposal(ctx, d.ID); err != nil {
		return err
	}
	return store.ErrConflict
}

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Kinds of a command proposal.
const (
	// ProposalSpawn asks to start a Run from an inline command template.
	ProposalSpawn = "spawn"
	// ProposalTool asks to register (or replace) a persistent tool.
	ProposalTool = "tool"
)

// Statuses of a command proposal. A proposal is decided once: pending
// becomes approved or declined. A declined proposal never changes again; an
// approved one may record its result (approved to approved) or, when the
// approval could not be carried out, go back to pending.
const (
	ProposalPending  = "pending"
	ProposalApproved = "approved"
	ProposalDeclined = "declined"
)

// Proposal is a command an agent asked to run, or a tool it asked to
// register, kept until a person decides. Everything the person is shown is
// recorded here when the proposal is filed, and approval applies exactly
// this record.
type Proposal struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // spawn or tool
	// ProposerID is the principal that asked; it owns what approval makes.
	ProposerID string `json:"proposer_id"`
	// SupervisorID is the person who may decide; empty means any person.
	SupervisorID string `json:"supervisor_id,omitempty"`
	// Target is the Run id (spawn) or the tool name (tool).
	Target string `json:"target"`
	// Recipe is the exact Recipe JSON that would run.
	Recipe json.RawMessage `json:"recipe"`
	// Script is the exact shell script that would run (for a tool, with
	// the caller's {placeholders} still in place).
	Script string `json:"script"`
	// WorkDir is the process's working directory.
	WorkDir string `json:"work_dir"`
	// EnvNames are the names of the environment variables the process
	// gets from the runtime.
	EnvNames []string `json:"env_names"`
	// Controls are the Control actions the Recipe declares.
	Controls []string `json:"controls"`
	// Values are the spawn values (or the tool's defaults), as given.
	Values map[string]json.RawMessage `json:"values,omitempty"`
	// Request holds the rest of the request, kind-specific (artifacts of
	// a spawn; expose and update of a tool).
	Request json.RawMessage `json:"request,omitempty"`
	// Why is the proposer's reason for asking, in its own words, as the
	// person is shown it; empty when it gave none.
	Why string `json:"why,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	Status    string    `json:"status"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// Reason is the person's reason for a decline, or why an approval
	// could not be carried out.
	Reason string `json:"reason,omitempty"`
	// Result is what approval produced (the Run's view, the tool's
	// registration).
	Result json.RawMessage `json:"result,omitempty"`
}

// Check reports whether p may be filed: it needs an id, a known kind and a
// proposer, and is filed pending (an empty Status means pending). The error
// wraps ErrInvalid.
func (p Proposal) Check() error {
	switch {
	case p.ID == "":
		return fmt.Errorf("%w: a proposal needs an id", ErrInvalid)
	case p.Kind != ProposalSpawn && p.Kind != ProposalTool:
		return fmt.Errorf("%w: proposal kind %q is not one of spawn, tool", ErrInvalid, p.Kind)
	case p.ProposerID == "":
		return fmt.Errorf("%w: proposal %s needs a proposer", ErrInvalid, p.ID)
	case p.Status != "" && p.Status != ProposalPending:
		return fmt.Errorf("%w: proposal %s is filed pending, not %s", ErrInvalid, p.ID, p.Status)
	}
	return nil
}

// ProposalMove reports whether a proposal may move from status from to
// status to: pending to approved or declined, approved to approved (to
// record the result) or back to pending (the approval could not be carried
// out). Nothing leaves declined.
func ProposalMove(from, to string) bool {
	switch from {
	case ProposalPending:
		return to == ProposalApproved || to == ProposalDeclined
	case ProposalApproved:
		return to == ProposalApproved || to == ProposalPending
	}
	return false
}

// ProposalDecision moves a proposal from one status to another.
type ProposalDecision struct {
	ID string
	// From is the status the proposal must have; otherwise ErrConflict.
	From      string
	To        string
	DecidedBy string
	DecidedAt time.Time
	Reason    string
	Result    json.RawMessage
}

// Check reports whether d is a legal move (see ProposalMove). The error
// wraps ErrInvalid.
func (d ProposalDecision) Check() error {
	if !ProposalMove(d.From, d.To) {
		return fmt.Errorf("%w: proposal %s cannot move from %q to %q", ErrInvalid, d.ID, d.From, d.To)
	}
	return nil
}

// Proposals keeps command proposals.
type Proposals interface {
	// CreateProposal stores p as pending; an existing id gives
	// ErrConflict, a p that fails Check ErrInvalid.
	CreateProposal(ctx context.Context, p Proposal) error
	// Proposal returns the proposal with id, or ErrNotFound.
	Proposal(ctx context.Context, id string) (Proposal, error)
	// ListProposals returns the proposals with status (every one when
	// empty) filed by proposerID (anyone's when empty), oldest first, at
	// most limit (all when not positive).
	ListProposals(ctx context.Context, status, proposerID string, limit int) ([]Proposal, error)
	// DecideProposal applies d atomically: the status moves only when it
	// is d.From, otherwise ErrConflict (ErrNotFound for an unknown id). A
	// d that fails Check gives ErrInvalid and changes nothing.
	DecideProposal(ctx context.Context, d ProposalDecision) error
}

// proposalDoc is the recorded request of a proposal as backends store it:
// one JSON document, written once when the proposal is filed.
type proposalDoc struct {
	Recipe   json.RawMessage            `json:"recipe"`
	Script   string                     `json:"script"`
	WorkDir  string                     `json:"work_dir"`
	EnvNames []string                   `json:"env_names"`
	Controls []string                   `json:"controls"`
	Values   map[string]json.RawMessage `json:"values,omitempty"`
	Request  json.RawMessage            `json:"request,omitempty"`
	Why      string                     `json:"why,omitempty"`
}

// Document returns the JSON document in which a backend stores p's
// recorded request: its recipe, script, working directory, environment
// names, Control actions, values, request and the proposer's reason.
func (p Proposal) Document() ([]byte, error) {
	return json.Marshal(proposalDoc{Recipe: p.Recipe, Script: p.Script, WorkDir: p.WorkDir, EnvNames: p.EnvNames,
		Controls: p.Controls, Values: p.Values, Request: p.Request, Why: p.Why})
}

// SetDocument fills p's recorded request from doc, a document Document
// wrote. A document that does not decode is reported as a damaged record.
func (p *Proposal) SetDocument(doc []byte) error {
	var d proposalDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return fmt.Errorf("proposal %s: damaged record: %w", p.ID, err)
	}
	p.Recipe, p.Script, p.WorkDir, p.EnvNames, p.Controls, p.Values, p.Request, p.Why =
		d.Recipe, d.Script, d.WorkDir, d.EnvNames, d.Controls, d.Values, d.Request, d.Why
	return nil
}

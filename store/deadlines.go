package store

import (
	"context"
	"fmt"
	"time"
)

// Kinds of decision a stored deadline belongs to.
const (
	// DeadlineCommandProposal is an agent's command or tool proposal; the
	// item is the proposal's id.
	DeadlineCommandProposal = "command_proposal"
	// DeadlineControlProposal is a value an agent staged on a control; the
	// item is "<control identity>@<revision>".
	DeadlineControlProposal = "control_proposal"
	// DeadlineProgramProposal is an agent's proposal to load a Flow
	// program; the item is the program's fingerprint.
	DeadlineProgramProposal = "program_proposal"
)

// DecisionDeadline is when a decision that waits for a person ends
// without one. The item's own record decides whether it is still open:
// the part that owns the kind ends it once, by its own compare-and-set,
// and then removes the deadline.
type DecisionDeadline struct {
	Kind      string    `json:"kind"`
	Item      string    `json:"item"`
	Due       time.Time `json:"due"`
	CreatedAt time.Time `json:"created_at"`
	// EscalateTo, when set, is the group the decision is routed to at its
	// first deadline; it then has as long again before it ends.
	EscalateTo string `json:"escalate_to,omitempty"`
	// Stage counts the deadlines already passed: 1 once the decision was
	// escalated. AdvanceDeadline moves it on once across every node.
	Stage int `json:"stage,omitempty"`
}

// Escalated reports whether the decision was routed to its EscalateTo
// group at its first deadline.
func (d DecisionDeadline) Escalated() bool { return d.EscalateTo != "" && d.Stage > 0 }

// Check reports whether d may be stored: it needs a kind, an item and a
// due time. The error wraps ErrInvalid.
func (d DecisionDeadline) Check() error {
	switch {
	case d.Kind == "" || len(d.Kind) > 64:
		return fmt.Errorf("%w: a deadline needs a kind of at most 64 bytes", ErrInvalid)
	case d.Item == "" || len(d.Item) > 1024:
		return fmt.Errorf("%w: a deadline needs an item of at most 1024 bytes", ErrInvalid)
	case len(d.EscalateTo) > 256:
		return fmt.Errorf("%w: a deadline's escalation group is at most 256 bytes", ErrInvalid)
	case d.Stage < 0:
		return fmt.Errorf("%w: deadline of %s %s has a negative stage", ErrInvalid, d.Kind, d.Item)
	case d.Due.IsZero():
		return fmt.Errorf("%w: deadline of %s %s has no due time", ErrInvalid, d.Kind, d.Item)
	}
	return nil
}

// Deadlines keeps the deadlines of decisions, so that they survive
// restarts and every node sharing the store sees them.
type Deadlines interface {
	// SetDeadline stores d, replacing the deadline of the same kind and
	// item. A d that fails Check gives ErrInvalid.
	SetDeadline(ctx context.Context, d DecisionDeadline) error
	// Deadline returns the deadline of kind and item, or ErrNotFound.
	Deadline(ctx context.Context, kind, item string) (DecisionDeadline, error)
	// DueDeadlines returns at most limit deadlines of kind (every kind
	// when empty) due at or before before, earliest first.
	DueDeadlines(ctx context.Context, kind string, before time.Time, limit int) ([]DecisionDeadline, error)
	// AdvanceDeadline moves the deadline of kind and item from stage to
	// stage+1 with the new due time, as one compare-and-set: ErrConflict
	// when its stage is no longer stage (another node moved it first),
	// ErrNotFound when it is gone.
	AdvanceDeadline(ctx context.Context, kind, item string, stage int, due time.Time) error
	// DeleteDeadline removes the deadline of kind and item; removing one
	// that is not there is not an error.
	DeleteDeadline(ctx context.Context, kind, item string) error
}

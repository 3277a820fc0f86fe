package host

import (
	"context"
	"encoding/json"

	"github.com/assent-run/assent/store"
)

// Decision makes an inbox card decidable as JSON through /v1/inbox, by the
// same function the card's buttons reach.
type Decision struct {
	// Key names the item whatever it shows ("control_proposal:<control>");
	// Binding names what the card shows of it now (a revision). The item's
	// id is Key@Binding, so a decision sent for an older card finds the
	// key with another binding and is refused as stale.
	Key, Binding string
	// Kind is the api.InboxItem kind.
	Kind string
	// Bound is what approving binds, by name.
	Bound map[string]string
	// ProposedBy is the principal id of who filed the item.
	ProposedBy string
	// DeclineNote says that a decline's note reaches who filed the item
	// (as its reason); a note is refused where it would not.
	DeclineNote bool
	// Editable names the values a person may change before approving.
	Editable []string
	// Decide carries out the decision on exactly what the card shows (or
	// on the person's edits of it), and returns a sentence for the person
	// saying what happened.
	Decide func(ctx context.Context, p store.Principal, d DecideArgs) (string, error)
}

// DecideArgs is a person's decision on an inbox card.
type DecideArgs struct {
	// Approve is true to approve, false to decline.
	Approve bool
	// Note is the person's text to the agent: a decline's reason.
	Note string
	// Values are the person's edits, by the names Editable lists; only
	// with Approve.
	Values map[string]json.RawMessage
}

// ID returns the item's id: Key@Binding.
func (d *Decision) ID() string { return d.Key + "@" + d.Binding }

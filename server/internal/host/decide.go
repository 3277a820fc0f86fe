package host

import (
	"context"

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
	// Decide carries out approve (true) or decline (false, with the
	// person's note as its reason) on exactly what the card shows, and
	// returns a sentence for the person saying what happened.
	Decide func(ctx context.Context, p store.Principal, approve bool, note string) (string, error)
}

// ID returns the item's id: Key@Binding.
func (d *Decision) ID() string { return d.Key + "@" + d.Binding }

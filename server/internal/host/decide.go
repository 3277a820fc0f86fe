package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

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
	// Needs is how many more people must approve; 0 means one, the
	// person deciding.
	Needs int
	// AlreadyApproved says that the person the card is for approved the
	// item already, which needs more people: they may only decline it.
	AlreadyApproved bool
	// Group is the group the item is routed to, when it names one;
	// otherwise it goes to the supervisors of ProposedBy (see package
	// route).
	Group string
	// AskedOf and NotRouted are set by RouteItems: to whom the item
	// went, as the card says it, and, when the reader is not one of
	// them, the refusal of their decision.
	AskedOf   string
	NotRouted error
	// DeclineNote says that a decline's note reaches who filed the item
	// (as its reason); a note is refused where it would not.
	DeclineNote bool
	// Edits are the values a person may change before approving, as the
	// card's Edit form shows them.
	Edits []EditField
	// Rule, when set, is what a standing rule made from the card is
	// about: approving may also create one (see server/rules).
	Rule *RuleTarget
	// Decide carries out the decision on exactly what the card shows (or
	// on the person's edits of it), and returns a sentence for the person
	// saying what happened.
	Decide func(ctx context.Context, p store.Principal, d DecideArgs) (string, error)
}

// RuleTarget is the control and value of a card from which a person may
// make a standing rule for the agent that proposed it.
type RuleTarget struct {
	FormID, ControlID      string
	SubjectType, SubjectID string
	// Value is the proposed value, as JSON: the rule's allowed value when
	// the person gives no other bound.
	Value json.RawMessage
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

// EditField is one value a person may change before approving.
type EditField struct {
	// Name is the value's name in DecideArgs.Values ("value").
	Name, Label string
	// Kind is how the form asks for it and how its text becomes JSON:
	// text (a string), number, boolean or select (a string of Options).
	Kind string
	// Value is the proposed value as text.
	Value   string
	Options []EditOption
	// Unit, when set, is the value's unit, shown beside it.
	Unit string
}

// EditOption is one choice of a select EditField.
type EditOption struct{ Value, Label string }

// Editable returns the names of d's edits.
func (d *Decision) Editable() []string {
	var out []string
	for _, e := range d.Edits {
		out = append(out, e.Name)
	}
	return out
}

// EditJSON converts the text a person typed into the edit field name to
// the JSON value it stands for, or reports why it cannot.
func (d *Decision) EditJSON(name, text string) (json.RawMessage, error) {
	for _, e := range d.Edits {
		if e.Name != name {
			continue
		}
		switch e.Kind {
		case "number":
			f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("%s must be a number", e.Label)
			}
			return json.Marshal(f)
		case "boolean":
			b, err := strconv.ParseBool(text)
			if err != nil {
				return nil, fmt.Errorf("%s must be yes or no", e.Label)
			}
			return json.Marshal(b)
		}
		return json.Marshal(text)
	}
	return nil, fmt.Errorf("this item has no value %q to change", name)
}

// Anchor returns the element id of the item's card on the inbox page.
func (d *Decision) Anchor() string {
	h := sha256.Sum256([]byte(d.Key))
	return "card-" + hex.EncodeToString(h[:8])
}

// ID returns the item's id: Key@Binding.
func (d *Decision) ID() string { return d.Key + "@" + d.Binding }

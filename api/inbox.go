package api

import (
	"encoding/json"

	"github.com/assent-run/assent/wire"
)

// Decisions a person makes on an inbox item.
const (
	DecisionApprove = "approve"
	DecisionDecline = "decline"
	DecisionRespond = "respond"
)

// Inbox is the answer of GET /v1/inbox: the decisions waiting for the
// signed-in person, of every kind, in the order the inbox page shows them.
type Inbox struct {
	Items []InboxItem `json:"items"`
}

// InboxItem is one decision waiting for a person, with what its card
// shows. ID names the item together with what the card showed (a
// revision, or the item's own id when nothing about it can change): a
// decision sent with an ID whose item has changed since is refused as
// stale.
type InboxItem struct {
	ID string `json:"id"`
	// Kind is control_proposal, flow_approval, flow_program,
	// command_proposal or screen_press.
	Kind  string `json:"kind"`
	Title string `json:"title"`
	// Summary is the card's first line, the decision in a person's words.
	Summary string `json:"summary,omitempty"`
	// Bound is what approving binds, by name: the values, revision and
	// targets that approving carries out exactly as shown.
	Bound map[string]string `json:"bound"`
	// Needs is how many more people must approve.
	Needs int `json:"needs"`
	// ProposedBy is the principal id of who filed the item.
	ProposedBy string `json:"proposed_by,omitempty"`
	// Why is the proposer's own reason for asking, as it wrote it.
	Why string `json:"why,omitempty"`
	// AskedOf says to whom the item is routed: "Asked of: Ada, Ben" or
	// "Asked of group finance".
	AskedOf string `json:"asked_of,omitempty"`
	// Fields are the card's labelled lines.
	Fields []InboxField `json:"fields,omitempty"`
	// Note and Warn are the card's explanation and warning.
	Note string `json:"note,omitempty"`
	Warn string `json:"warn,omitempty"`
	// Decisions are the decisions the item takes.
	Decisions []string `json:"decisions"`
	// Editable names the values a person may change before approving.
	Editable []string `json:"editable,omitempty"`
	// Link is a page with more about the item.
	Link string `json:"link,omitempty"`
}

// InboxField is one labelled line of an inbox card.
type InboxField struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// InboxDecision is the body of POST /v1/inbox/{id}/decision: a person's
// decision on one inbox item. Values, with approve, are the person's edits
// of what the item proposes, by the names its Editable lists (a control
// proposal's "value"): approving binds them instead, checked by the rules
// that checked the proposal. Note is a text for the agent: the reason of a
// decline.
type InboxDecision struct {
	Decision string                     `json:"decision" enum:"approve,decline,respond"`
	Values   map[string]json.RawMessage `json:"values,omitempty"`
	Note     string                     `json:"note,omitempty" maxLength:"2000"`
	// Rule, with approve on a control proposal, also makes a standing
	// rule for the agent that proposed it (see POST /v1/rules).
	Rule *RuleRequest `json:"rule,omitempty"`
}

// InboxBatch is the body of POST /v1/inbox/decisions: several decisions
// at once, each bound to the item id its card showed and carried out on
// its own.
type InboxBatch struct {
	Items []InboxBatchItem `json:"items" minItems:"1" maxItems:"100"`
}

// InboxBatchItem is one decision of a batch.
type InboxBatchItem struct {
	ID string `json:"id" maxLength:"400"`
	InboxDecision
}

// InboxOutcome is what became of one decision: Status is approved,
// declined, or refused with Error saying why (stale when the item changed
// since its card was read, not_found when it is no longer waiting).
type InboxOutcome struct {
	ID       string      `json:"id"`
	Decision string      `json:"decision"`
	Status   string      `json:"status"`
	Message  string      `json:"message,omitempty"`
	Error    *wire.Error `json:"error,omitempty"`
	// Rule is the id of the standing rule the decision made.
	Rule string `json:"rule,omitempty"`
}

// InboxBatchOutcome is the answer of POST /v1/inbox/decisions: one
// outcome per item, in the order sent.
type InboxBatchOutcome struct {
	Items []InboxOutcome `json:"items"`
}

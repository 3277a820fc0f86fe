// Package notify is the model of assent's notifications: the message that
// tells a person a decision waits for them, the schedule on which a failed
// delivery is tried again, and the signature of an outgoing webhook as the
// Standard Webhooks specification defines it (headers webhook-id,
// webhook-timestamp and webhook-signature, an HMAC-SHA256 over
// "id.timestamp.body" with a "whsec_" secret).
//
// The package is pure: it sends nothing and stores nothing. The server's
// notify part writes messages to the store's outbox and delivers them.
package notify

import (
	"fmt"
	"strings"
	"time"
)

// Kinds of item a message announces.
const (
	// KindRunProposal is a command or tool proposal an agent filed.
	KindRunProposal = "run.proposal"
	// KindFlowApproval is an approval request a Flow filed.
	KindFlowApproval = "flow.approval"
	// KindControlProposal is a value an agent staged on a control.
	KindControlProposal = "control.proposal"
	// KindQuestion is a question an agent asked with approvals_request.
	KindQuestion = "question"
	// KindDecisionEscalated announces, to the group it escalated to, a
	// decision nobody made before its first deadline; its id is the
	// decision's own key (kind:id).
	KindDecisionEscalated = "decision.escalated"
)

// Item is a decision that waits for a person, as a message tells it.
type Item struct {
	// Kind is what the item is (KindRunProposal, KindFlowApproval,
	// KindControlProposal).
	Kind string `json:"kind"`
	// ID is the item's own id (a proposal's, an approval's).
	ID string `json:"id"`
	// Title is the decision's short title; a mail's subject starts with it.
	Title string `json:"title"`
	// Summary is the decision in full: what is asked, with every value.
	Summary string `json:"summary"`
	// Agent names the principal that asked.
	Agent string `json:"agent"`
	// For names the people the decision is routed to.
	For []string `json:"for,omitempty"`
	// Group names the group the decision is routed to, when it names one.
	Group string `json:"group,omitempty"`
	// URL is the card's address.
	URL string `json:"url"`
	// CreatedAt is when the item was filed.
	CreatedAt time.Time `json:"created_at"`
	// Deadline, when set, is when the decision ends without a person:
	// it escalates or takes its fallback.
	Deadline time.Time `json:"deadline,omitzero"`
}

// Key returns the item's stable key: its kind and id. Every message about
// one item shares it, so an item is announced once per destination.
func (it Item) Key() string { return it.Kind + ":" + it.ID }

// Check reports whether it can be announced: it needs a kind, an id and a
// title.
func (it Item) Check() error {
	switch {
	case it.Kind == "":
		return fmt.Errorf("notify: an item needs a kind")
	case it.ID == "":
		return fmt.Errorf("notify: item of kind %s needs an id", it.Kind)
	case strings.TrimSpace(it.Title) == "":
		return fmt.Errorf("notify: item %s needs a title", it.Key())
	}
	return nil
}

// Text returns the message's plain text: what is asked, by whom, for whom,
// and the card's address.
func (it Item) Text() string {
	var b strings.Builder
	b.WriteString(it.Title)
	b.WriteString("\n\n")
	if it.Summary != "" {
		b.WriteString(it.Summary)
		b.WriteString("\n\n")
	}
	if it.Agent != "" {
		fmt.Fprintf(&b, "Asked by: %s\n", it.Agent)
	}
	if it.Group != "" {
		fmt.Fprintf(&b, "Asked of group %s\n", it.Group)
	}
	if len(it.For) > 0 {
		fmt.Fprintf(&b, "For: %s\n", strings.Join(it.For, ", "))
	}
	if it.URL != "" {
		fmt.Fprintf(&b, "Decide: %s\n", it.URL)
	}
	return b.String()
}

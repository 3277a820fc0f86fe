package api

import (
	"encoding/json"
	"time"

	"github.com/assent-run/assent/store"
)

// RuleRequest is the body of POST /v1/rules, and the "rule" of an inbox
// decision that approves a control proposal and makes a standing rule
// from it: allow the agent to set the control to one of Values, or to a
// number within Min and Max, until Until (RFC 3339, at most 90 days
// ahead). From a card, Agent and Control may be left out (they are the
// card's) and so may the bounds (the card's value is then the one value
// allowed).
type RuleRequest struct {
	// Agent is the principal id of the agent the rule lets through.
	Agent   string       `json:"agent,omitempty" maxLength:"200"`
	Control *RuleControl `json:"control,omitempty"`
	// Values are the allowed values, as JSON values.
	Values []json.RawMessage `json:"values,omitempty" maxItems:"50"`
	Min    *float64          `json:"min,omitempty"`
	Max    *float64          `json:"max,omitempty"`
	Until  time.Time         `json:"until"`
}

// RuleControl names the control a rule is about, and the record it is
// about when the control has a subject.
type RuleControl struct {
	FormID    string       `json:"formId" maxLength:"200"`
	ControlID string       `json:"controlId" maxLength:"200"`
	Subject   *RuleSubject `json:"subject,omitempty"`
}

// RuleSubject is the record a rule's control is about.
type RuleSubject struct {
	Type string `json:"type" maxLength:"200"`
	ID   string `json:"id" maxLength:"200"`
}

// RuleList is the answer of GET /v1/rules: the signed-in person's rules
// (every rule for the workspace's owner), newest first, with whether each
// is live now.
type RuleList struct {
	Rules []RuleView `json:"rules"`
}

// RuleView is a standing rule as the API shows it.
type RuleView struct {
	store.Rule
	// Live is true while the rule is neither revoked nor expired.
	Live bool `json:"live"`
}

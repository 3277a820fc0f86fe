package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/assent-run/assent/control"
)

// RuleMaxDuration is the longest a standing rule may last: its Until is at
// most this long after it is created. A person renews a rule by creating
// it again.
const RuleMaxDuration = 90 * 24 * time.Hour

// RuleMaxValues bounds the allowed values of one rule, and RuleMaxValueBytes
// the size of each.
const (
	RuleMaxValues     = 50
	RuleMaxValueBytes = 1024
)

// Rule is a standing rule: a person's "allow this agent to make this kind
// of change to this control, within these bounds, until this time". A
// value the agent stages that the rule covers is applied in the person's
// name without asking them again, as long as they may still apply it
// themselves. A rule bounds the value either by a list of allowed values
// or by a numeric range (Min, Max, either open), never both.
type Rule struct {
	ID string `json:"id"`
	// CreatedBy is the person who made the rule; applies happen in their
	// name.
	CreatedBy string `json:"created_by"`
	// AgentID is the principal whose staged values the rule covers.
	AgentID   string `json:"agent"`
	FormID    string `json:"formId"`
	ControlID string `json:"controlId"`
	// SubjectType and SubjectID name the record the control is about; both
	// empty for a control without a subject. A rule covers exactly the
	// subject it names.
	SubjectType string `json:"subjectType,omitempty"`
	SubjectID   string `json:"subjectId,omitempty"`
	// Values are the allowed values, as JSON; empty when Min or Max bound
	// the value instead.
	Values []json.RawMessage `json:"values,omitempty"`
	Min    *float64          `json:"min,omitempty"`
	Max    *float64          `json:"max,omitempty"`
	// Until is when the rule stops covering anything.
	Until     time.Time `json:"until"`
	CreatedAt time.Time `json:"created_at"`
	// RevokedAt and RevokedBy are set once the rule is revoked.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	RevokedBy string    `json:"revoked_by,omitempty"`
}

// Check reports whether r may be stored: it needs an id, a creator, an
// agent and a control, exactly one kind of bound (1 to RuleMaxValues
// values of JSON, each at most RuleMaxValueBytes, or a Min or Max that is
// a finite number with Min not above Max), and an Until after CreatedAt
// by at most RuleMaxDuration. The error wraps ErrInvalid.
func (r Rule) Check() error {
	bounded := r.Min != nil || r.Max != nil
	switch {
	case r.ID == "" || r.CreatedBy == "" || r.AgentID == "":
		return fmt.Errorf("%w: a rule needs an id, a creator and an agent", ErrInvalid)
	case r.FormID == "" || r.ControlID == "":
		return fmt.Errorf("%w: a rule needs a form id and a control id", ErrInvalid)
	case (r.SubjectType == "") != (r.SubjectID == ""):
		return fmt.Errorf("%w: a rule's subject needs both a type and an id", ErrInvalid)
	case len(r.Values) == 0 && !bounded:
		return fmt.Errorf("%w: a rule needs allowed values or a min or max", ErrInvalid)
	case len(r.Values) > 0 && bounded:
		return fmt.Errorf("%w: a rule has allowed values or a min and max, not both", ErrInvalid)
	case len(r.Values) > RuleMaxValues:
		return fmt.Errorf("%w: a rule allows at most %d values", ErrInvalid, RuleMaxValues)
	case r.CreatedAt.IsZero() || !r.Until.After(r.CreatedAt):
		return fmt.Errorf("%w: a rule's until must be after its creation", ErrInvalid)
	case r.Until.Sub(r.CreatedAt) > RuleMaxDuration:
		return fmt.Errorf("%w: a rule lasts at most %d days", ErrInvalid, int(RuleMaxDuration/(24*time.Hour)))
	case !r.RevokedAt.IsZero() || r.RevokedBy != "":
		return fmt.Errorf("%w: a rule is stored unrevoked", ErrInvalid)
	}
	for _, v := range r.Values {
		if len(v) > RuleMaxValueBytes || !json.Valid(v) {
			return fmt.Errorf("%w: each allowed value is JSON of at most %d bytes", ErrInvalid, RuleMaxValueBytes)
		}
	}
	for _, b := range []*float64{r.Min, r.Max} {
		if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
			return fmt.Errorf("%w: a rule's min and max are finite numbers", ErrInvalid)
		}
	}
	if r.Min != nil && r.Max != nil && *r.Min > *r.Max {
		return fmt.Errorf("%w: a rule's min is above its max", ErrInvalid)
	}
	return nil
}

// Live reports whether r covers anything at now: it is not revoked and
// now is before Until.
func (r Rule) Live(now time.Time) bool {
	return r.RevokedAt.IsZero() && now.Before(r.Until)
}

// Key returns the control key r is about.
func (r Rule) Key() control.Key {
	return ControlKey(r.FormID, r.ControlID, r.SubjectType, r.SubjectID)
}

// Allows reports whether the value v (as JSON) is within r's bounds: one
// of its values, or a number within Min and Max. It does not look at who
// staged it or when; see Live.
func (r Rule) Allows(v json.RawMessage) bool {
	if len(r.Values) > 0 {
		for _, a := range r.Values {
			if control.EqualJSON(a, v) {
				return true
			}
		}
		return false
	}
	var n float64
	if err := json.Unmarshal(v, &n); err != nil {
		return false
	}
	return (r.Min == nil || n >= *r.Min) && (r.Max == nil || n <= *r.Max)
}

// RuleFilter selects rules. Zero fields match everything.
type RuleFilter struct {
	// CreatedBy selects the rules one person made.
	CreatedBy string
	// AgentID selects the rules about one agent.
	AgentID string
	// LiveAt, when set, selects the rules live at that time.
	LiveAt time.Time
}

// Rules keeps standing rules. Creating and revoking a rule appends its
// audit record in the same transaction, so neither happens unrecorded.
type Rules interface {
	// CreateRule stores r and appends rec to the audit log, both or
	// neither. An existing id gives ErrConflict, an r that fails Check
	// ErrInvalid.
	CreateRule(ctx context.Context, r Rule, rec AuditRecord) error
	// Rule returns the rule with id, revoked or not, or ErrNotFound.
	Rule(ctx context.Context, id string) (Rule, error)
	// ListRules returns the rules f selects, oldest first.
	ListRules(ctx context.Context, f RuleFilter) ([]Rule, error)
	// RevokeRule marks the rule id revoked by by at at and appends rec to
	// the audit log, both or neither. An unknown id gives ErrNotFound, a
	// rule already revoked ErrConflict.
	RevokeRule(ctx context.Context, id, by string, at time.Time, rec AuditRecord) error
}

// RuleDocument returns the JSON document in which a backend stores r's
// bounds.
func (r Rule) RuleDocument() ([]byte, error) {
	return json.Marshal(ruleBounds{Values: r.Values, Min: r.Min, Max: r.Max})
}

// SetRuleDocument fills r's bounds from doc, a document RuleDocument
// wrote. A document that does not decode is reported as a damaged record.
func (r *Rule) SetRuleDocument(doc []byte) error {
	var b ruleBounds
	if err := json.Unmarshal(doc, &b); err != nil {
		return fmt.Errorf("rule %s: damaged record: %w", r.ID, err)
	}
	r.Values, r.Min, r.Max = b.Values, b.Min, b.Max
	return nil
}

// ruleBounds is a rule's bounds as backends store them.
type ruleBounds struct {
	Values []json.RawMessage `json:"values,omitempty"`
	Min    *float64          `json:"min,omitempty"`
	Max    *float64          `json:"max,omitempty"`
}

package control

import (
	"context"
	"fmt"
)

// Action is a command a control can be asked to perform.
type Action string

// The nine actions of the contract, plus discard.
const (
	// Focus moves keyboard focus to the control.
	Focus Action = "focus"
	// Reveal scrolls the control into view.
	Reveal Action = "reveal"
	// Highlight draws attention to the control for a while.
	Highlight Action = "highlight"
	// Explain returns the control's snapshot and does nothing else.
	Explain Action = "explain"
	// Validate asks the control to check and show its validity.
	Validate Action = "validate"
	// Stage stores a proposed value without changing the control.
	Stage Action = "stage"
	// Apply writes the command's value, or the staged one, to the control.
	Apply Action = "apply"
	// Clear empties the control.
	Clear Action = "clear"
	// Undo restores the value an apply or clear replaced.
	Undo Action = "undo"
	// Discard drops the staged proposal without changing the control.
	Discard Action = "discard"
)

// Actions returns every action in its documented order.
func Actions() []Action {
	return []Action{Focus, Reveal, Highlight, Explain, Validate, Stage, Apply, Clear, Undo, Discard}
}

// Valid reports whether a is a known action.
func (a Action) Valid() bool {
	switch a {
	case Focus, Reveal, Highlight, Explain, Validate, Stage, Apply, Clear, Undo, Discard:
		return true
	}
	return false
}

// IsMutation reports whether a changes the control's value or its staged
// proposal. Only mutations go through the default policy.
func (a Action) IsMutation() bool {
	switch a {
	case Stage, Apply, Clear, Undo, Discard:
		return true
	}
	return false
}

// Source says who or what issued a command. The runtime sets it from the
// transport that carried the request, never from the request itself.
type Source string

// Command sources.
const (
	SourceUser     Source = "user"
	SourceVoice    Source = "voice"
	SourceAgent    Source = "agent"
	SourceTutorial Source = "tutorial"
	SourceTest     Source = "test"
)

// Valid reports whether s is one of the five sources.
func (s Source) Valid() bool {
	switch s {
	case SourceUser, SourceVoice, SourceAgent, SourceTutorial, SourceTest:
		return true
	}
	return false
}

// MaxHighlightMs is the longest highlight a command may ask for.
const MaxHighlightMs = 60000

// Command asks one control to perform one action.
type Command struct {
	Action   Action   `json:"action"`
	Identity Identity `json:"identity"`
	// Value is the value to stage, or for apply the value to write instead
	// of the staged one. For apply, nil means "use the staged value"; to apply
	// null, stage it first. Either is checked against the control's kind, options
	// and constraints (invalid_value).
	Value any `json:"value,omitempty"`
	// DurationMs is how long a highlight lasts, 0 to MaxHighlightMs; 0
	// leaves the choice to the control.
	DurationMs int `json:"durationMs,omitempty"`
	// Revision, when not zero, is the revision of the proposal the issuer
	// saw. Apply and discard refuse with stale_revision when the staged
	// proposal is no longer that revision.
	Revision int64 `json:"revision,omitempty"`
	// Why is, for stage, the issuer's reason for proposing the value, in
	// its own words; it is kept with the proposal and shown to the person
	// who decides.
	Why string `json:"why,omitempty"`
}

// validate checks the shape of the command. It does not look the control up.
func (c *Command) validate() *Error {
	if !c.Action.Valid() {
		if c.Action == "" {
			return &Error{Reason: ReasonInvalidRequest, Message: "the command has no action; use focus, reveal, highlight, explain, validate, stage, apply, clear, undo or discard"}
		}
		return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("%q is not an action; use focus, reveal, highlight, explain, validate, stage, apply, clear, undo or discard", c.Action)}
	}
	if c.DurationMs < 0 || c.DurationMs > MaxHighlightMs {
		return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("durationMs %d is out of range; use 0 to %d", c.DurationMs, MaxHighlightMs)}
	}
	if c.Revision < 0 {
		return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("revision %d is negative; use the revision shown with the proposal", c.Revision)}
	}
	return nil
}

// CommandContext says who issued a command and whether a person confirmed
// it. The registry records PrincipalID and SessionID for correlation; it
// does not authenticate them.
//
// A context whose Source is empty is the default context: source user,
// confirmed.
type CommandContext struct {
	Source      Source `json:"source"`
	Confirmed   bool   `json:"confirmed"`
	PrincipalID string `json:"principalId,omitempty"`
	SessionID   string `json:"sessionId,omitempty"`
}

// normalize fills in the default context.
func (c CommandContext) normalize() CommandContext {
	if c.Source == "" {
		c.Source = SourceUser
		c.Confirmed = true
	}
	return c
}

// Reason is a stable, machine-readable code that says why a command was
// refused or failed. Reasons never change meaning; new ones may be added.
type Reason string

// Refusal and failure reasons.
const (
	// ReasonNotFound: no control is registered under the identity.
	ReasonNotFound Reason = "not_found"
	// ReasonUnsupported: the control lacks the capability for the action.
	ReasonUnsupported Reason = "unsupported"
	// ReasonSensitiveControl: the control is secret and cannot be changed
	// through the registry.
	ReasonSensitiveControl Reason = "sensitive_control"
	// ReasonNotWritable: the control is declared not writable.
	ReasonNotWritable Reason = "control_not_writable"
	// ReasonNotEditable: the control is disabled or read-only right now.
	ReasonNotEditable Reason = "control_not_editable"
	// ReasonHumanConfirmationRequired: an agent asked to apply, clear, undo
	// or discard; only a person may do that.
	ReasonHumanConfirmationRequired Reason = "human_confirmation_required"
	// ReasonConsentRequired: a non-agent source asked to change a value
	// without confirming it.
	ReasonConsentRequired Reason = "consent_required"
	// ReasonNoStagedValue: apply without a value, or discard, while nothing
	// is staged.
	ReasonNoStagedValue Reason = "no_staged_value"
	// ReasonNothingToUndo: the control's undo history is empty.
	ReasonNothingToUndo Reason = "nothing_to_undo"
	// ReasonDenied: the application's policy refused without a reason.
	ReasonDenied Reason = "denied"
	// ReasonCommandFailed: a control handle or the policy failed.
	ReasonCommandFailed Reason = "command_failed"
	// ReasonStaleRevision: the proposal changed since the revision given.
	ReasonStaleRevision Reason = "stale_revision"
	// ReasonStagedValueStale: the live value changed since it was staged, or
	// since the apply an undo would reverse.
	ReasonStagedValueStale Reason = "staged_value_stale"
	// ReasonInvalidRequest: the command or registration is malformed.
	ReasonInvalidRequest Reason = "invalid_request"
	// ReasonLimitExceeded: an identifier is longer than allowed.
	ReasonLimitExceeded Reason = "limit_exceeded"
	// ReasonInvalidValue: the value does not fit the control's kind,
	// options or constraints.
	ReasonInvalidValue Reason = "invalid_value"
)

// Error is an error with a stable [Reason] and a message for people.
type Error struct {
	Reason  Reason
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "control: " + string(e.Reason)
	}
	return "control: " + string(e.Reason) + ": " + e.Message
}

// Result is the outcome of [Registry.Execute]. Execute never returns an
// error: every refusal and failure is a Result with OK false and a Reason.
type Result struct {
	OK       bool     `json:"ok"`
	Action   Action   `json:"action"`
	Identity Identity `json:"identity"`
	// Snapshot is the control after the command, or before it when the
	// command was refused or failed. It is the zero Snapshot, left out of
	// the JSON form, only for not_found and invalid_request.
	Snapshot Snapshot `json:"snapshot,omitzero"`
	// Reason is empty when OK is true.
	Reason Reason `json:"reason,omitempty"`
	// Message explains a refusal and says what to do about it.
	Message string `json:"message,omitempty"`
}

// Decision is a policy's answer. A refusal without a Reason is reported as
// [ReasonDenied].
type Decision struct {
	Allowed bool
	Reason  Reason
	Message string
}

// Policy is an application's rule for commands. It runs after the default
// policy has allowed a command, so it can only refuse more. For a redacted
// control, the command's value and the snapshot's values are hidden from it.
// A policy must not call the registry that runs it.
type Policy func(ctx context.Context, cmd Command, cc CommandContext, snap Snapshot) Decision

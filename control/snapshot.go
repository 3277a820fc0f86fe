package control

import (
	"encoding/json"
	"time"
)

// Snapshot is a serializable picture of one control: its identity, its
// metadata (with the effective capabilities), its runtime state, its live
// value and, separately, the value staged for it.
//
// The slices and pointers of a snapshot's Metadata are shared with the
// registry and with other snapshots of the same registration: read them,
// do not modify them. (The registry's decisions never depend on them.)
type Snapshot struct {
	Identity Identity      `json:"identity"`
	Metadata Metadata      `json:"metadata"`
	State    SnapshotState `json:"state"`
}

// IsZero reports whether s is the zero Snapshot, which stands for no
// snapshot at all; a registered control's snapshot always has a form id.
func (s Snapshot) IsZero() bool { return s.Identity.FormID == "" }

// SnapshotState is the runtime state of a snapshot together with the live
// and staged values.
//
// When ValueRedacted is true (the control is secret or not readable, or its
// value could not be read) Value, StagedValue and ValidationMessage are
// empty and the JSON form leaves them out. Otherwise the JSON form always
// carries "value", even when it is null, and carries "stagedValue" whenever
// a proposal is staged.
type SnapshotState struct {
	State
	Value         any  `json:"value,omitempty"`
	ValueRedacted bool `json:"valueRedacted"`
	// StagedValue is the proposed value; meaningful only when Staged is not
	// nil.
	StagedValue any `json:"stagedValue,omitempty"`
	// StagedValueRedacted is true when a proposal is staged but its value is
	// hidden.
	StagedValueRedacted bool `json:"stagedValueRedacted,omitempty"`
	// Staged describes the open proposal, or is nil when nothing is staged.
	Staged *Proposal `json:"staged,omitempty"`
}

// Proposal describes a staged value: who proposed it, when, its revision
// and whether the live value has changed since.
type Proposal struct {
	// Revision identifies this proposal. Revisions increase with every
	// stage and are never reused within a registry.
	Revision   int64      `json:"revision"`
	Provenance Provenance `json:"provenance"`
	StagedAt   time.Time  `json:"stagedAt"`
	// Why is the proposer's reason for the value, as it gave it; empty
	// when it gave none.
	Why string `json:"why,omitempty"`
	// Stale is true when the live value differs from the value the control
	// had when this proposal was staged. A stale proposal cannot be applied;
	// stage it again or discard it.
	Stale bool `json:"stale"`
}

// Provenance records who issued a command.
type Provenance struct {
	Source      Source `json:"source"`
	PrincipalID string `json:"principalId,omitempty"`
	SessionID   string `json:"sessionId,omitempty"`
}

// MarshalJSON writes the state so that a redacted value is absent, and a
// visible value is present even when it is null.
func (s SnapshotState) MarshalJSON() ([]byte, error) {
	type wire struct {
		State
		Value               json.RawMessage `json:"value,omitempty"`
		ValueRedacted       bool            `json:"valueRedacted"`
		StagedValue         json.RawMessage `json:"stagedValue,omitempty"`
		StagedValueRedacted *bool           `json:"stagedValueRedacted,omitempty"`
		Staged              *Proposal       `json:"staged,omitempty"`
	}
	w := wire{State: s.State, ValueRedacted: s.ValueRedacted, Staged: s.Staged}
	if s.ValueRedacted {
		w.ValidationMessage = ""
	} else {
		b, err := json.Marshal(s.Value)
		if err != nil {
			return nil, err
		}
		w.Value = b
	}
	if s.Staged != nil {
		redacted := s.ValueRedacted || s.StagedValueRedacted
		w.StagedValueRedacted = &redacted
		if !redacted {
			b, err := json.Marshal(s.StagedValue)
			if err != nil {
				return nil, err
			}
			w.StagedValue = b
		}
	}
	return json.Marshal(w)
}

// Change is an applied change that undo can reverse: the newest entry of one
// control's undo history.
type Change struct {
	Identity Identity `json:"identity"`
	Label    string   `json:"label,omitempty"`
	// Action is apply or clear.
	Action Action `json:"action"`
	// Previous is the value undo would restore; Applied is the value the
	// change wrote. Both are absent when ValueRedacted is true.
	Previous      any        `json:"previous,omitempty"`
	Applied       any        `json:"applied,omitempty"`
	ValueRedacted bool       `json:"valueRedacted"`
	Provenance    Provenance `json:"provenance"`
	At            time.Time  `json:"at"`
	// Stale is true when the live value is no longer Applied, because
	// someone edited the control since; undo then refuses with
	// staged_value_stale.
	Stale bool `json:"stale"`
	// Depth is the number of changes held in the control's undo history,
	// this one included.
	Depth int `json:"depth"`
}

// MarshalJSON writes the change so that a redacted value is absent, and a
// visible value is present even when it is null.
func (c Change) MarshalJSON() ([]byte, error) {
	type plain Change
	type wire struct {
		plain
		Previous json.RawMessage `json:"previous,omitempty"`
		Applied  json.RawMessage `json:"applied,omitempty"`
	}
	w := wire{plain: plain(c)}
	if !c.ValueRedacted {
		var err error
		if w.Previous, err = json.Marshal(c.Previous); err != nil {
			return nil, err
		}
		if w.Applied, err = json.Marshal(c.Applied); err != nil {
			return nil, err
		}
	}
	return json.Marshal(w)
}

package control

import (
	"fmt"
	"slices"
)

// Kind is the kind of input a control is. The set is closed: registration
// refuses any other value.
type Kind string

// The 22 control kinds.
const (
	KindText             Kind = "text"
	KindEmail            Kind = "email"
	KindPassword         Kind = "password"
	KindNumber           Kind = "number"
	KindDate             Kind = "date"
	KindTime             Kind = "time"
	KindDatetime         Kind = "datetime"
	KindTextarea         Kind = "textarea"
	KindSelect           Kind = "select"
	KindListbox          Kind = "listbox"
	KindCombobox         Kind = "combobox"
	KindMultiSelect      Kind = "multi-select"
	KindTagsInput        Kind = "tags-input"
	KindCheckbox         Kind = "checkbox"
	KindRadioGroup       Kind = "radio-group"
	KindSwitch           Kind = "switch"
	KindToggleButton     Kind = "toggle-button"
	KindSlider           Kind = "slider"
	KindRangeSlider      Kind = "range-slider"
	KindSegmentedControl Kind = "segmented-control"
	KindFile             Kind = "file"
	KindCustom           Kind = "custom"
)

// Kinds returns every control kind in its documented order.
func Kinds() []Kind {
	return []Kind{
		KindText, KindEmail, KindPassword, KindNumber, KindDate, KindTime,
		KindDatetime, KindTextarea, KindSelect, KindListbox, KindCombobox,
		KindMultiSelect, KindTagsInput, KindCheckbox, KindRadioGroup, KindSwitch,
		KindToggleButton, KindSlider, KindRangeSlider, KindSegmentedControl,
		KindFile, KindCustom,
	}
}

// Valid reports whether k is one of the 22 kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindText, KindEmail, KindPassword, KindNumber, KindDate, KindTime,
		KindDatetime, KindTextarea, KindSelect, KindListbox, KindCombobox,
		KindMultiSelect, KindTagsInput, KindCheckbox, KindRadioGroup, KindSwitch,
		KindToggleButton, KindSlider, KindRangeSlider, KindSegmentedControl,
		KindFile, KindCustom:
		return true
	}
	return false
}

// Sensitivity classifies the data a control holds. Only [Secret] changes
// what the registry does: a secret control's value is never shown and it
// cannot be changed through the registry. The other levels describe the data
// for the application and its policy.
type Sensitivity string

// Sensitivity levels. An empty sensitivity is treated as [Public].
const (
	Public    Sensitivity = "public"
	Personal  Sensitivity = "personal"
	Sensitive Sensitivity = "sensitive"
	Secret    Sensitivity = "secret"
)

// Valid reports whether s is empty or one of the four levels.
func (s Sensitivity) Valid() bool {
	switch s {
	case "", Public, Personal, Sensitive, Secret:
		return true
	}
	return false
}

// Capability is something a control lets an adapter do with it. Every
// action has the capability of the same name; read permits showing the
// value.
type Capability string

// Capabilities.
const (
	CapRead      Capability = "read"
	CapFocus     Capability = "focus"
	CapReveal    Capability = "reveal"
	CapHighlight Capability = "highlight"
	CapExplain   Capability = "explain"
	CapValidate  Capability = "validate"
	CapStage     Capability = "stage"
	CapApply     Capability = "apply"
	CapClear     Capability = "clear"
	CapUndo      Capability = "undo"
	CapDiscard   Capability = "discard"
)

// capSet is a set of capabilities as a bit mask.
type capSet uint16

const (
	bitRead capSet = 1 << iota
	bitFocus
	bitReveal
	bitHighlight
	bitExplain
	bitValidate
	bitStage
	bitApply
	bitClear
	bitUndo
	bitDiscard
)

// secretMask holds the capabilities a secret control never has. Discard is
// among them because a secret control never holds a proposal.
const secretMask = bitRead | bitStage | bitApply | bitClear | bitUndo | bitDiscard

// capBit maps a capability to its bit, or to 0 for an unknown one.
func capBit(c Capability) capSet {
	switch c {
	case CapRead:
		return bitRead
	case CapFocus:
		return bitFocus
	case CapReveal:
		return bitReveal
	case CapHighlight:
		return bitHighlight
	case CapExplain:
		return bitExplain
	case CapValidate:
		return bitValidate
	case CapStage:
		return bitStage
	case CapApply:
		return bitApply
	case CapClear:
		return bitClear
	case CapUndo:
		return bitUndo
	case CapDiscard:
		return bitDiscard
	}
	return 0
}

func (s capSet) has(c Capability) bool { return s&capBit(c) != 0 }

// Option is one choice of a select-like control.
type Option struct {
	// Value is a string or a number.
	Value    any    `json:"value"`
	Label    string `json:"label"`
	Disabled bool   `json:"disabled,omitempty"`
}

// Constraints are the limits a control declares for its value. Min, Max and
// Step are numbers or strings (for dates and times).
type Constraints struct {
	Required  bool   `json:"required,omitempty"`
	Min       any    `json:"min,omitempty"`
	Max       any    `json:"max,omitempty"`
	Step      any    `json:"step,omitempty"`
	MinLength *int   `json:"minLength,omitempty"`
	MaxLength *int   `json:"maxLength,omitempty"`
	Pattern   string `json:"pattern,omitempty"`
}

// Metadata describes a control: what it is, how people call it and how
// sensitive its data is. It is serializable and never changes while the
// control is registered; register the control again to change it.
type Metadata struct {
	Kind        Kind        `json:"kind"`
	Label       string      `json:"label,omitempty"`
	Description string      `json:"description,omitempty"`
	Sensitivity Sensitivity `json:"sensitivity,omitempty"`
	// Readable set to false hides the value, as for a secret control. Nil
	// means readable.
	Readable *bool `json:"readable,omitempty"`
	// Writable set to false refuses every change. Nil means writable.
	Writable    *bool        `json:"writable,omitempty"`
	Options     []Option     `json:"options,omitempty"`
	Constraints *Constraints `json:"constraints,omitempty"`
	Unit        string       `json:"unit,omitempty"`
	// Capabilities, when not nil, replaces the list derived from the
	// control's handles. In a snapshot it is always the effective list.
	Capabilities []Capability `json:"capabilities,omitempty"`
}

// Bool returns a pointer to b, for [Metadata.Readable] and
// [Metadata.Writable].
func Bool(b bool) *bool { return &b }

// IsReadable reports whether the metadata allows showing the value.
func (m *Metadata) IsReadable() bool { return m.Readable == nil || *m.Readable }

// IsWritable reports whether the metadata allows changing the value.
func (m *Metadata) IsWritable() bool { return m.Writable == nil || *m.Writable }

// IsSecret reports whether the control is secret.
func (m *Metadata) IsSecret() bool { return m.Sensitivity == Secret }

// Redacted reports whether snapshots and events hide the control's value:
// true for a secret or non-readable control.
func (m *Metadata) Redacted() bool { return m.IsSecret() || !m.IsReadable() }

func (m *Metadata) validate() error {
	if !m.Kind.Valid() {
		if m.Kind == "" {
			return &Error{Reason: ReasonInvalidRequest, Message: "metadata.kind is missing; use one of the 22 control kinds, for example \"text\""}
		}
		return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("metadata.kind %q is not a control kind; use one of the 22 kinds, for example \"text\" or \"select\"", m.Kind)}
	}
	if !m.Sensitivity.Valid() {
		return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("metadata.sensitivity %q is unknown; use public, personal, sensitive or secret", m.Sensitivity)}
	}
	for _, c := range m.Capabilities {
		if capBit(c) == 0 {
			return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("metadata.capabilities contains the unknown capability %q", c)}
		}
	}
	return nil
}

// clone returns a deep copy of m, so that neither the caller's later
// changes nor a snapshot reader can reach the registry's copy.
func (m Metadata) clone() Metadata {
	if m.Readable != nil {
		m.Readable = Bool(*m.Readable)
	}
	if m.Writable != nil {
		m.Writable = Bool(*m.Writable)
	}
	m.Options = slices.Clone(m.Options)
	if m.Constraints != nil {
		c := *m.Constraints
		if c.MinLength != nil {
			n := *c.MinLength
			c.MinLength = &n
		}
		if c.MaxLength != nil {
			n := *c.MaxLength
			c.MaxLength = &n
		}
		m.Constraints = &c
	}
	m.Capabilities = slices.Clone(m.Capabilities)
	return m
}

// State is a control's runtime state, reported by its GetState handle.
type State struct {
	Disabled bool `json:"disabled,omitempty"`
	Readonly bool `json:"readonly,omitempty"`
	// Valid is nil when the control does not report validity.
	Valid             *bool  `json:"valid,omitempty"`
	ValidationMessage string `json:"validationMessage,omitempty"`
}

// editable reports whether the state permits a change.
func (s *State) editable() bool { return !s.Disabled && !s.Readonly }

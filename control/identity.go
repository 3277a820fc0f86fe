package control

import (
	"fmt"
	"unicode/utf8"
)

// MaxIdentifierLength is the largest number of characters (Unicode code
// points) accepted in each field of an [Identity].
const MaxIdentifierLength = 256

// Subject names the record a control edits when one form shows several
// records, for example the row of a table. Label is for people only: it is
// not part of the identity.
type Subject struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Label string `json:"label,omitempty"`
}

// Identity is the stable address of a control: the form it belongs to, the
// control's id within that form and, optionally, the subject it edits.
// Adapters address controls by identity, never by position or visible text.
//
// Two identities are the same control when their form id, control id and
// subject type and id are equal; a subject's label is ignored, and an
// identity without a subject differs from one with a subject.
type Identity struct {
	// The tags state the limits of ValidateIdentity in the schemas of
	// the tools that take an identity.
	FormID    string   `json:"formId" minLength:"1" maxLength:"256"`
	ControlID string   `json:"controlId" minLength:"1" maxLength:"256"`
	Subject   *Subject `json:"subject,omitempty"`
}

// Key is the comparable form of an [Identity], usable as a map key. It leaves
// out the subject's label.
type Key struct {
	FormID      string
	ControlID   string
	HasSubject  bool
	SubjectType string
	SubjectID   string
}

// Key returns the comparable key of id.
func (id Identity) Key() Key {
	k := Key{FormID: id.FormID, ControlID: id.ControlID}
	if id.Subject != nil {
		k.HasSubject = true
		k.SubjectType = id.Subject.Type
		k.SubjectID = id.Subject.ID
	}
	return k
}

// Equal reports whether id and other address the same control.
func (id Identity) Equal(other Identity) bool { return id.Key() == other.Key() }

// String returns a readable form of the identity for messages and logs:
// "form/control", followed by "[type:id]" when there is a subject.
func (id Identity) String() string {
	if id.Subject == nil {
		return id.FormID + "/" + id.ControlID
	}
	return fmt.Sprintf("%s/%s[%s:%s]", id.FormID, id.ControlID, id.Subject.Type, id.Subject.ID)
}

// clone returns a copy of id that shares no memory with it.
func (id Identity) clone() Identity {
	if id.Subject != nil {
		s := *id.Subject
		id.Subject = &s
	}
	return id
}

// Validate checks that every field of the identity is a usable identifier:
// non-empty, valid UTF-8, free of control characters and at most
// [MaxIdentifierLength] characters long. The subject's label, when present,
// follows the same rules except that it may be empty. The returned error is
// an [*Error] whose Reason is [ReasonInvalidRequest] or
// [ReasonLimitExceeded].
func (id Identity) Validate() error {
	if err := checkIdentifier("formId", id.FormID, false); err != nil {
		return err
	}
	if err := checkIdentifier("controlId", id.ControlID, false); err != nil {
		return err
	}
	if id.Subject != nil {
		if err := checkIdentifier("subject.type", id.Subject.Type, false); err != nil {
			return err
		}
		if err := checkIdentifier("subject.id", id.Subject.ID, false); err != nil {
			return err
		}
		if err := checkIdentifier("subject.label", id.Subject.Label, true); err != nil {
			return err
		}
	}
	return nil
}

func checkIdentifier(field, s string, mayBeEmpty bool) error {
	if s == "" {
		if mayBeEmpty {
			return nil
		}
		return &Error{Reason: ReasonInvalidRequest, Message: field + " is empty; give every control a non-empty " + field}
	}
	if !utf8.ValidString(s) {
		return &Error{Reason: ReasonInvalidRequest, Message: field + " is not valid UTF-8"}
	}
	n := 0
	for _, r := range s {
		n++
		if r < 0x20 || r == 0x7f {
			return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("%s contains the control character U+%04X; remove it", field, r)}
		}
	}
	if n > MaxIdentifierLength {
		return &Error{Reason: ReasonLimitExceeded, Message: fmt.Sprintf("%s is %d characters long; the limit is %d", field, n, MaxIdentifierLength)}
	}
	return nil
}

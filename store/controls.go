package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/assent-run/assent/control"
)

// Controls keeps what the control registry must not lose on a restart: the
// open proposal (value, base value, revision, provenance, time) and the
// bounded undo history of every control, the hosted forms with their
// declarations and current values, and the highest proposal revision handed
// out. The backend also holds the audit log, so that a control command's
// change and its audit record are written in one transaction. It is the registry's [control.Persister]: a server
// passes it as control.Config.Store and calls Registry.Restore once at
// start.
//
// A backend applies each call in one transaction, so a change is saved
// whole or not at all, and keeps values and declarations byte for byte.
// Controls are keyed by form id, control id and subject type and id (empty
// without a subject; the registry never uses an empty identifier).
//
// A backend checks each update's control.Expect in the transaction that
// applies it (see [CheckExpect]), and reads one control or one form by
// itself, so that registries on several nodes read again only what
// another node changed.
type Controls interface {
	control.Persister
	control.ControlLoader
	control.FormLoader
	// SaveControlAudited applies u as SaveControl does and, in the same
	// transaction, appends rec to the audit log as [Audit.AppendAudit]
	// does: both are saved or neither is. It returns rec's sequence
	// number. A server records a control command that changes a control
	// this way, and appends to the audit log alone the commands that
	// change nothing.
	//
	// When dl is not nil it is also kept, in the same transaction, as
	// [Deadlines.SetDeadline] keeps it: a value staged with a deadline is
	// never seen by any reader without it.
	SaveControlAudited(ctx context.Context, u control.Update, rec AuditRecord, dl *DecisionDeadline) (int64, error)
}

// CheckControlUpdate reports whether u is well formed: it needs a form and
// a control id, does not both stage and unstage or both push and pop, and
// pushes only with a positive Depth. The error wraps ErrInvalid.
func CheckControlUpdate(u control.Update) error {
	switch {
	case u.Key.FormID == "" || u.Key.ControlID == "":
		return fmt.Errorf("%w: a control update needs a form id and a control id", ErrInvalid)
	case u.Stage != nil && u.Unstage:
		return fmt.Errorf("%w: an update of %s both stages and unstages", ErrInvalid, u.Key.ControlID)
	case u.Push != nil && u.Pop:
		return fmt.Errorf("%w: an update of %s both pushes and pops its undo history", ErrInvalid, u.Key.ControlID)
	case u.Push != nil && u.Depth <= 0:
		return fmt.Errorf("%w: an update of %s pushes onto an undo history of depth %d", ErrInvalid, u.Key.ControlID, u.Depth)
	}
	return nil
}

// CheckSavedForm reports whether f may be saved: it needs a form id, and
// every control belongs to the form, has a control id and appears once.
// The error wraps ErrInvalid.
func CheckSavedForm(f control.SavedForm) error {
	if f.FormID == "" {
		return fmt.Errorf("%w: a hosted form needs an id", ErrInvalid)
	}
	seen := make(map[control.Key]bool, len(f.Controls))
	for i, c := range f.Controls {
		switch {
		case c.Key.FormID != f.FormID:
			return fmt.Errorf("%w: control %d of form %s belongs to form %q", ErrInvalid, i, f.FormID, c.Key.FormID)
		case c.Key.ControlID == "":
			return fmt.Errorf("%w: control %d of form %s has no id", ErrInvalid, i, f.FormID)
		case seen[c.Key]:
			return fmt.Errorf("%w: control %s of form %s is saved twice", ErrInvalid, c.Key.ControlID, f.FormID)
		}
		seen[c.Key] = true
	}
	return nil
}

// SubjectColumns returns the subject type and id of k as a backend stores
// them: empty strings when k has no subject.
func SubjectColumns(k control.Key) (subjectType, subjectID string) {
	if !k.HasSubject {
		return "", ""
	}
	return k.SubjectType, k.SubjectID
}

// ControlKey rebuilds a key from its stored columns.
func ControlKey(formID, controlID, subjectType, subjectID string) control.Key {
	k := control.Key{FormID: formID, ControlID: controlID}
	if subjectType != "" || subjectID != "" {
		k.HasSubject, k.SubjectType, k.SubjectID = true, subjectType, subjectID
	}
	return k
}

// SavedControlsBuilder groups the proposal and undo rows a backend reads
// into the controls of a control.Saved. The zero value is ready to use.
type SavedControlsBuilder struct {
	byKey map[control.Key]int
	out   []control.SavedControl
}

func (b *SavedControlsBuilder) at(k control.Key) *control.SavedControl {
	if b.byKey == nil {
		b.byKey = make(map[control.Key]int)
	}
	i, ok := b.byKey[k]
	if !ok {
		i = len(b.out)
		b.byKey[k] = i
		b.out = append(b.out, control.SavedControl{Key: k})
	}
	return &b.out[i]
}

// Proposal records the open proposal of k.
func (b *SavedControlsBuilder) Proposal(k control.Key, p control.SavedProposal) {
	b.at(k).Proposal = &p
}

// Change appends e to the undo history of k; rows come oldest first.
func (b *SavedControlsBuilder) Change(k control.Key, e control.SavedChange) {
	c := b.at(k)
	c.History = append(c.History, e)
}

// Controls returns the controls recorded, in the order first seen.
func (b *SavedControlsBuilder) Controls() []control.SavedControl { return b.out }

// SavedFormsBuilder groups the rows a backend reads of hosted forms joined
// with their controls, ordered by form and then by position, into the
// forms of a control.Saved. The zero value is ready to use.
type SavedFormsBuilder struct {
	out []control.SavedForm
}

// Row records one row: the form and, unless h is nil (a form whose
// declaration has no controls), one of its controls.
func (b *SavedFormsBuilder) Row(formID, owner string, private bool, h *control.SavedHosted) {
	if len(b.out) == 0 || b.out[len(b.out)-1].FormID != formID {
		b.out = append(b.out, control.SavedForm{FormID: formID, Owner: owner, Private: private})
	}
	if h != nil {
		f := &b.out[len(b.out)-1]
		f.Controls = append(f.Controls, *h)
	}
}

// Forms returns the forms recorded, in the order of the rows.
func (b *SavedFormsBuilder) Forms() []control.SavedForm { return b.out }

// ExpectSeen is what a backend read, in the transaction of a
// control.Update and after taking the control's write lock, of the saved
// state the update's control.Expect checks. Fields of checks the Expect
// does not ask for are not read and stay zero.
type ExpectSeen struct {
	// Proposal is the revision of the open proposal, 0 when none is open.
	Proposal int64
	// Hosted reports that the control belongs to a saved hosted form, and
	// Value is then its saved value.
	Hosted bool
	Value  json.RawMessage
	// Undo reports that the undo history is not empty; UndoAtMatches that
	// its newest entry was made at Expect.UndoAt, at the backend's
	// precision.
	Undo          bool
	UndoAtMatches bool
}

// CheckExpect decides whether u's expectation holds over what the backend
// saw. When it does not, the error wraps both control.ErrConflict and
// ErrConflict and says what changed; the backend then saves nothing.
func CheckExpect(u control.Update, seen ExpectSeen) error {
	e, k := u.Expect, u.Key
	if e.Proposal {
		switch {
		case seen.Proposal != e.Revision && seen.Proposal == 0:
			return conflict(k, fmt.Sprintf("no proposal is open, not revision %d", e.Revision))
		case seen.Proposal != e.Revision:
			return conflict(k, fmt.Sprintf("the open proposal is revision %d, not %d", seen.Proposal, e.Revision))
		case u.Stage != nil && u.Stage.Revision <= seen.Proposal:
			return conflict(k, fmt.Sprintf("revision %d is not higher than that of the open proposal, %d", u.Stage.Revision, seen.Proposal))
		}
	}
	if e.Value != nil && seen.Hosted && !control.EqualJSON(seen.Value, e.Value) {
		return conflict(k, "the hosted value changed")
	}
	if e.Undo {
		switch {
		case e.UndoAt.IsZero() && seen.Undo:
			return conflict(k, "the undo history is no longer empty")
		case !e.UndoAt.IsZero() && !seen.Undo:
			return conflict(k, "the undo history is empty")
		case !e.UndoAt.IsZero() && !seen.UndoAtMatches:
			return conflict(k, "the newest entry of the undo history changed")
		}
	}
	return nil
}

func conflict(k control.Key, what string) error {
	return fmt.Errorf("%w: %w: control %s of form %s: %s; read it again", ErrConflict, control.ErrConflict, k.ControlID, k.FormID, what)
}

package store

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/control"
)

// Controls keeps what the control registry must not lose on a restart: the
// open proposal (value, base value, revision, provenance, time) and the
// bounded undo history of every control, the hosted forms with their
// declarations and current values, and the highest proposal revision handed
// out. It is the registry's [control.Persister]: a server passes it as
// control.Config.Store and calls Registry.Restore once at start.
//
// A backend applies each call in one transaction, so a change is saved
// whole or not at all, and keeps values and declarations byte for byte.
// Controls are keyed by form id, control id and subject type and id (empty
// without a subject; the registry never uses an empty identifier).
type Controls interface {
	control.Persister
}

// AuditedControls is implemented by a [Controls] whose backend also holds
// the audit log, so that a control command's change and its audit record
// are written in one transaction. A server records a command that changes
// a control this way, and appends to the audit log alone (see
// [Audit.AppendAudit]) the commands that change nothing.
type AuditedControls interface {
	Controls
	// SaveControlAudited applies u as SaveControl does and, in the same
	// transaction, appends rec to the audit log as AppendAudit does: both
	// are saved or neither is. It returns rec's sequence number.
	SaveControlAudited(ctx context.Context, u control.Update, rec AuditRecord) (int64, error)
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

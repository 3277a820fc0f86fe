package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/assent-run/assent/store"
)

// InboxNote is one text a person sent on an inbox item: a note with an
// approval, the reason of a decline, or an answer without deciding. Notes
// are kept in the store's settings under the item's id.
type InboxNote struct {
	By string `json:"by"`
	// Decision is approve, decline or respond (sent without deciding).
	Decision string    `json:"decision"`
	Text     string    `json:"text"`
	At       time.Time `json:"at"`
}

// NoteSetting is the setting under which the notes on the inbox item
// itemID are kept.
func NoteSetting(itemID string) string { return "inbox.note:" + itemID }

// ReadNotes returns the notes on the inbox item itemID, oldest first;
// none when there are none.
func ReadNotes(ctx context.Context, st interface {
	Setting(ctx context.Context, name string) (string, error)
}, itemID string) ([]InboxNote, error) {
	v, err := st.Setting(ctx, NoteSetting(itemID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the notes: %w", err)
	}
	var notes []InboxNote
	if err := json.Unmarshal([]byte(v), &notes); err != nil {
		return nil, fmt.Errorf("read the notes: %w", err)
	}
	return notes, nil
}

// ControlNote is a note on a control proposal as the control keeps it,
// with the principal that staged the revision it was written on: the
// proposal's own notes go when it is decided, and this lets the agent
// that proposed it still read a person's words (controls_inspect).
type ControlNote struct {
	InboxNote
	// Proposer is the principal id that staged Revision.
	Proposer string `json:"proposer"`
	Revision int64  `json:"revision"`
}

// ControlNoteSetting is the setting under which the notes on proposals of
// the control named control (an identity's String) are kept.
func ControlNoteSetting(control string) string { return "inbox.control-note:" + control }

// ReadControlNotes returns the notes on proposals of the control named
// control, oldest first; none when there are none.
func ReadControlNotes(ctx context.Context, st interface {
	Setting(ctx context.Context, name string) (string, error)
}, control string) ([]ControlNote, error) {
	v, err := st.Setting(ctx, ControlNoteSetting(control))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the control's notes: %w", err)
	}
	var notes []ControlNote
	if err := json.Unmarshal([]byte(v), &notes); err != nil {
		return nil, fmt.Errorf("read the control's notes: %w", err)
	}
	return notes, nil
}

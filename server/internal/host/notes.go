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

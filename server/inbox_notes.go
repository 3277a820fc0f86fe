package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// A person's words to the agent on an inbox item — a note with an
// approval, the reason of a decline, or an answer without deciding — are
// kept in the store's settings under the item's id, so they survive a
// restart, and audited. inbox_wait reports them with the item's outcome.

// inboxNote is one text a person sent on an inbox item.
type inboxNote = host.InboxNote

// Limits of notes.
const (
	maxNoteBytes    = 2000
	maxNotesPerItem = 20
)

func noteSetting(itemID string) string { return host.NoteSetting(itemID) }

// addNote stores n on the item itemID, audits it and tells the agent
// that filed the item, whose wait wakes.
func (s *Server) addNote(ctx context.Context, itemID, proposer string, n inboxNote) error {
	if len(n.Text) > maxNoteBytes {
		return wire.New(wire.LimitExceeded, fmt.Sprintf("the note is over %d bytes; shorten it", maxNoteBytes))
	}
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	notes, err := s.notesOf(ctx, itemID)
	if err != nil {
		return err
	}
	if len(notes) >= maxNotesPerItem {
		return wire.New(wire.LimitExceeded, fmt.Sprintf("this item has %d notes already, the most it keeps; decide it instead", maxNotesPerItem))
	}
	b, err := json.Marshal(append(notes, n))
	if err != nil {
		return err
	}
	if err := s.host.Store.SetSetting(ctx, noteSetting(itemID), string(b)); err != nil {
		return fmt.Errorf("save the note: %w", err)
	}
	if err := s.keepControlNote(ctx, itemID, proposer, n); err != nil {
		// The note goes whole or not at all: the item's list is put back.
		if old, merr := json.Marshal(notes); merr == nil {
			if rerr := s.host.Store.SetSetting(ctx, noteSetting(itemID), string(old)); rerr != nil {
				s.host.Log.Error("a note kept on its item only could not be removed", "item", itemID, "err", rerr)
			}
		}
		return err
	}
	detail, _ := json.Marshal(map[string]string{"item": itemID, "decision": n.Decision, "note": n.Text})
	if _, err := s.host.Store.AppendAudit(ctx, store.AuditRecord{Time: n.At, PrincipalID: n.By, Source: "user", Action: "inbox.note", OK: true, Detail: string(detail)}); err != nil {
		s.host.Log.Error("the audit record of a note could not be written", "item", itemID, "err", err)
	}
	data, _ := json.Marshal(map[string]string{"item": itemID})
	s.host.Bus.Publish(s.host.OwnedEvent("inbox.note", proposer, data))
	return nil
}

// dropNote removes n from the item itemID again, when the decision it
// went with was refused. The audit log keeps that it was written.
func (s *Server) dropNote(ctx context.Context, itemID string, n inboxNote) {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	notes, err := s.notesOf(ctx, itemID)
	if err != nil {
		return
	}
	for i := len(notes) - 1; i >= 0; i-- {
		if notes[i].By == n.By && notes[i].At.Equal(n.At) && notes[i].Text == n.Text {
			notes = append(notes[:i], notes[i+1:]...)
			break
		}
	}
	b, err := json.Marshal(notes)
	if err == nil {
		err = s.host.Store.SetSetting(ctx, noteSetting(itemID), string(b))
	}
	if err == nil {
		err = s.dropControlNote(ctx, itemID, n)
	}
	if err != nil {
		s.host.Log.Error("the note of a refused decision could not be removed", "item", itemID, "err", err)
	}
}

// maxControlNotes bounds the notes a control keeps for its proposers; the
// oldest go first.
const maxControlNotes = 50

// controlOfItem returns the control and revision a control proposal's
// item id names (control_proposal:<control>@<revision>); ok is false for
// an item of another kind.
func controlOfItem(itemID string) (control string, rev int64, ok bool) {
	rest, isProposal := strings.CutPrefix(itemID, "control_proposal:")
	i := strings.LastIndex(rest, "@")
	if !isProposal || i <= 0 {
		return "", 0, false
	}
	rev, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return rest[:i], rev, true
}

// keepControlNote keeps n, written on a control proposal's item, with the
// control too, naming the principal that staged the revision: when the
// proposal is discarded its item is gone, and the proposer still reads
// the person's words with controls_inspect. The caller holds notesMu.
func (s *Server) keepControlNote(ctx context.Context, itemID, proposer string, n inboxNote) error {
	ctl, rev, ok := controlOfItem(itemID)
	if !ok || proposer == "" {
		return nil
	}
	notes, err := host.ReadControlNotes(ctx, s.host.Store, ctl)
	if err != nil {
		return err
	}
	notes = append(notes, host.ControlNote{InboxNote: n, Proposer: proposer, Revision: rev})
	if len(notes) > maxControlNotes {
		notes = notes[len(notes)-maxControlNotes:]
	}
	b, err := json.Marshal(notes)
	if err != nil {
		return err
	}
	if err := s.host.Store.SetSetting(ctx, host.ControlNoteSetting(ctl), string(b)); err != nil {
		return fmt.Errorf("save the note with the control: %w", err)
	}
	return nil
}

// dropControlNote removes n, kept with a control by keepControlNote, when
// the decision it went with was refused. The caller holds notesMu.
func (s *Server) dropControlNote(ctx context.Context, itemID string, n inboxNote) error {
	ctl, _, ok := controlOfItem(itemID)
	if !ok {
		return nil
	}
	notes, err := host.ReadControlNotes(ctx, s.host.Store, ctl)
	if err != nil {
		return err
	}
	for i := len(notes) - 1; i >= 0; i-- {
		if notes[i].By == n.By && notes[i].At.Equal(n.At) && notes[i].Text == n.Text {
			notes = append(notes[:i], notes[i+1:]...)
			b, err := json.Marshal(notes)
			if err != nil {
				return err
			}
			return s.host.Store.SetSetting(ctx, host.ControlNoteSetting(ctl), string(b))
		}
	}
	return nil
}

// notesOf returns the notes on the item itemID, oldest first.
func (s *Server) notesOf(ctx context.Context, itemID string) ([]inboxNote, error) {
	return host.ReadNotes(ctx, s.host.Store, itemID)
}

// Package journal holds the rules a store enforces on a Run's Control
// journal and Trace, inside the transaction that writes them: which
// Control records are sound, when an admission is refused, which status
// transitions are legal, and how a Trace past its bounds is compacted.
//
// The rules are pure functions of the records and of a time the caller
// supplies, so every backend applies the same policy and keeps only
// persistence for itself. A backend reads what a rule needs (the records
// of one Run, or the sizes of its Trace events), asks the rule, and writes
// the outcome in the same transaction.
package journal

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/assent-run/assent/store"
)

// Bounds of one Control record, as the runtime admits them.
const (
	ActionMaxLength = 64
	InputMaxBytes   = 380
)

// Integrity reasons, in the order they are checked.
const (
	IntegrityBytes      = "journal_bytes"
	IntegrityMalformed  = "malformed"
	IntegrityInvalid    = "invalid_record"
	IntegrityTimestamp  = "invalid_status_timestamp"
	IntegrityGeneration = "generation_mismatch"
)

// Refusal reasons of a *store.ControlError.
const (
	ReasonBackpressure = "control_backpressure"
	ReasonIntegrity    = "control_journal_integrity"
)

// ActionPattern is the regular expression a Control action matches (with
// at most ActionMaxLength bytes): dot-separated lowercase segments, the
// first starting with a letter, as in "player.pause". A backend that checks
// actions in its query language uses this pattern or its equivalent.
const ActionPattern = `^[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)*$`

// ValidAction reports whether action is a lowercase semantic token of at
// most ActionMaxLength characters that matches ActionPattern, as in
// "player.pause".
func ValidAction(action string) bool {
	if action == "" || len(action) > ActionMaxLength || action[0] < 'a' || action[0] > 'z' {
		return false
	}
	dot := false // the previous byte was a dot
	for i := 1; i < len(action); i++ {
		switch b := action[i]; {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9', b == '_', b == '-':
			dot = false
		case b == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return !dot
}

// Record is a stored Control record with its encoded size in bytes (its
// canonical JSON line, newline included), as the backend keeps it.
type Record struct {
	Control store.Control
	Bytes   int
}

// State is the summary of a Run's journal that admissions and transitions
// are decided on, for one generation.
type State struct {
	// Bytes is the journal's size; Pending counts pending records;
	// Oldest is the status time of the oldest pending record.
	Bytes   int
	Pending int
	Oldest  time.Time
	// Integrity is the first integrity failure, or "" when the journal
	// is sound.
	Integrity string

	flaws [4]int // malformed, invalid, timestamp, generation
}

// Summarize summarizes the records of one Run's journal for generation
// instance: a pending record of another generation is an integrity
// failure.
func Summarize(recs []Record, instance string) State {
	var s State
	for _, r := range recs {
		s.add(r, instance)
	}
	s.check()
	return s
}

// Tally is the summary of one Run's journal for a generation as a backend
// counts it itself (in a query, or in counters it keeps as records are
// written) without reading the records: the sum of the records' sizes, the
// pending records (queued, delivered or claimed), the oldest status time
// among them, and the records that fail each integrity check. Each record
// counts in the first check it fails, in this order:
//
//   - Malformed: its input is not empty and not valid JSON (ValidInput).
//   - Invalid: its status is not one of the five, its id or generation is
//     empty, its action fails ValidAction, or its input is longer than
//     InputMaxBytes.
//   - Timestamp: the time of its current status is missing.
//   - Generation: it is pending and belongs to another generation.
//
// The first field that is not zero is the integrity failure, so a backend
// may also count a record in a field after its first failed check (the
// pending records of another generation, say, whatever else they fail).
type Tally struct {
	Bytes   int
	Pending int
	Oldest  time.Time

	Malformed  int
	Invalid    int
	Timestamp  int
	Generation int
}

// State returns the journal state t counts, as Summarize would return it
// for the same records.
func (t Tally) State() State {
	s := State{Bytes: t.Bytes, Pending: t.Pending, Oldest: t.Oldest,
		flaws: [4]int{t.Malformed, t.Invalid, t.Timestamp, t.Generation}}
	s.check()
	return s
}

// ValidInput reports whether a Control input is sound JSON: empty (no
// input), or valid JSON text.
func ValidInput(input []byte) bool {
	return len(input) == 0 || json.Valid(input)
}

func (s *State) add(r Record, instance string) {
	c := r.Control
	s.Bytes += r.Bytes
	pending := store.ControlPending(c.Status)
	if pending {
		s.Pending++
		if t := c.StatusTime(); !t.IsZero() && (s.Oldest.IsZero() || t.Before(s.Oldest)) {
			s.Oldest = t
		}
	}
	known := pending || c.Status == store.ControlHandled || c.Status == store.ControlFailed
	switch {
	case !ValidInput(c.Input):
		s.flaws[0]++
	case !known || c.ID == "" || c.InstanceID == "" || !ValidAction(c.Action) || len(c.Input) > InputMaxBytes:
		s.flaws[1]++
	case c.StatusTime().IsZero():
		s.flaws[2]++
	case pending && c.InstanceID != instance:
		s.flaws[3]++
	}
}

func (s *State) check() {
	s.Integrity = ""
	if s.Bytes > store.ControlJournalMaxBytes {
		s.Integrity = IntegrityBytes
		return
	}
	for i, reason := range []string{IntegrityMalformed, IntegrityInvalid, IntegrityTimestamp, IntegrityGeneration} {
		if s.flaws[i] > 0 {
			s.Integrity = reason
			return
		}
	}
}

// Refusal returns the *store.ControlError that refuses a write to the
// journal s summarizes, with reason ReasonBackpressure or
// ReasonIntegrity.
func (s State) Refusal(reason, instance string) *store.ControlError {
	e := &store.ControlError{Reason: reason, Pending: s.Pending, Limit: store.ControlPendingLimit,
		JournalBytes: s.Bytes, JournalLimit: store.ControlJournalMaxBytes, InstanceID: instance, OldestPendingAt: s.Oldest}
	if reason == ReasonIntegrity {
		e.IntegrityReason = s.Integrity
	}
	return e
}

// Sound returns a refusal when the journal fails its integrity check, or
// nil. Transitions and claims refuse a damaged journal.
func (s State) Sound(instance string) error {
	if s.Integrity != "" {
		return s.Refusal(ReasonIntegrity, instance)
	}
	return nil
}

// ErrNoQueuedAt refuses an admission whose Control has no queued time:
// the time comes from the caller, never from the store.
var ErrNoQueuedAt = errors.New("journal: a Control is admitted with its QueuedAt time set")

// Admission returns c as it is admitted (status queued, every later
// timestamp and the error cleared, QueuedAt in milliseconds) and its
// encoded size.
func Admission(c store.Control) (store.Control, int, error) {
	if c.QueuedAt == nil {
		return c, 0, ErrNoQueuedAt
	}
	t := c.QueuedAt.UTC().Truncate(time.Millisecond)
	c.Status, c.QueuedAt = store.ControlQueued, &t
	c.DeliveredAt, c.ClaimedAt, c.HandledAt, c.FailedAt, c.Error = nil, nil, nil, nil, ""
	n, err := Size(c)
	return c, n, err
}

// Size is the encoded size of c: its canonical JSON line.
func Size(c store.Control) (int, error) {
	b, err := store.EncodeLine(c)
	return len(b), err
}

// Admit decides the admission of a record of n bytes to generation
// instance: a damaged journal is refused with ReasonIntegrity, a full one
// (ControlPendingLimit pending records, or ControlJournalMaxBytes) with
// ReasonBackpressure. On success s counts the new record.
func (s *State) Admit(c store.Control, n int) error {
	if s.Integrity != "" {
		return s.Refusal(ReasonIntegrity, c.InstanceID)
	}
	if s.Pending >= store.ControlPendingLimit || s.Bytes+n > store.ControlJournalMaxBytes {
		return s.Refusal(ReasonBackpressure, c.InstanceID)
	}
	s.Pending++
	s.Bytes += n
	if t := c.StatusTime(); s.Oldest.IsZero() || t.Before(s.Oldest) {
		s.Oldest = t
	}
	return nil
}

// Legal reports whether a record may move from status cur to next:
// claimed from queued or delivered, handled from claimed, failed and
// delivered from any pending status.
func Legal(cur, next string) bool {
	switch next {
	case store.ControlDelivered, store.ControlFailed:
		return store.ControlPending(cur)
	case store.ControlClaimed:
		return cur == store.ControlQueued || cur == store.ControlDelivered
	case store.ControlHandled:
		return cur == store.ControlClaimed
	}
	return false
}

// Transition moves c to next at time at. Its status must be one of
// expected (any status when empty) and the move legal; otherwise the
// result is store.ErrConflict and c unchanged. Delivered only records
// delivered_at (once) and changes the status only from queued. Failed
// keeps errText, bounded to store.ControlErrorMaxBytes.
func Transition(c store.Control, next string, expected []string, errText string, at time.Time) (store.Control, error) {
	if len(expected) > 0 && !slices.Contains(expected, c.Status) || next == c.Status || !Legal(c.Status, next) {
		return c, store.ErrConflict
	}
	t := at.UTC().Truncate(time.Millisecond)
	switch next {
	case store.ControlDelivered:
		if c.DeliveredAt != nil {
			return c, store.ErrConflict
		}
		c.DeliveredAt = &t
		if c.Status == store.ControlQueued {
			c.Status = store.ControlDelivered
		}
	case store.ControlClaimed:
		c.ClaimedAt, c.Status = &t, next
	case store.ControlHandled:
		c.HandledAt, c.Status = &t, next
	case store.ControlFailed:
		c.FailedAt, c.Status = &t, next
		c.Error = TruncateError(errText)
	}
	return c, nil
}

// DeliveredMark returns c as it was admitted (see [Admission]) with its
// size old, and the same record delivered at time at with its size n.
func DeliveredMark(c store.Control, at time.Time) (was store.Control, old int, delivered store.Control, n int, err error) {
	if was, old, err = Admission(c); err != nil {
		return
	}
	if delivered, err = Transition(was, store.ControlDelivered, []string{store.ControlQueued}, "", at); err != nil {
		return
	}
	n, err = Size(delivered)
	return
}

// ErrJournalFull refuses a transition that would grow the journal past
// store.ControlJournalMaxBytes.
var ErrJournalFull = errors.New("the Run Control journal transition exceeds its byte bound")

// Resize checks that replacing a record of old bytes with one of n bytes
// keeps a journal of s.Bytes within store.ControlJournalMaxBytes.
func (s State) Resize(old, n int) error {
	if s.Bytes-old+n > store.ControlJournalMaxBytes {
		return ErrJournalFull
	}
	return nil
}

// TruncateError bounds a Control error to store.ControlErrorMaxBytes,
// cutting on a UTF-8 boundary and marking the cut with "… [truncated]".
func TruncateError(s string) string {
	const suffix = "… [truncated]"
	if len(s) <= store.ControlErrorMaxBytes {
		return s
	}
	n := store.ControlErrorMaxBytes - len(suffix)
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + suffix
}

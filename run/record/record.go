// Package record defines the records of Runs that a store keeps: a Run's
// metadata, the records of its Control journal and its Trace, the Recipes
// registered as tools and the requests one node makes of another about a
// Run. Package run writes and reads them through a store.Runs; package
// store keeps them without depending on package run.
package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Control statuses. Queued, delivered and claimed are pending; handled and
// failed are terminal.
const (
	ControlQueued    = "queued"
	ControlDelivered = "delivered"
	ControlClaimed   = "claimed"
	ControlHandled   = "handled"
	ControlFailed    = "failed"
)

// ControlPending reports whether status is a pending status.
func ControlPending(status string) bool {
	return status == ControlQueued || status == ControlDelivered || status == ControlClaimed
}

// Run is the durable metadata of a Run's current generation.
type Run struct {
	ID      string
	OwnerID string
	// InstanceID is the run_instance_id of the current generation.
	InstanceID string
	// Generation counts starts of this Run id, from 1.
	Generation int
	// PID and StartTime identify the process group leader; StartTime is
	// the kernel's start time of the process, so a reused pid is detected.
	PID       int
	StartTime string
	// ExitCode is set once the process has exited and its code is known.
	ExitCode *int
	// Stop is "killed" or "cancelled" once the runtime stopped the Run,
	// "lost" once another node found its supervising node's lease expired.
	Stop      string
	CreatedAt time.Time
	StartedAt time.Time
	EndedAt   time.Time
	// Archived marks the tombstone left at the Run's address.
	Archived   bool
	ArchiveDir string
	// Doc is the Run's definition (recipe, values, script, artifacts,
	// declared Control actions …) as package run encodes it.
	Doc json.RawMessage
}

// Control is one record of a Run's Control journal. Field order is the
// canonical order of its JSON encoding.
type Control struct {
	ID          string          `json:"id"`
	InstanceID  string          `json:"run_instance_id"`
	Action      string          `json:"action"`
	Input       json.RawMessage `json:"input,omitempty"`
	Status      string          `json:"status"`
	QueuedAt    *time.Time      `json:"queued_at,omitempty"`
	DeliveredAt *time.Time      `json:"delivered_at,omitempty"`
	ClaimedAt   *time.Time      `json:"claimed_at,omitempty"`
	HandledAt   *time.Time      `json:"handled_at,omitempty"`
	FailedAt    *time.Time      `json:"failed_at,omitempty"`
	Error       string          `json:"error,omitempty"`
	// SenderID is the principal that sent the Control: the Run's owner, or
	// the person who acted on it. Empty on records admitted before it was
	// kept.
	SenderID string `json:"sender_id,omitempty"`
}

// StatusTime returns the timestamp of c's current status, or the zero time
// when it is missing.
func (c Control) StatusTime() time.Time {
	var p *time.Time
	switch c.Status {
	case ControlQueued:
		p = c.QueuedAt
	case ControlDelivered:
		p = c.DeliveredAt
	case ControlClaimed:
		p = c.ClaimedAt
	case ControlHandled:
		p = c.HandledAt
	case ControlFailed:
		p = c.FailedAt
	}
	if p == nil {
		return time.Time{}
	}
	return *p
}

// ControlError is a refused Control admission or transition. Reason is
// "control_backpressure" or "control_journal_integrity"; nothing was written.
type ControlError struct {
	Reason          string
	Pending         int
	Limit           int
	JournalBytes    int
	JournalLimit    int
	OldestPendingAt time.Time
	InstanceID      string
	// IntegrityReason is set for "control_journal_integrity": malformed,
	// invalid_record, invalid_status_timestamp, generation_mismatch or
	// journal_bytes.
	IntegrityReason string
}

func (e *ControlError) Error() string {
	if e.Reason == "control_journal_integrity" {
		return fmt.Sprintf("Run Control journal integrity failed: %s", e.IntegrityReason)
	}
	return fmt.Sprintf("Run Control admission backpressured: pending=%d/%d", e.Pending, e.Limit)
}

// TraceEvent is one Trace event. Field order is the canonical order of its
// JSON encoding.
type TraceEvent struct {
	ID        string          `json:"id"`
	TS        time.Time       `json:"ts"`
	Kind      string          `json:"kind"`
	Summary   string          `json:"summary,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Level     string          `json:"level,omitempty"`
	Attention string          `json:"attention,omitempty"`
}

// TraceAppend is one event to append to a Run's Trace.
type TraceAppend struct {
	RunID string
	Event TraceEvent
	// Line, when set, is EncodeLine(Event) already computed by the caller.
	Line []byte
}

// ControlAdmission is one Control to admit to a Run's journal.
type ControlAdmission struct {
	RunID   string
	Control Control
}

// TraceStats describes a Run's retained Trace.
type TraceStats struct {
	Events int
	Bytes  int
	// Marker is the retained compaction marker, if any.
	Marker *TraceEvent
}

// Tool is a Recipe registered as a persistent tool.
type Tool struct {
	Name      string
	OwnerID   string
	Expose    bool
	Doc       json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// timeLayout is the canonical timestamp form of journal records: UTC with
// milliseconds, as in 2026-01-01T00:00:00.000Z.
const timeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime formats t in the canonical journal form.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return FormatTime(*t)
}

// MarshalJSON encodes c in its canonical form.
func (c Control) MarshalJSON() ([]byte, error) {
	type wire struct {
		ID          string          `json:"id"`
		InstanceID  string          `json:"run_instance_id"`
		Action      string          `json:"action"`
		Input       json.RawMessage `json:"input,omitempty"`
		Status      string          `json:"status"`
		QueuedAt    string          `json:"queued_at,omitempty"`
		DeliveredAt string          `json:"delivered_at,omitempty"`
		ClaimedAt   string          `json:"claimed_at,omitempty"`
		HandledAt   string          `json:"handled_at,omitempty"`
		FailedAt    string          `json:"failed_at,omitempty"`
		Error       string          `json:"error,omitempty"`
	}
	return encodeCompact(wire{c.ID, c.InstanceID, c.Action, c.Input, c.Status,
		fmtTimePtr(c.QueuedAt), fmtTimePtr(c.DeliveredAt), fmtTimePtr(c.ClaimedAt),
		fmtTimePtr(c.HandledAt), fmtTimePtr(c.FailedAt), c.Error})
}

// MarshalJSON encodes e in its canonical form.
func (e TraceEvent) MarshalJSON() ([]byte, error) {
	type wire struct {
		ID        string          `json:"id"`
		TS        string          `json:"ts"`
		Kind      string          `json:"kind"`
		Summary   string          `json:"summary,omitempty"`
		Data      json.RawMessage `json:"data,omitempty"`
		Level     string          `json:"level,omitempty"`
		Attention string          `json:"attention,omitempty"`
	}
	return encodeCompact(wire{e.ID, FormatTime(e.TS), e.Kind, e.Summary, e.Data, e.Level, e.Attention})
}

// EncodeLine returns the canonical JSON line of v (no HTML escaping,
// newline included): the unit in which journal bytes are counted.
func EncodeLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func encodeCompact(v any) ([]byte, error) {
	b, err := EncodeLine(v)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

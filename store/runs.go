package store

import (
	"context"
	"time"

	"github.com/assent-run/assent/run/record"
)

// Bounds of a Run's Control journal and Trace. A backend enforces them
// inside the transaction that writes, so concurrent writers cannot overshoot.
const (
	// ControlPendingLimit is the number of pending (queued, delivered or
	// claimed) Controls a generation may hold; the 65th is refused.
	ControlPendingLimit = 64
	// ControlTerminalLimit is how many terminal (handled or failed)
	// records are kept; older ones are dropped, newest kept.
	ControlTerminalLimit = 128
	// ControlJournalMaxBytes bounds the encoded journal (one JSON line per
	// record, newline included).
	ControlJournalMaxBytes = 1 << 20
	// ControlErrorMaxBytes bounds a stored Control error.
	ControlErrorMaxBytes = 4096

	// TraceMaxEvents and TraceMaxBytes are the hard bounds of one
	// generation's Trace; an append that would pass either compacts first.
	TraceMaxEvents = 2048
	TraceMaxBytes  = 4 << 20
	// TraceTargetEvents and TraceTargetBytes are what compaction leaves:
	// the newest suffix, the appended event and one marker.
	TraceTargetEvents = 1536
	TraceTargetBytes  = 3 << 20
	// TraceEventMaxBytes bounds one encoded event (without its newline).
	TraceEventMaxBytes = 65536
	// TraceCompactedKind is the kind of the runtime's compaction marker.
	TraceCompactedKind = "runtime.trace_compacted"
)

// Control statuses. Queued, delivered and claimed are pending; handled and
// failed are terminal.
const (
	ControlQueued    = record.ControlQueued
	ControlDelivered = record.ControlDelivered
	ControlClaimed   = record.ControlClaimed
	ControlHandled   = record.ControlHandled
	ControlFailed    = record.ControlFailed
)

// ControlPending reports whether status is a pending status.
func ControlPending(status string) bool { return record.ControlPending(status) }

// The records of Runs are defined with the Runs, in package run/record;
// the store keeps them under these names.
type (
	RunRecord        = record.Run
	Control          = record.Control
	ControlError     = record.ControlError
	TraceEvent       = record.TraceEvent
	TraceAppend      = record.TraceAppend
	ControlAdmission = record.ControlAdmission
	TraceStats       = record.TraceStats
	ToolRecord       = record.Tool
)

// Runs is the persistence of Runs: their metadata, Control journals,
// Traces and registered tools.
type Runs interface {
	// ClaimRun stores rec as the current generation of rec.ID. When the id
	// is new it is inserted. When it exists, its current InstanceID must
	// equal replaceInstance (the caller has checked that generation is
	// terminal): the record is replaced and the old generation's Controls
	// and Trace are deleted. Otherwise ErrConflict.
	ClaimRun(ctx context.Context, rec RunRecord, replaceInstance string) error
	// SaveRun rewrites the mutable fields of the generation rec.InstanceID
	// of rec.ID (process identity, exit, stop, end, archive, Doc). A
	// different current generation gives ErrNotFound.
	SaveRun(ctx context.Context, rec RunRecord) error
	// Run returns the Run with id, or ErrNotFound.
	Run(ctx context.Context, id string) (RunRecord, error)
	// ListRuns returns the Runs owned by ownerID (every Run when empty),
	// oldest first.
	ListRuns(ctx context.Context, ownerID string) ([]RunRecord, error)
	// DeleteRun removes a Run with its Controls and Trace.
	DeleteRun(ctx context.Context, id string) error

	// AdmitControl appends c (status queued) to runID's journal, or
	// refuses with *ControlError and writes nothing.
	AdmitControl(ctx context.Context, runID string, c Control) (Control, error)
	// AdmitControls admits several Controls in one transaction, in order,
	// each seeing the ones before it; errs[i] is the outcome of items[i]
	// (nil when admitted). A non-nil error means nothing was written.
	AdmitControls(ctx context.Context, items []ControlAdmission) (errs []error, err error)
	// TransitionControl moves record id to next at time at. The current
	// status must be one of expected (any pending status when empty) and
	// the move legal: claimed from queued or delivered, handled from
	// claimed, failed from any pending status; delivered only records
	// delivered_at and changes the status only from queued. A refused
	// move gives ErrConflict, an unknown id ErrNotFound, a damaged journal
	// *ControlError.
	TransitionControl(ctx context.Context, runID, id, next string, expected []string, errText string, at time.Time) (Control, error)
	// MarkControlDelivered records that c, as admitted to runID's journal
	// and still queued, was delivered at time at: the move TransitionControl
	// makes to delivered, in one statement. It is the path of a Control
	// written to its Run just after its admission. When the record is not
	// queued as admitted, or the journal is damaged or would outgrow its
	// byte bound, it changes nothing and returns ErrConflict;
	// TransitionControl then tells which.
	MarkControlDelivered(ctx context.Context, runID string, c Control, at time.Time) error
	// ClaimControl claims the first pending (queued or delivered) record
	// of generation instanceID, or the record id when id is not empty.
	// Nothing to claim gives ErrNotFound.
	ClaimControl(ctx context.Context, runID, instanceID, id string, at time.Time) (Control, error)
	// Control returns record id of runID's journal, or ErrNotFound when
	// the journal holds no such record (or the Run does not exist).
	Control(ctx context.Context, runID, id string) (Control, error)
	// Controls returns runID's journal in admission order.
	Controls(ctx context.Context, runID string) ([]Control, error)

	// AppendTrace appends ev to runID's Trace, compacting in the same
	// transaction when a bound would be passed.
	AppendTrace(ctx context.Context, runID string, ev TraceEvent) error
	// AppendTraces appends several events in one transaction, in order;
	// errs[i] is the outcome of items[i]. A non-nil error means nothing
	// was written.
	AppendTraces(ctx context.Context, items []TraceAppend) (errs []error, err error)
	// Trace returns the newest limit events, oldest first (all when limit
	// is not positive).
	Trace(ctx context.Context, runID string, limit int) ([]TraceEvent, error)
	// TraceStats describes runID's retained Trace.
	TraceStats(ctx context.Context, runID string) (TraceStats, error)

	// PutTool stores a registered tool. An existing name (compared
	// exactly) needs update, otherwise ErrConflict.
	PutTool(ctx context.Context, t ToolRecord, update bool) error
	// Tool returns a registered tool or ErrNotFound.
	Tool(ctx context.Context, name string) (ToolRecord, error)
	// ListTools returns every registered tool by name.
	ListTools(ctx context.Context) ([]ToolRecord, error)
	// DeleteTool removes a registered tool; ErrNotFound if absent.
	DeleteTool(ctx context.Context, name string) error

	// RunRequests carries what one node asks of the node supervising a
	// Run.
	RunRequests
}

// FormatTime formats t in the canonical journal form.
func FormatTime(t time.Time) string { return record.FormatTime(t) }

// EncodeLine returns the canonical JSON line of v (no HTML escaping,
// newline included): the unit in which journal bytes are counted.
func EncodeLine(v any) ([]byte, error) { return record.EncodeLine(v) }

package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Apply applies one Control action to an owned Run. The runtime-owned
// actions kill (running Runs), archive and prune (terminal Runs) never
// enter the journal. Any other action must be declared by the Run's
// Recipe; it is admitted to the journal (or refused with
// control_backpressure or control_journal_integrity, writing nothing) and
// written to the generation's FIFO. With no reader on the FIFO the record
// is marked failed and endpoint_not_ready is returned.
//
// The owner is recorded as the Control's sender; ApplyAs records another.
func (m *Manager) Apply(ctx context.Context, ownerID, id, action string, input json.RawMessage) (ControlResult, error) {
	if err := checkContext(ctx); err != nil {
		return ControlResult{}, err
	}
	return m.ApplyAs(ctx, ownerID, ownerID, id, action, input)
}

// ApplyAs is Apply on behalf of ownerID by senderID, the principal that
// actually sent the Control (a person acting on an agent's Run acts as its
// owner). senderID is kept on the journal record; an empty senderID
// records the owner.
func (m *Manager) ApplyAs(ctx context.Context, ownerID, senderID, id, action string, input json.RawMessage) (ControlResult, error) {
	if err := checkContext(ctx); err != nil {
		return ControlResult{}, err
	}
	if senderID == "" {
		senderID = ownerID
	}
	action = strings.TrimSpace(action)
	if err := ValidateAction(action); err != nil {
		return ControlResult{}, err
	}
	switch action {
	case "kill":
		res, err := m.Kill(ctx, ownerID, id)
		return ControlResult{Kill: res}, err
	case "archive":
		res, err := m.Archive(ctx, ownerID, id)
		return ControlResult{Archive: res}, err
	case "prune":
		var in struct {
			PreserveArtifacts bool            `json:"preserve_artifacts"`
			Removed           json.RawMessage `json:"preserveArtifacts"`
		}
		if len(input) > 0 {
			_ = json.Unmarshal(input, &in)
		}
		if in.Removed != nil {
			// The old spelling is refused rather than ignored: ignoring
			// it would delete the artifacts its sender asked to keep.
			return ControlResult{}, errorf(CodeInvalidRequest, "preserveArtifacts was renamed preserve_artifacts; send preserve_artifacts")
		}
		res, err := m.Prune(ctx, ownerID, id, in.PreserveArtifacts)
		return ControlResult{Prune: res}, err
	}
	res, err := m.deliver(ctx, ownerID, senderID, id, action, input)
	return ControlResult{Delivery: res}, err
}

// deliver admits a declared Control action to the journal and writes it
// to the generation's FIFO. When another node supervises the generation,
// that node writes it (see forward.go) and deliver waits, bounded, for it
// to record the outcome.
func (m *Manager) deliver(ctx context.Context, ownerID, senderID, id, action string, input json.RawMessage) (*ControlDelivery, error) {
	env, err := NewEnvelope(action, input)
	if err != nil {
		return nil, err
	}
	res, fwd, err := m.deliverLocked(ctx, ownerID, senderID, id, action, env)
	if fwd == nil || err != nil {
		return res, err
	}
	return m.awaitDelivery(ctx, fwd.run, fwd.node, fwd.control)
}

// forwarded is a Control admitted for another node to deliver.
type forwarded struct {
	run     store.RunRecord
	node    string
	control store.Control
}

// endpointNotReadyStored is the error recorded on a Control that found no
// reader on its FIFO.
const endpointNotReadyStored = "control endpoint is not ready for this Run generation"

// deliverLocked is deliver under the Run's lock. For a generation another
// node supervises it admits the Control, signals that node and returns
// what to wait for.
func (m *Manager) deliverLocked(ctx context.Context, ownerID, senderID, id, action string, env Envelope) (*ControlDelivery, *forwarded, error) {
	unlock := m.lock(id)
	defer unlock()
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		return nil, nil, err
	}
	d := decodeDoc(r)
	declared := false
	for _, a := range d.Control {
		declared = declared || a == action
	}
	if !declared {
		avail := "none"
		if len(d.Control) > 0 {
			avail = strings.Join(d.Control, ",")
		}
		return nil, nil, errorf(CodeUndeclaredAction, "undeclared Run Control action: %s; available=%s", action, avail)
	}
	if r.Archived {
		return nil, nil, errorf(CodeRunArchived, "Run %s is archived; it takes no Controls.", id)
	}
	status, ident := m.status(r)
	if status != StatusRunning {
		return nil, nil, &Error{Code: CodeTerminalState, Message: fmt.Sprintf("Run is not running: %s", id), Details: map[string]any{"status": status}}
	}
	node := m.supervisor(r)
	if node == "" && ident != identityValid {
		return nil, nil, errorf("process_identity_"+ident, "Run process identity %s: %s", ident, id)
	}
	now := m.now().UTC().Truncate(time.Millisecond)
	c := store.Control{ID: uuid.NewString(), InstanceID: r.InstanceID, Action: env.Action, Input: env.Input, Status: store.ControlQueued, QueuedAt: &now, SenderID: senderID}
	if err := m.controls.do(store.ControlAdmission{RunID: id, Control: c}); err != nil {
		return nil, nil, m.admissionError(id, err)
	}
	if node != "" {
		m.notify(r.OwnerID, id, "run.control")
		m.cfg.Signal(r.OwnerID, Signal{Kind: SignalControl, Run: id, Node: node, ControlID: c.ID})
		return nil, &forwarded{run: r, node: node, control: c}, nil
	}
	wire := WireRecord(c.ID, c.Action, c.Input)
	n, derr := writeFIFO(d.FIFO, wire)
	if derr != nil {
		reason, msg := CodeDeliveryFailed, "Run Control delivery failed: "+derr.Error()
		if errors.Is(derr, errNoReader) {
			reason, msg = CodeEndpointNotReady, "Run Control endpoint is not ready."
		}
		stored := msg
		if reason == CodeEndpointNotReady {
			stored = endpointNotReadyStored
		}
		_, _ = m.st.TransitionControl(ctx, id, c.ID, store.ControlFailed, []string{store.ControlQueued, store.ControlDelivered}, stored, m.now())
		return nil, nil, &Error{Code: reason, Message: msg, Details: map[string]any{"action": action, "control_id": c.ID,
			"run": id, "run_instance_id": r.InstanceID, "endpoint_type": "fifo"}}
	}
	m.markDelivered(ctx, id, c)
	m.notify(r.OwnerID, id, "run.control")
	return &ControlDelivery{Action: action, Bytes: n, ControlID: c.ID, Delivery: "delivered", EndpointType: "fifo",
		NextActions: []tool.Next{inspectNext("run:"+id, "control")}, Run: id, InstanceID: r.InstanceID}, nil, nil
}

// markDelivered records that c, just admitted to Run id's journal, was
// written to the Run. The one-statement mark is tried first; when it
// changes nothing, the full transition decides, and a Control the Run
// already claimed stays claimed.
func (m *Manager) markDelivered(ctx context.Context, id string, c store.Control) {
	at := m.now()
	err := m.st.MarkControlDelivered(ctx, id, c, at)
	if errors.Is(err, store.ErrConflict) {
		_, err = m.st.TransitionControl(ctx, id, c.ID, store.ControlDelivered, nil, "", at)
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		m.log.Warn("record control delivery", "run", id, "control", c.ID, "err", err)
	}
}

// terminalControlReason is the error recorded on a Control whose Run
// generation ended before the Control was handled; it starts with the
// code terminal_state.
const terminalControlReason = "terminal_state: the Run generation ended before the Control was handled"

// failStranded records failed, with terminal_state, every pending Control
// (queued, delivered or claimed) of Run r that can no longer be handled:
// all of them when r has ended, else those of generations before the
// current one. Such Controls would otherwise wait forever and count
// against the Run's bound of pending Controls.
func (m *Manager) failStranded(ctx context.Context, r store.RunRecord) error {
	ended := !r.EndedAt.IsZero()
	cs, err := m.st.Controls(ctx, r.ID)
	if err != nil {
		return err
	}
	failed := false
	for _, c := range cs {
		if !store.ControlPending(c.Status) || (!ended && c.InstanceID == r.InstanceID) {
			continue
		}
		if _, err := m.st.TransitionControl(ctx, r.ID, c.ID, store.ControlFailed, nil, terminalControlReason, m.now()); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		failed = true
	}
	if failed {
		m.notify(r.OwnerID, r.ID, "run.control")
	}
	return nil
}

func (m *Manager) admissionError(id string, err error) error {
	var ce *store.ControlError
	if !errors.As(err, &ce) {
		if errors.Is(err, store.ErrNotFound) {
			return notFound(id)
		}
		return err
	}
	d := map[string]any{"reason": ce.Reason, "pending": ce.Pending, "limit": ce.Limit, "journal_bytes": ce.JournalBytes,
		"journal_limit": ce.JournalLimit, "run_instance_id": ce.InstanceID,
		"next_actions": []tool.Next{inspectNext("run:"+id, "control"), inspectNext("runtime", "triage")}}
	if !ce.OldestPendingAt.IsZero() {
		d["oldest_pending_at"] = store.FormatTime(ce.OldestPendingAt)
	}
	if ce.IntegrityReason != "" {
		d["integrity_reason"] = ce.IntegrityReason
	}
	return &Error{Code: ce.Reason, Message: ce.Error(), Details: d}
}

var errNoReader = errors.New("no reader on the control FIFO")

// writeFIFO writes one wire record to the FIFO at path without blocking
// for a reader. The record is smaller than PIPE_BUF, so it is written
// whole or not at all. The Run owns the FIFO's directory: the open does
// not follow a symbolic link, and anything the open finds that is not a
// FIFO (a file the Run put in its place) is closed unwritten.
func writeFIFO(path string, wire []byte) (int, error) {
	if path == "" {
		return 0, errNoReader
	}
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	switch {
	case errors.Is(err, syscall.ENXIO):
		return 0, errNoReader
	case errors.Is(err, syscall.ENOENT):
		return 0, fmt.Errorf("control FIFO not found: %s", path)
	case errors.Is(err, syscall.ELOOP):
		return 0, fmt.Errorf("control FIFO %s is not a FIFO", path)
	case err != nil:
		return 0, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return 0, fmt.Errorf("control FIFO %s is not a FIFO", path)
	}
	n, err := syscall.Write(fd, wire)
	if err != nil {
		return n, err
	}
	if n != len(wire) {
		return n, fmt.Errorf("control endpoint wrote %d of %d bytes", n, len(wire))
	}
	return n, nil
}

// Claim claims a delivered or queued Control of generation instanceID:
// the record id, or the oldest when id is empty. A Control of another
// generation is never claimable.
func (m *Manager) Claim(ctx context.Context, ownerID, id, instanceID, controlID string) (store.Control, error) {
	if err := checkContext(ctx); err != nil {
		return store.Control{}, err
	}
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		return store.Control{}, err
	}
	if instanceID == "" {
		instanceID = r.InstanceID
	}
	if instanceID != r.InstanceID {
		return store.Control{}, errorf(CodeGenerationMismatch, "Run generation changed: %s; a Control of another generation cannot be claimed", id)
	}
	c, err := m.st.ClaimControl(ctx, id, instanceID, controlID, m.now())
	if errors.Is(err, store.ErrNotFound) {
		return c, errorf(CodeNotFound, "no claimable Control %s for run:%s in this generation", controlID, id)
	}
	if err != nil {
		return c, m.admissionError(id, err)
	}
	m.notify(r.OwnerID, id, "run.control")
	return c, nil
}

// Settle marks a claimed Control handled, or failed with errText (cut at
// 4 KiB on a UTF-8 boundary). Only the claiming generation may settle.
func (m *Manager) Settle(ctx context.Context, ownerID, id, instanceID, controlID string, handled bool, errText string) (store.Control, error) {
	if err := checkContext(ctx); err != nil {
		return store.Control{}, err
	}
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		return store.Control{}, err
	}
	if instanceID == "" {
		instanceID = r.InstanceID
	}
	if instanceID != r.InstanceID {
		return store.Control{}, errorf(CodeGenerationMismatch, "Run generation changed: %s", id)
	}
	next := store.ControlHandled
	if !handled {
		next = store.ControlFailed
	}
	c, err := m.st.TransitionControl(ctx, id, controlID, next, []string{store.ControlClaimed}, TruncateError(errText), m.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return c, errorf(CodeNotFound, "Control %s not found for run:%s", controlID, id)
	case errors.Is(err, store.ErrConflict):
		return c, &Error{Code: CodeConflict, Message: fmt.Sprintf("Control %s is %s; only a claimed Control can be marked %s", controlID, c.Status, next), Details: map[string]any{"status": c.Status}}
	case err != nil:
		return c, m.admissionError(id, err)
	}
	m.notify(r.OwnerID, id, "run.control")
	return c, nil
}

package store

import (
	"context"
	"fmt"
	"time"
)

// Kinds of RunRequest.
const (
	// RunRequestLogs asks for the tail of a Run's stdout or stderr.
	RunRequestLogs = "logs"
	// RunRequestKill asks for a Run's process to be killed.
	RunRequestKill = "kill"
)

// RunRequestTextMaxBytes bounds the answer text of a RunRequest: the
// tail of a log, as much as a node reads of it.
const RunRequestTextMaxBytes = 1 << 20

// RunRequest is what one node asks of the node supervising a Run, whose
// process and files are on that node's machine: the tail of a log, or a
// kill. The asking node adds the request, signals the supervising node,
// waits for the answer and deletes the request. The supervising node acts
// only on what the request and the Run's record say.
type RunRequest struct {
	// ID is the request's id, chosen by the asking node.
	ID string
	// RunID and InstanceID name the Run and the generation asked about.
	RunID      string
	InstanceID string
	// Node names the supervising node asked to answer.
	Node string
	// Kind is RunRequestLogs or RunRequestKill.
	Kind string
	// Stream ("stdout" or "stderr") and Lines (the last Lines lines, all
	// when not positive) say which tail a logs request asks for.
	Stream string
	Lines  int
	// RequestedAt is when the request was added.
	RequestedAt time.Time
	// AnsweredAt is when it was answered; zero while it waits.
	AnsweredAt time.Time
	// Text is the answer: the log tail, or the kill's outcome as JSON.
	Text string
	// Error, when the supervising node could not answer, says why.
	Error string
}

// Answered reports whether r has been answered.
func (r RunRequest) Answered() bool { return !r.AnsweredAt.IsZero() }

// CheckRunRequest reports what makes r unfit to be added, wrapping
// ErrInvalid.
func CheckRunRequest(r RunRequest) error {
	switch {
	case r.ID == "" || r.RunID == "" || r.Node == "":
		return fmt.Errorf("%w: a Run request needs an id, a Run and a node", ErrInvalid)
	case r.Kind != RunRequestLogs && r.Kind != RunRequestKill:
		return fmt.Errorf("%w: Run request kind %q is not one of logs, kill", ErrInvalid, r.Kind)
	case r.Kind == RunRequestLogs && r.Stream != "stdout" && r.Stream != "stderr":
		return fmt.Errorf("%w: a logs request needs stream stdout or stderr", ErrInvalid)
	case r.RequestedAt.IsZero():
		return fmt.Errorf("%w: a Run request needs its time", ErrInvalid)
	}
	return nil
}

// CheckRunAnswer reports what makes an answer unfit to be stored,
// wrapping ErrInvalid.
func CheckRunAnswer(text, errText string) error {
	switch {
	case len(text) > RunRequestTextMaxBytes:
		return fmt.Errorf("%w: a Run request's answer is at most %d bytes", ErrInvalid, RunRequestTextMaxBytes)
	case len(errText) > ControlErrorMaxBytes:
		return fmt.Errorf("%w: a Run request's error is at most %d bytes", ErrInvalid, ControlErrorMaxBytes)
	}
	return nil
}

// RunRequests keeps the requests nodes make of the nodes supervising Runs.
type RunRequests interface {
	// AddRunRequest stores r, unanswered. An id in use gives ErrConflict;
	// a request failing CheckRunRequest ErrInvalid.
	AddRunRequest(ctx context.Context, r RunRequest) error
	// RunRequest returns the request id, or ErrNotFound.
	RunRequest(ctx context.Context, id string) (RunRequest, error)
	// AnswerRunRequest records the answer of request id at time at. An
	// unknown id gives ErrNotFound, an answered one ErrConflict, an answer
	// failing CheckRunAnswer ErrInvalid.
	AnswerRunRequest(ctx context.Context, id, text, errText string, at time.Time) error
	// PendingRunRequests returns the unanswered requests asked of node,
	// oldest first.
	PendingRunRequests(ctx context.Context, node string) ([]RunRequest, error)
	// DeleteRunRequest removes request id; ErrNotFound if absent.
	DeleteRunRequest(ctx context.Context, id string) error
	// DeleteRunRequestsBefore removes the requests added before t, answered
	// or not, and returns how many it removed.
	DeleteRunRequestsBefore(ctx context.Context, t time.Time) (int, error)
}

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/assent-run/assent/run/record"
)

// Kinds of RunRequest.
const (
	RunRequestLogs = record.RequestLogs
	RunRequestKill = record.RequestKill
)

// RunRequestTextMaxBytes bounds the answer text of a RunRequest: the
// tail of a log, as much as a node reads of it.
const RunRequestTextMaxBytes = 1 << 20

// RunRequest is what one node asks of the node supervising a Run; it is
// defined with the Runs, in package run/record.
type RunRequest = record.Request

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

package record

import "time"

// Kinds of Request.
const (
	// RequestLogs asks for the tail of a Run's stdout or stderr.
	RequestLogs = "logs"
	// RequestKill asks for a Run's process to be killed.
	RequestKill = "kill"
)

// Request is what one node asks of the node supervising a Run, whose
// process and files are on that node's machine: the tail of a log, or a
// kill. The asking node adds the request, signals the supervising node,
// waits for the answer and deletes the request. The supervising node acts
// only on what the request and the Run's record say.
type Request struct {
	// ID is the request's id, chosen by the asking node.
	ID string
	// RunID and InstanceID name the Run and the generation asked about.
	RunID      string
	InstanceID string
	// Node names the supervising node asked to answer.
	Node string
	// Kind is RequestLogs or RequestKill.
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
func (r Request) Answered() bool { return !r.AnsweredAt.IsZero() }

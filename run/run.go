// Package run supervises Runs: long-running work started from a Recipe,
// steered by a bounded Control journal and observed through a bounded Trace.
//
// The model follows pi-actors 0.58.2:
//
//   - A Recipe is a JSON definition (args, defaults, a command template,
//     declared Control actions, artifacts). Spawning it creates a Run: a
//     process group started with "sh -c", its logs under
//     <data>/runs/<id>/, and its metadata, Control journal and Trace in the
//     store.
//   - Every start of a Run id is a generation with a fresh run_instance_id
//     (a UUID). The generation fences everything: Controls, Trace, signals
//     and run-scoped tokens of another generation are refused.
//   - Status is derived, never trusted: done or failed from the exit code,
//     killed or cancelled when the runtime stopped it, running while the
//     recorded process (pid and kernel start time) is alive, lost when
//     another node found the lease of the node supervising it expired
//     (see LeaseKeeper), exited otherwise.
//   - A Control is a small declared action (at most 64 characters, input
//     at most 380 serialized bytes, wire record at most 512 bytes). It is
//     admitted to the journal (at most 64 pending, 1 MiB), written to the
//     generation's FIFO, and claimed and settled by the service by id:
//     queued → delivered → claimed → handled | failed.
//   - The Trace keeps at most 2,048 events and 4 MiB per generation; past
//     either bound the newest suffix is kept with one cumulative
//     runtime.trace_compacted marker.
//   - Runs belong to the principal that spawned them. To anyone else a
//     Run answers exactly as a Run that does not exist (not_found).
//   - kill (running Runs), archive and prune (terminal Runs) are owned by
//     the runtime and never pass through the Control journal.
package run

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/assent-run/assent/run/recipe"
	"github.com/assent-run/assent/store"
)

// Limits of the Control envelope and the journal (see store for the
// journal and Trace bounds, which the store enforces).
const (
	ActionMaxLength       = recipe.ActionMaxLength
	ControlInputMaxBytes  = 380
	ControlWireMaxBytes   = 512
	ControlPendingLimit   = store.ControlPendingLimit
	ControlTerminalLimit  = store.ControlTerminalLimit
	ControlJournalMaxByte = store.ControlJournalMaxBytes
	TraceMaxEvents        = store.TraceMaxEvents
	TraceMaxBytes         = store.TraceMaxBytes
	TraceEventMaxBytes    = store.TraceEventMaxBytes
	TraceSummaryMaxChars  = 1000
	// StateSchema names the layout of Run state.
	StateSchema = "run-kernel-v1"
)

// Error is a refusal with a stable snake_case code and a message that says
// what to do. Details carries structured figures (for example the
// backpressure counts).
type Error struct {
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string { return e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error codes.
const (
	CodeInvalidRequest     = "invalid_request"
	CodeInvalidRecipe      = "invalid_recipe"
	CodeInvalidControl     = "invalid_control"
	CodeInvalidTrace       = "invalid_trace_event"
	CodeNotFound           = "not_found"
	CodeRunActive          = "run_active"
	CodeRunArchived        = "run_archived"
	CodeNotRunning         = "not_running"
	CodeNotTerminal        = "not_terminal"
	CodeUndeclaredAction   = "undeclared_action"
	CodeBackpressure       = "control_backpressure"
	CodeIntegrity          = "control_journal_integrity"
	CodeEndpointNotReady   = "endpoint_not_ready"
	CodeDeliveryFailed     = "delivery_failed"
	CodeGenerationMismatch = "generation_mismatch"
	CodeIdentity           = "process_identity"
	CodeConflict           = "conflict"
	// CodeRateLimited: too many requests for one Run wait on another node.
	CodeRateLimited    = "rate_limited"
	CodeToolExists     = "tool_exists"
	CodeToolCollision  = "tool_name_collision"
	CodeReservedName   = "reserved_tool_name"
	CodeStartFailed    = "start_failed"
	CodePreserveFailed = "preserve_failed"
	CodeLimitExceeded  = "limit_exceeded"
	CodeSandbox        = "sandbox_unavailable"
)

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// RunIDMaxBytes bounds a Run id, so it always fits in a file name with room
// for the runtime's suffixes.
const RunIDMaxBytes = 128

// ValidRunID checks a Run id: at most RunIDMaxBytes of letters, digits,
// dot, underscore and dash. A longer id is limit_exceeded.
func ValidRunID(id string) error {
	if len(id) > RunIDMaxBytes {
		return errorf(CodeLimitExceeded, "Run id is %d bytes; the limit is %d. Choose a shorter id.", len(id), RunIDMaxBytes)
	}
	if !runIDPattern.MatchString(id) || id == "." || id == ".." {
		return errorf(CodeInvalidRequest, "Run id may contain only letters, numbers, dot, underscore, and dash.")
	}
	return nil
}

// ParseTarget splits "run:<id>" into the id.
func ParseTarget(target string) (string, error) {
	t := strings.TrimSpace(target)
	if !strings.HasPrefix(t, "run:") {
		return "", errorf(CodeInvalidRequest, "unsupported Run target: %s; use run:<id>", t)
	}
	id := strings.TrimPrefix(t, "run:")
	if len(id) > RunIDMaxBytes {
		return "", errorf(CodeLimitExceeded, "Run target id is %d bytes; the limit is %d.", len(id), RunIDMaxBytes)
	}
	if !runIDPattern.MatchString(id) || id == "." || id == ".." {
		return "", errorf(CodeInvalidRequest, "invalid Run target: %s; a Run id has letters, numbers, dot, underscore and dash, and is not . or ..", t)
	}
	return id, nil
}

// checkContext refuses a nil context, which the methods that take one
// need for cancellation and the store.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return errorf(CodeInvalidRequest, "a nil context.Context was passed; pass the caller's context or context.Background()")
	}
	return nil
}

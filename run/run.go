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

	"github.com/assent-run/assent/wire"
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

// Error codes: the codes of the wire's one table (wire), under the
// names this package gives them, so each is written once.
const (
	CodeInvalidRequest     = string(wire.InvalidRequest)
	CodeInvalidRecipe      = string(wire.InvalidRecipe)
	CodeInvalidControl     = string(wire.InvalidControl)
	CodeInvalidTrace       = string(wire.InvalidTraceEvent)
	CodeNotFound           = string(wire.NotFound)
	CodeRunActive          = string(wire.RunActive)
	CodeRunArchived        = string(wire.RunArchived)
	CodeNotRunning         = string(wire.NotRunning)
	CodeNotTerminal        = string(wire.NotTerminal)
	CodeTerminalState      = string(wire.TerminalState)
	CodeUndeclaredAction   = string(wire.UndeclaredAction)
	CodeBackpressure       = string(wire.ControlBackpressure)
	CodeIntegrity          = string(wire.JournalIntegrity)
	CodeEndpointNotReady   = string(wire.EndpointNotReady)
	CodeDeliveryFailed     = string(wire.DeliveryFailed)
	CodeGenerationMismatch = string(wire.GenerationMismatch)
	CodeIdentity           = string(wire.ProcessIdentity)
	CodeConflict           = string(wire.Conflict)
	// CodeRateLimited: too many requests for one Run wait on another node.
	CodeRateLimited    = string(wire.RateLimited)
	CodeToolExists     = string(wire.ToolExists)
	CodeToolCollision  = string(wire.ToolNameCollision)
	CodeReservedName   = string(wire.ReservedToolName)
	CodeStartFailed    = string(wire.StartFailed)
	CodePreserveFailed = string(wire.PreserveFailed)
	CodeLimitExceeded  = string(wire.LimitExceeded)
	CodeSandbox        = string(wire.SandboxUnavailable)
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

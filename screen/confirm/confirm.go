// Package confirm runs the press of a governed button: the checks, the
// application's confirmation and the tool's handler, in the order the Omni IR
// format requires.
//
// An application registers its tools in a [Registry]: each [Tool] has a name,
// a JSON Schema for its params, the params that are secret, an optional
// [Confirmation] in the application's own words, and a [Handler]. A screen's
// stream can only name a tool; everything else, the confirmation included,
// comes from the registry, so no stream can add, skip or change a
// confirmation. Tool names are compared byte for byte: a name with a
// look-alike letter or an invisible character is simply not registered.
//
// A press is two steps, so that a person can be asked in between:
//
//  1. [Registry.Prepare] checks, in order, the fields the params read (the
//     caller passes their problems; any problem stops the press with
//     mutation_blocked), the tool (unknown_tool) and the params against the
//     tool's schema (invalid_params), then writes the confirmation sentence.
//     It returns a [Pending] press.
//  2. The caller shows [Pending.Sentence] with a Cancel and a Confirm, and
//     calls [Pending.Confirm] (which runs the handler once) or
//     [Pending.Cancel]. A tool without a confirmation has an empty
//     sentence, and the caller confirms at once.
//
// Every failure is an [*Error] with a stable code, except that a context
// that is already done is reported as its own error. Confirmations protect
// people from slips and misleading screens; they are not a security
// boundary. The backend's own checks (who may run the tool on what data)
// stay with the handler and the server.
package confirm

import (
	"context"
	"fmt"
	"strings"

	"github.com/assent-run/assent/screen/field"
)

// Handler runs a tool's action after the press passed every check and the
// person confirmed. It is called at most once per press.
type Handler func(ctx context.Context, req Request) (Result, error)

// Request is what a handler is given.
type Request struct {
	// Tool is the tool's registered name.
	Tool string
	// Params are the params after the schema check: decoded JSON (float64
	// numbers, strings, bools, nil, []any, map[string]any), a copy that
	// no one else holds.
	Params map[string]any
}

// Result is what a handler returns.
type Result struct {
	// Value is the action's result object, sent back as "result".
	Value map[string]any
	// Update is an optional Omni IR update for the screen whose button was
	// pressed, written by the application's code, never by a model.
	Update string
}

// FieldProblem is the problem of one field that a press's params read, as
// [field.Check] reported it. A nil Problem means the field passes.
type FieldProblem struct {
	FieldID string         `json:"field"`
	Problem *field.Problem `json:"problem"`
}

// ParamIssue is one way the params break the tool's schema.
type ParamIssue struct {
	// Path locates the value in the params, its keys and list indexes
	// joined with dots ("amount", "items.0.sku"); "" is the params object.
	Path string `json:"path"`
	// Message says what is wrong. For a secret param it never repeats the
	// value.
	Message string `json:"message"`
}

// Error codes. They are stable: callers and clients compare them.
const (
	// CodeMutationBlocked: a field the params read has a problem, so
	// nothing was checked further or sent. Error.Fields and Error.Focus say
	// which.
	CodeMutationBlocked = "mutation_blocked"
	// CodeUnknownTool: no tool of that name is registered, or it has no
	// handler.
	CodeUnknownTool = "unknown_tool"
	// CodeInvalidParams: the params break the tool's schema. Error.Issues
	// says how.
	CodeInvalidParams = "invalid_params"
	// CodeConfirmationFailed: the confirmation sentence could not be
	// written (a function failed, or a template names a param the press
	// did not send), so nothing runs.
	CodeConfirmationFailed = "confirmation_failed"
	// CodeToolChanged: the tool was replaced or removed after the press
	// was prepared, so what the person saw may no longer hold.
	CodeToolChanged = "tool_changed"
	// CodeCancelled: the press was cancelled, so its handler never runs.
	CodeCancelled = "cancelled"
	// CodeHandlerFailed: the handler returned an error or panicked.
	// Error.Err holds the handler's own error.
	CodeHandlerFailed = "handler_failed"
	// CodeInvalidTool: a tool given to the registry is malformed.
	CodeInvalidTool = "invalid_tool"
	// CodeToolExists: a tool of that name is already registered.
	CodeToolExists = "tool_exists"
)

// Error is a press or registration that failed.
type Error struct {
	// Code is one of the Code constants.
	Code string
	// Tool is the tool's name as the caller gave it.
	Tool string
	// Message explains the failure, for the application and its logs.
	// It never holds the value of a secret param.
	Message string
	// Fields lists, for CodeMutationBlocked, the fields that failed, in
	// the order the caller gave them.
	Fields []FieldProblem
	// Focus is, for CodeMutationBlocked, the first field that failed: the
	// one to move focus to.
	Focus string
	// Issues lists, for CodeInvalidParams, what is wrong with the params.
	Issues []ParamIssue
	// Err is the cause: the handler's or confirmation function's error.
	Err error
}

func (e *Error) Error() string {
	return "confirm: " + e.Message
}

// Unwrap returns the cause, so errors.Is and errors.As see the handler's
// own error.
func (e *Error) Unwrap() error { return e.Err }

// Issue returns the Omni IR issue code a renderer reports for e:
// mutation_blocked when the press was stopped before anything was sent,
// handler_failed when the confirmation or the handler failed, and "" for a
// cancelled press or a registration error.
func (e *Error) Issue() string {
	switch e.Code {
	case CodeMutationBlocked, CodeUnknownTool, CodeInvalidParams, CodeToolChanged:
		return "mutation_blocked"
	case CodeConfirmationFailed, CodeHandlerFailed:
		return "handler_failed"
	}
	return ""
}

// blocked returns the mutation_blocked error for the failing fields among
// problems, or nil when every field passes.
func blocked(tool string, problems []FieldProblem) *Error {
	var failed []FieldProblem
	for _, fp := range problems {
		if fp.Problem != nil {
			failed = append(failed, fp)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	parts := make([]string, len(failed))
	for i, fp := range failed {
		parts[i] = fmt.Sprintf("%q (%s)", fp.FieldID, fp.Problem.Key)
	}
	noun := "field needs"
	if len(failed) > 1 {
		noun = "fields need"
	}
	return &Error{
		Code:    CodeMutationBlocked,
		Tool:    tool,
		Message: fmt.Sprintf("%d %s attention before %q can run: %s; show the messages and move focus to %q", len(failed), noun, tool, strings.Join(parts, ", "), failed[0].FieldID),
		Fields:  failed,
		Focus:   failed[0].FieldID,
	}
}

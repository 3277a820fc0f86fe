package flow

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error codes. The first three are the program-loading codes of the Control
// Program ABI; the rest are the kernel's. Codes are stable: programs and
// people may match on them.
const (
	// CodeProgramInvalid: the document is malformed or breaks a rule of the
	// manifest.
	CodeProgramInvalid = "PROGRAM_INVALID"
	// CodeSchemaUnsupported: schema_version names a schema this runtime does
	// not implement.
	CodeSchemaUnsupported = "PROGRAM_SCHEMA_UNSUPPORTED"
	// CodeRuntimeTooOld: requires_runtime is above the runtime's version.
	CodeRuntimeTooOld = "RUNTIME_TOO_OLD"

	// CodeCapabilityNotDeclared: a transition needs a capability that the
	// program's capability_surface does not declare.
	CodeCapabilityNotDeclared = "CAPABILITY_NOT_DECLARED"
	// CodeCapabilityDenied: the principal was not granted a capability the
	// transition needs.
	CodeCapabilityDenied = "CAPABILITY_DENIED"
	// CodeStalePrescription: re-resolution at apply time no longer yields
	// the same prescription (the instance, the program or the principal
	// changed since it was issued).
	CodeStalePrescription = "STALE_PRESCRIPTION"
	// CodePrescriptionExpired: the prescription's lifetime has passed.
	CodePrescriptionExpired = "PRESCRIPTION_EXPIRED"
	// CodeEffectCapabilityDenied: an effect was handed an effective
	// capability set without its kernel minimum.
	CodeEffectCapabilityDenied = "EFFECT_CAPABILITY_DENIED"
	// CodeEffectUnavailable: the runtime knows the effect by name but the
	// application has not wired an implementation.
	CodeEffectUnavailable = "EFFECT_UNAVAILABLE"
	// CodeEffectFailed: the effect failed without changing anything; the
	// instance is unchanged.
	CodeEffectFailed = "EFFECT_FAILED"
	// CodeRecoveryRequired: the outcome of an effect is uncertain or its
	// result could not be verified; only RECOVERY transitions are selectable
	// until one commits.
	CodeRecoveryRequired = "RECOVERY_REQUIRED"
	// CodeNotFound: no instance, prescription, approval or program with that
	// id exists (or it belongs to someone else).
	CodeNotFound = "NOT_FOUND"
	// CodeNotPrescribed: resolution did not prescribe a transition.
	CodeNotPrescribed = "NOT_PRESCRIBED"
	// CodeApprovalClosed: the approval was already decided or no longer
	// matches the instance.
	CodeApprovalClosed = "APPROVAL_CLOSED"
	// CodeAlreadyApproved: the person already approved this approval; one
	// person never counts twice towards its quorum.
	CodeAlreadyApproved = "ALREADY_APPROVED"
	// CodeMorePeopleNeeded: the person's approval was recorded, and the
	// approval needs more people before the transition is applied. Nothing
	// was applied yet.
	CodeMorePeopleNeeded = "MORE_PEOPLE_NEEDED"
	// CodeNotInGroup: the approval asks for people of a group the person
	// is not a member of.
	CodeNotInGroup = "NOT_IN_GROUP"
	// CodeApprovalChanged: the approval's values were changed by a person
	// since the card the decision was made on was read.
	CodeApprovalChanged = "APPROVAL_CHANGED"
	// CodeEditRefused: a person's change to an approval's parameters breaks
	// a rule the requester's own request must follow; nothing changed.
	CodeEditRefused = "EDIT_REFUSED"
	// CodeParameterInvalid: a parameter value breaks the rule the
	// application set on it (see WithParameterCheck).
	CodeParameterInvalid = "PARAMETER_INVALID"
	// CodeParameterNotEditable: the parameter cannot be changed by the
	// person approving (a secret one).
	CodeParameterNotEditable = "PARAMETER_NOT_EDITABLE"
	// CodeRevisionConflict: the instance changed under a concurrent writer.
	CodeRevisionConflict = "REVISION_CONFLICT"
	// CodeStateInvalid: an instance state or principal is malformed.
	CodeStateInvalid = "STATE_INVALID"
)

// Error is one reason a program, a state or a kernel call was refused. Path
// is a JSON path into the offending document (for example
// "transitions[2].required_capabilities[1]"), empty when the error concerns
// no particular place.
type Error struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Code + ": " + e.Message
	}
	return e.Code + ": " + e.Path + ": " + e.Message
}

// ErrorList is the error Load returns: every problem found, in the
// documented order of checks. It is never empty.
type ErrorList []*Error

func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more)", l[0].Error(), len(l)-1)
}

// Unwrap lets errors.As find the individual errors.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// ErrorCode returns the code of err: the code of an *Error, or of the first
// error of an ErrorList. It returns "" for errors that carry no code.
func ErrorCode(err error) string {
	var l ErrorList
	if errors.As(err, &l) && len(l) > 0 {
		return l[0].Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// pathStack is a JSON path under construction. The decoder and the
// validator push and pop elements as they descend, without allocating, and
// render the path only when they report an error.
type pathStack struct {
	elems []pathElem
}

type pathElem struct {
	key   string
	index int // used when key is ""
}

// push and pushIndex reuse the slot a pop left and write its key only
// when it differs: the same keys recur at the same depths, and a write of
// a string to the heap costs a write barrier while the collector runs.
func (p *pathStack) push(key string) {
	n := len(p.elems)
	if n == cap(p.elems) {
		p.elems = append(p.elems, pathElem{key: key})
		return
	}
	p.elems = p.elems[:n+1]
	e := &p.elems[n]
	if e.key != key {
		e.key = key
	}
	e.index = 0 // an empty key renders as an index, as a fresh element would
}

func (p *pathStack) pushIndex(i int) {
	n := len(p.elems)
	if n == cap(p.elems) {
		p.elems = append(p.elems, pathElem{index: i})
		return
	}
	p.elems = p.elems[:n+1]
	e := &p.elems[n]
	if e.key != "" {
		e.key = ""
	}
	e.index = i
}

func (p *pathStack) depth() int     { return len(p.elems) }
func (p *pathStack) pop()           { p.elems = p.elems[:len(p.elems)-1] }
func (p *pathStack) String() string { return renderPath(p.elems) }

// with renders the current path followed by extra elements: a string key
// or an int index each.
func (p *pathStack) with(extra ...any) string {
	elems := append([]pathElem(nil), p.elems...)
	for _, e := range extra {
		switch v := e.(type) {
		case string:
			elems = append(elems, pathElem{key: v})
		case int:
			elems = append(elems, pathElem{index: v})
		}
	}
	return renderPath(elems)
}

func renderPath(elems []pathElem) string {
	var b strings.Builder
	for _, e := range elems {
		if e.key == "" {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.key)
	}
	return b.String()
}

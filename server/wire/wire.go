// Package wire is the error vocabulary of assent's HTTP API and MCP tools.
//
// Every error a client can receive has one body:
//
//	{"error": {"code": "not_found", "message": "…", "retryable": false, "data": {…}}}
//
// code is stable and machine-readable, message says what happened and what
// to do, retryable says whether sending the same request again may succeed,
// and data, when present, carries structured detail (the issues of invalid
// params, the figures of backpressure, the reason of a control refusal).
//
// Each code has one HTTP status, given by [StatusOf]. A code missing from
// the table is a 400. The codes of the Flow kernel keep the kernel's upper
// case spelling; every other code is lower snake_case.
package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Code is a stable error code.
type Code string

// Codes of requests that are malformed or refused for their content.
const (
	InvalidRequest       Code = "invalid_request"
	InvalidParams        Code = "invalid_params"
	UnsupportedVersion   Code = "unsupported_version"
	UnsupportedMediaType Code = "unsupported_media_type"
	MethodNotAllowed     Code = "method_not_allowed"
	NotFound             Code = "not_found"
	TooLarge             Code = "too_large"
	LimitExceeded        Code = "limit_exceeded"
	UnknownTool          Code = "unknown_tool"
	MutationBlocked      Code = "mutation_blocked"
	UpdateRejected       Code = "update_rejected"
)

// Codes of who is asking and what they may do.
const (
	SignInRequired            Code = "sign_in_required"
	Forbidden                 Code = "forbidden"
	BadOrigin                 Code = "bad_origin"
	HumanConfirmationRequired Code = "human_confirmation_required"
	SignInRequiredHuman       Code = "sign_in_required_human"
	ConfirmationRequired      Code = "confirmation_required"
)

// Codes of state that changed or is in the way.
const (
	Conflict              Code = "conflict"
	AlreadyExists         Code = "already_exists"
	IdempotencyConflict   Code = "idempotency_conflict"
	IdempotencyInProgress Code = "idempotency_in_progress"
	ToolChanged           Code = "tool_changed"
	// AlreadyDecided: someone else decided first; data says who and how
	// (status, decided_by, decided_at, and the receipt or reason).
	AlreadyDecided Code = "already_decided"
)

// Codes of load and of failures inside the server.
const (
	RateLimited     Code = "rate_limited"
	TooManySessions Code = "too_many_sessions"
	Internal        Code = "internal"
	ServerError     Code = "server_error"
	ToolFailed      Code = "tool_failed"
	Unavailable     Code = "unavailable"
	ModelUnverified Code = "model_unverified"
	// StoreUnavailable: the store could not save the change, so nothing
	// changed; send it again when the store is reachable.
	StoreUnavailable Code = "store_unavailable"
)

// Refusal reasons of the control registry (docs/controls.md). A refused
// control command reports its reason as the code.
const (
	StaleRevision       Code = "stale_revision"
	StagedValueStale    Code = "staged_value_stale"
	NoStagedValue       Code = "no_staged_value"
	NothingToUndo       Code = "nothing_to_undo"
	SensitiveControl    Code = "sensitive_control"
	ControlNotWritable  Code = "control_not_writable"
	ControlNotEditable  Code = "control_not_editable"
	ConsentRequired     Code = "consent_required"
	Denied              Code = "denied"
	Unsupported         Code = "unsupported"
	InvalidValue        Code = "invalid_value"
	CommandFailed       Code = "command_failed"
	ControlBackpressure Code = "control_backpressure"
)

// Codes of Runs (docs/runs.md).
const (
	RunActive          Code = "run_active"
	RunArchived        Code = "run_archived"
	NotRunning         Code = "not_running"
	NotTerminal        Code = "not_terminal"
	TerminalState      Code = "terminal_state"
	GenerationMismatch Code = "generation_mismatch"
	JournalIntegrity   Code = "control_journal_integrity"
	ToolExists         Code = "tool_exists"
	ToolNameCollision  Code = "tool_name_collision"
	PreserveFailed     Code = "preserve_failed"
	StartFailed        Code = "start_failed"
	EndpointNotReady   Code = "endpoint_not_ready"
	NodeUnavailable    Code = "node_unavailable"
	DeliveryFailed     Code = "delivery_failed"
	ProposalDecided    Code = "proposal_decided"
	StaleProposal      Code = "stale_proposal"
)

// Codes of the Flow kernel (docs/flows.md), spelled as the kernel spells
// them.
const (
	CapabilityDenied       Code = "CAPABILITY_DENIED"
	CapabilityNotDeclared  Code = "CAPABILITY_NOT_DECLARED"
	ProgramNotActive       Code = "PROGRAM_NOT_ACTIVE"
	StalePrescription      Code = "STALE_PRESCRIPTION"
	PrescriptionExpired    Code = "PRESCRIPTION_EXPIRED"
	RevisionConflict       Code = "REVISION_CONFLICT"
	ApprovalClosed         Code = "APPROVAL_CLOSED"
	RecoveryRequired       Code = "RECOVERY_REQUIRED"
	NotPrescribed          Code = "NOT_PRESCRIBED"
	EffectFailed           Code = "EFFECT_FAILED"
	EffectUnavailable      Code = "EFFECT_UNAVAILABLE"
	EffectCapabilityDenied Code = "EFFECT_CAPABILITY_DENIED"
)

// entry is a code's row in the table.
type entry struct {
	status    int
	retryable bool
}

// table is the one mapping of codes to HTTP statuses. A code is retryable
// when its status is 429 or 5xx unless its row says otherwise; a few 409s
// are retryable because the conflict passes by itself.
var table = map[Code]entry{
	InvalidRequest:       {http.StatusBadRequest, false},
	UnsupportedVersion:   {http.StatusBadRequest, false},
	SignInRequired:       {http.StatusUnauthorized, false},
	Forbidden:            {http.StatusForbidden, false},
	BadOrigin:            {http.StatusForbidden, false},
	UnknownTool:          {http.StatusForbidden, false},
	NotFound:             {http.StatusNotFound, false},
	MethodNotAllowed:     {http.StatusMethodNotAllowed, false},
	TooLarge:             {http.StatusRequestEntityTooLarge, false},
	LimitExceeded:        {http.StatusRequestEntityTooLarge, false},
	UnsupportedMediaType: {http.StatusUnsupportedMediaType, false},
	InvalidParams:        {http.StatusUnprocessableEntity, false},
	MutationBlocked:      {http.StatusUnprocessableEntity, false},
	UpdateRejected:       {http.StatusUnprocessableEntity, false},

	HumanConfirmationRequired: {http.StatusForbidden, false},
	SignInRequiredHuman:       {http.StatusForbidden, false},
	ConfirmationRequired:      {http.StatusConflict, false},

	Conflict:              {http.StatusConflict, false},
	AlreadyExists:         {http.StatusConflict, false},
	IdempotencyConflict:   {http.StatusConflict, false},
	IdempotencyInProgress: {http.StatusConflict, true},
	ToolChanged:           {http.StatusConflict, false},
	AlreadyDecided:        {http.StatusConflict, false},

	RateLimited:      {http.StatusTooManyRequests, true},
	TooManySessions:  {http.StatusTooManyRequests, true},
	Internal:         {http.StatusInternalServerError, true},
	ServerError:      {http.StatusInternalServerError, true},
	ToolFailed:       {http.StatusInternalServerError, true},
	Unavailable:      {http.StatusServiceUnavailable, true},
	ModelUnverified:  {http.StatusServiceUnavailable, true},
	StoreUnavailable: {http.StatusServiceUnavailable, true},

	StaleRevision:       {http.StatusConflict, false},
	StagedValueStale:    {http.StatusConflict, false},
	NoStagedValue:       {http.StatusConflict, false},
	NothingToUndo:       {http.StatusConflict, false},
	SensitiveControl:    {http.StatusForbidden, false},
	ControlNotWritable:  {http.StatusForbidden, false},
	ControlNotEditable:  {http.StatusForbidden, false},
	ConsentRequired:     {http.StatusForbidden, false},
	Denied:              {http.StatusForbidden, false},
	Unsupported:         {http.StatusForbidden, false},
	InvalidValue:        {http.StatusForbidden, false},
	CommandFailed:       {http.StatusBadGateway, true},
	ControlBackpressure: {http.StatusTooManyRequests, true},

	RunActive:          {http.StatusConflict, false},
	RunArchived:        {http.StatusConflict, false},
	NotRunning:         {http.StatusConflict, false},
	NotTerminal:        {http.StatusConflict, false},
	TerminalState:      {http.StatusConflict, false},
	GenerationMismatch: {http.StatusConflict, false},
	JournalIntegrity:   {http.StatusConflict, false},
	ToolExists:         {http.StatusConflict, false},
	ToolNameCollision:  {http.StatusConflict, false},
	PreserveFailed:     {http.StatusConflict, false},
	StartFailed:        {http.StatusInternalServerError, false},
	EndpointNotReady:   {http.StatusServiceUnavailable, true},
	NodeUnavailable:    {http.StatusServiceUnavailable, true},
	DeliveryFailed:     {http.StatusServiceUnavailable, false},
	ProposalDecided:    {http.StatusConflict, false},
	StaleProposal:      {http.StatusConflict, false},

	CapabilityDenied:       {http.StatusForbidden, false},
	CapabilityNotDeclared:  {http.StatusForbidden, false},
	ProgramNotActive:       {http.StatusForbidden, false},
	StalePrescription:      {http.StatusConflict, false},
	PrescriptionExpired:    {http.StatusConflict, false},
	RevisionConflict:       {http.StatusConflict, true},
	ApprovalClosed:         {http.StatusConflict, false},
	RecoveryRequired:       {http.StatusConflict, false},
	NotPrescribed:          {http.StatusConflict, false},
	EffectFailed:           {http.StatusUnprocessableEntity, false},
	EffectUnavailable:      {http.StatusUnprocessableEntity, false},
	EffectCapabilityDenied: {http.StatusUnprocessableEntity, false},
}

// StatusOf returns the HTTP status of code and whether the table lists
// it. An unlisted code is a 400.
func StatusOf(code Code) (int, bool) {
	if e, ok := table[code]; ok {
		return e.status, true
	}
	return http.StatusBadRequest, false
}

// Status returns the HTTP status of code (400 when unlisted).
func Status(code Code) int {
	s, _ := StatusOf(code)
	return s
}

// Retryable reports whether an error with code may succeed when the same
// request is sent again.
func Retryable(code Code) bool {
	if e, ok := table[code]; ok {
		return e.retryable
	}
	return false
}

// Error is an error as it travels: the object under "error" in a body.
type Error struct {
	// Status is the HTTP status the error is sent with.
	Status    int            `json:"-"`
	Code      Code           `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Data      map[string]any `json:"data,omitempty"`
}

// New returns an error with code and message, its status and retryable
// flag taken from the table.
func New(code Code, message string) *Error {
	return &Error{Status: Status(code), Code: code, Message: message, Retryable: Retryable(code)}
}

// Errorf is New with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return New(code, fmt.Sprintf(format, args...))
}

// WithData returns e with data set, for chaining after New.
func (e *Error) WithData(data map[string]any) *Error {
	e.Data = data
	return e
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Body is the body of an error answer: {"error": {…}}.
type Body struct {
	Error *Error `json:"error"`
}

// Write sends e as an error answer: e.Status (the table's status when
// zero) and the body {"error": e}.
func Write(w http.ResponseWriter, e *Error) {
	if e.Status == 0 {
		e.Status = Status(e.Code)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(Body{Error: e})
}

// Decode reads an error answer. It reports false when body is not one.
func Decode(body []byte) (*Error, bool) {
	var b Body
	if json.Unmarshal(body, &b) != nil || b.Error == nil || b.Error.Code == "" {
		return nil, false
	}
	return b.Error, true
}

// Check reports what is wrong with body as an error answer: it must be
// {"error": {…}} with a code spelled in snake_case (upper case for the
// Flow kernel), a non-empty message and a boolean retryable. It returns
// nil when body has the one shape.
func Check(body []byte) error {
	var raw struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return fmt.Errorf("the body is not a JSON object: %v", err)
	}
	if raw.Error == nil {
		return fmt.Errorf("the body has no \"error\" object")
	}
	for k := range raw.Error {
		switch k {
		case "code", "message", "retryable", "data":
		default:
			// A key that differs only in case would be read by Decode
			// (encoding/json matches fields ignoring case) as the one
			// checked here.
			return fmt.Errorf("error has the key %q, which is none of code, message, retryable and data", k)
		}
	}
	var code, msg string
	if err := json.Unmarshal(raw.Error["code"], &code); err != nil || !wellFormed(code) {
		return fmt.Errorf("error.code %s is not a snake_case string", raw.Error["code"])
	}
	if err := json.Unmarshal(raw.Error["message"], &msg); err != nil || msg == "" {
		return fmt.Errorf("error.message %s is not a non-empty string", raw.Error["message"])
	}
	var retry bool
	if err := json.Unmarshal(raw.Error["retryable"], &retry); err != nil {
		return fmt.Errorf("error.retryable %s is not a boolean", raw.Error["retryable"])
	}
	if d, ok := raw.Error["data"]; ok {
		var data map[string]any
		if err := json.Unmarshal(d, &data); err != nil || data == nil {
			return fmt.Errorf("error.data %s is not an object", d)
		}
	}
	return nil
}

// wellFormed reports whether code is lower snake_case, or upper
// SNAKE_CASE as the Flow kernel writes its codes.
func wellFormed(code string) bool {
	if code == "" || code[0] == '_' || code[len(code)-1] == '_' {
		return false
	}
	lower, upper := true, true
	for _, r := range code {
		switch {
		case r >= 'a' && r <= 'z':
			upper = false
		case r >= 'A' && r <= 'Z':
			lower = false
		case r == '_' || r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return lower || upper
}

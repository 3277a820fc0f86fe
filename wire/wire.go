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
// Each code has one HTTP status, given by [StatusOf], from the one table
// of [Codes]. A code missing from the table is a 400. The codes of the
// Flow kernel keep the kernel's upper case spelling; every other code is
// lower snake_case.
package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Code is a stable error code. The constants of the codes are generated
// from the table of [Codes].
type Code string

// StatusOf returns the HTTP status of code and whether the table lists
// it. An unlisted code is a 400.
func StatusOf(code Code) (int, bool) {
	if e, ok := codeIndex[code]; ok {
		return e.Status, true
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
	if e, ok := codeIndex[code]; ok {
		return e.Retryable
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

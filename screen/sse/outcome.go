package sse

import (
	"bytes"
	"encoding/json"
	"math"
	"time"
)

// Outcome statuses.
const (
	// StatusDone: the server sent done; the stream is complete.
	StatusDone = "done"
	// StatusError: the stream failed or never started; see the code.
	StatusError = "error"
)

// Error codes. The client decides server_error, connection_lost,
// cancelled, event_too_large and write_failed itself; every other code,
// unsupported_version among them, is the server's (SPEC 10.2, 10.5). Codes
// are open-ended: decide whether to retry by Retryable, not by the code.
const (
	// CodeServerError: an error answer or event not in the documented
	// form. Retryable when the HTTP status is 500 or above.
	CodeServerError = "server_error"
	// CodeConnectionLost: no response, or a response that ended (or went
	// 45 seconds without a byte) before a terminal event. Retryable.
	CodeConnectionLost = "connection_lost"
	// CodeCancelled: the app cancelled the request's context. Not
	// retryable: the app decided to stop.
	CodeCancelled = "cancelled"
	// CodeEventTooLarge: one event passed the client's size limit; the
	// client stopped reading. Not retryable.
	CodeEventTooLarge = "event_too_large"
	// CodeWriteFailed: the sink refused the stream's text. Not retryable.
	CodeWriteFailed = "write_failed"
	// CodeUnsupportedVersion is the server's answer when it can't write a
	// stream for the requested version (SPEC 10.12).
	CodeUnsupportedVersion = "unsupported_version"
)

// Outcome is how a generate request ended.
type Outcome struct {
	// Status is StatusDone or StatusError.
	Status string

	// StopReason, Model and Elapsed are done's stopReason, model and ms,
	// when the server sent them with the right types.
	StopReason string
	Model      string
	Elapsed    time.Duration

	// Code, Message and Retryable describe an error. Code is never
	// empty for StatusError; Message may be.
	Code      string
	Message   string
	Retryable bool
	// RetryAfter is the wait an error answer's Retry-After header asked
	// for, or zero.
	RetryAfter time.Duration
	// HTTPStatus is the status of an error answer (SPEC 10.2), or zero
	// when the outcome came from the stream or no answer arrived.
	HTTPStatus int

	// Live is the screen id of a live event received before the terminal
	// event (SPEC 10.36), for following the screen; empty if none came.
	Live string

	// Fields are the fields the server sent, exactly as received: the
	// terminal event's data, or the error object of an error answer. Nil
	// when the client decided the outcome itself.
	Fields map[string]json.RawMessage
}

// Done reports whether the stream completed.
func (o Outcome) Done() bool { return o.Status == StatusDone }

// MarshalJSON writes the outcome as {"status": …} with the fields received.
// An error always has "code" and "retryable" (the values the client
// decided, which replace the received ones), and "message" when it has one;
// "retryAfter" gives Retry-After in seconds when the answer had it.
func (o Outcome) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(o.Fields)+5)
	for k, v := range o.Fields {
		m[k] = v
	}
	m["status"] = o.Status
	if o.Status == StatusError {
		m["code"] = o.Code
		m["retryable"] = o.Retryable
		delete(m, "message")
		if o.Message != "" {
			m["message"] = o.Message
		}
		if o.RetryAfter > 0 {
			m["retryAfter"] = int64(math.Ceil(o.RetryAfter.Seconds()))
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// clientError is an outcome the client decides.
func clientError(code, msg string, retryable bool) Outcome {
	return Outcome{Status: StatusError, Code: code, Message: msg, Retryable: retryable}
}

// objectData decodes event data that must be one JSON object. ok is false
// for anything else ("null", an array, a number, trailing text).
func objectData(data string) (fields map[string]json.RawMessage, ok bool) {
	if err := json.Unmarshal([]byte(data), &fields); err != nil || fields == nil {
		return nil, false
	}
	return fields, true
}

// stringField returns a field that is a JSON string.
func stringField(fields map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := fields[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// boolField returns a field that is a JSON boolean.
func boolField(fields map[string]json.RawMessage, key string) (value, ok bool) {
	switch string(fields[key]) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// numberField returns a field that is a JSON number.
func numberField(fields map[string]json.RawMessage, key string) (float64, bool) {
	raw, ok := fields[key]
	if !ok || len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return 0, false
	}
	return f, true
}

// doneOutcome is the outcome of a done event's data.
func doneOutcome(fields map[string]json.RawMessage) Outcome {
	o := Outcome{Status: StatusDone, Fields: fields}
	o.StopReason, _ = stringField(fields, "stopReason")
	o.Model, _ = stringField(fields, "model")
	if ms, ok := numberField(fields, "ms"); ok && ms >= 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
		o.Elapsed = time.Duration(ms * float64(time.Millisecond))
	}
	return o
}

// errorOutcome is the outcome of an error event's data, or of the error
// object of an error answer. An object without a string code and a boolean
// retryable is server_error, not retryable (SPEC 10.7).
func errorOutcome(fields map[string]json.RawMessage) Outcome {
	o := Outcome{Status: StatusError, Fields: fields}
	o.Message, _ = stringField(fields, "message")
	code, okCode := stringField(fields, "code")
	retryable, okRetry := boolField(fields, "retryable")
	if okCode && code != "" && okRetry {
		o.Code, o.Retryable = code, retryable
	} else {
		o.Code, o.Retryable = CodeServerError, false
	}
	return o
}

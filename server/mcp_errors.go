package server

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/assent-run/assent/wire"
)

// maxPlainError bounds how much of a plain-text error answer is kept for
// the message of its JSON form.
const maxPlainError = 512

// jsonErrors is a ResponseWriter for the MCP transport that turns the
// plain-text error answers of the MCP SDK (a body over its limit, a bad
// Accept header, an unknown session, …) into the one wire error shape.
// Answers that are not errors, and errors already in JSON (JSON-RPC
// errors), pass through untouched, streams included.
type jsonErrors struct {
	http.ResponseWriter
	decided bool
	status  int // the captured error status; 0 passes through
	text    bytes.Buffer
}

func (j *jsonErrors) WriteHeader(code int) {
	if j.decided {
		if j.status == 0 {
			j.ResponseWriter.WriteHeader(code)
		}
		return
	}
	j.decided = true
	if code >= 400 && !strings.HasPrefix(j.Header().Get("Content-Type"), "application/json") {
		j.status = code
		return
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonErrors) Write(b []byte) (int, error) {
	if !j.decided {
		j.WriteHeader(http.StatusOK)
	}
	if j.status == 0 {
		return j.ResponseWriter.Write(b)
	}
	if room := maxPlainError - j.text.Len(); room > 0 {
		j.text.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

// Flush flushes a streamed answer; a captured error waits for finish.
func (j *jsonErrors) Flush() {
	if j.status != 0 {
		return
	}
	if f, ok := j.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (j *jsonErrors) Unwrap() http.ResponseWriter { return j.ResponseWriter }

// finish writes a captured error in the wire shape.
func (j *jsonErrors) finish() {
	if j.status == 0 {
		return
	}
	code, hint := mcpTransportError(j.status)
	msg := strings.TrimSpace(j.text.String())
	if msg == "" {
		msg = http.StatusText(j.status)
	}
	e := wire.New(code, msg+"; "+hint)
	e.Status = j.status
	wire.Write(j.ResponseWriter, e)
}

// mcpTransportError gives the code of an MCP transport error status and
// what the client should do about it.
func mcpTransportError(status int) (wire.Code, string) {
	switch status {
	case http.StatusBadRequest:
		return wire.InvalidRequest, "send a JSON-RPC message as MCP's streamable HTTP transport describes (POST, Content-Type application/json, Accept application/json and text/event-stream)"
	case http.StatusUnauthorized:
		return wire.SignInRequired, "send 'Authorization: host.Bearer <token>' with a valid token"
	case http.StatusForbidden:
		return wire.Forbidden, "this token may not use this MCP session or endpoint"
	case http.StatusNotFound:
		return wire.NotFound, "the MCP session is unknown or has ended; initialize a new one"
	case http.StatusMethodNotAllowed:
		return wire.MethodNotAllowed, "use POST, or GET and DELETE with an Mcp-Session-Id"
	case http.StatusRequestEntityTooLarge:
		return wire.TooLarge, "send a smaller message"
	case http.StatusUnsupportedMediaType:
		return wire.UnsupportedMediaType, "send Content-Type: application/json"
	case http.StatusTooManyRequests:
		return wire.RateLimited, "wait and try again"
	case http.StatusConflict:
		return wire.Conflict, "the stream is already open; wait for it to end"
	}
	if status >= 500 {
		return wire.Internal, "try again, and report it if it persists"
	}
	return wire.InvalidRequest, "check the request against MCP's streamable HTTP transport"
}

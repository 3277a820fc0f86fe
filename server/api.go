package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// apiError is the body of every error response:
// {"error": {"code", "message", "retryable"}}.
type apiError struct {
	Status    int            `json:"-"`
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Data      map[string]any `json:"data,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError writes the standard error body.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeAPIError(w, &apiError{Status: status, Code: code, Message: message, Retryable: status == http.StatusTooManyRequests || status >= 500})
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	if e.Status == 0 {
		e.Status = http.StatusBadRequest
	}
	writeJSON(w, e.Status, map[string]*apiError{"error": e})
}

// writeToolError maps an error from a tool handler or a package API to an
// HTTP error: a *tool.Error keeps its code with the status statusFor gives;
// anything else is a 500 whose message does not leak internals.
func writeToolError(w http.ResponseWriter, err error) {
	var te *tool.Error
	if errors.As(err, &te) {
		writeAPIError(w, &apiError{Status: statusFor(te.Code), Code: te.Code, Message: te.Message, Data: te.Data})
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", "the request failed inside the server; try again, and report it if it persists")
}

// statusFor gives the HTTP status of an error code.
func statusFor(code string) int {
	switch code {
	case "not_found", "unknown_tool":
		return http.StatusNotFound
	case "forbidden", "sign_in_required_human", "human_confirmation_required":
		return http.StatusForbidden
	case "conflict", "already_exists", "idempotency_conflict", "stale_revision", "staged_value_stale":
		return http.StatusConflict
	case "rate_limited", "control_backpressure":
		return http.StatusTooManyRequests
	case "limit_exceeded", "too_large":
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// maxBody is the default request body limit.
const maxBody = 1 << 20

// decodeJSON decodes the request body into v, refusing unknown fields,
// trailing data and bodies over limit bytes (maxBody when limit ≤ 0). On
// failure it writes a 400 invalid_request (or 413) and returns false.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	if limit <= 0 {
		limit = maxBody
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the request body is over %d bytes", limit))
			return false
		}
		if errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "invalid_request", "the request body is empty; send a JSON object")
			return false
		}
		writeError(w, http.StatusBadRequest, "invalid_request", "the request body is not valid JSON for this endpoint: "+err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_request", "the request body has data after the JSON object")
		return false
	}
	return true
}

// principalOf returns the authenticated principal of r. Every route behind
// the auth middleware has one.
func principalOf(r *http.Request) store.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

func retryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int(d.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}

package wire

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"error":{"code":"not_found","message":"no such thing","retryable":false}}`, true},
		{`{"error":{"code":"REVISION_CONFLICT","message":"try again","retryable":true,"data":{"n":1}}}`, true},
		{`{"error":{"code":"not_found","message":"m"}}`, false},                      // no retryable
		{`{"error":{"code":"not_found","message":"m","retryable":"no"}}`, false},     // not a boolean
		{`{"error":{"code":"notFound","message":"m","retryable":false}}`, false},     // camelCase
		{`{"error":{"code":"Not_found","message":"m","retryable":false}}`, false},    // mixed case
		{`{"error":{"code":"_x","message":"m","retryable":false}}`, false},           // leading underscore
		{`{"error":{"code":"not_found","message":"","retryable":false}}`, false},     // no message
		{`{"error":{"code":"x","message":"m","retryable":false,"data":[1]}}`, false}, // data not an object
		{`{"code":"not_found","message":"m","retryable":false}}`, false},             // no envelope
		{`{"ok":false,"reason":"not_found","message":"m"}`, false},                   // a bare result
		{`not json`, false},
	} {
		if err := Check([]byte(tc.body)); (err == nil) != tc.ok {
			t.Errorf("Check(%s) = %v, want ok %v", tc.body, err, tc.ok)
		}
	}
}

func TestNewTakesTheTable(t *testing.T) {
	for _, tc := range []struct {
		code      Code
		status    int
		retryable bool
	}{
		{InvalidRequest, 400, false},
		{SignInRequired, 401, false},
		{UnknownTool, 403, false},
		{NotFound, 404, false},
		{TooLarge, 413, false},
		{IdempotencyInProgress, 409, true},
		{RevisionConflict, 409, true},
		{RateLimited, 429, true},
		{Internal, 500, true},
		{StartFailed, 500, false},
		{EndpointNotReady, 503, true},
		{NodeUnavailable, 503, true},
		{StoreUnavailable, 503, true},
		{"an_unlisted_code", 400, false},
	} {
		e := New(tc.code, "m")
		if e.Status != tc.status || e.Retryable != tc.retryable {
			t.Errorf("New(%s) = status %d retryable %v, want %d %v", tc.code, e.Status, e.Retryable, tc.status, tc.retryable)
		}
	}
}

func TestTableCodesAreWellFormed(t *testing.T) {
	for _, e := range Codes() {
		if !wellFormed(string(e.Code)) {
			t.Errorf("code %q is not snake_case", e.Code)
		}
		if e.Status < 400 || e.Status > 599 {
			t.Errorf("code %q has status %d", e.Code, e.Status)
		}
	}
}

func TestWriteAndDecode(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Length", "3")
	Write(rec, Errorf(TooLarge, "over %d bytes", 10).WithData(map[string]any{"limit": 10}))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || rec.Header().Get("Content-Length") != "" {
		t.Fatalf("headers %v", rec.Header())
	}
	if err := Check(rec.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
	e, ok := Decode(rec.Body.Bytes())
	if !ok || e.Code != TooLarge || e.Message != "over 10 bytes" || e.Data["limit"] != float64(10) {
		t.Fatalf("Decode = %+v %v", e, ok)
	}
	if _, ok := Decode([]byte(`{"ok":false}`)); ok {
		t.Fatal("Decode accepted a body without an error")
	}
}

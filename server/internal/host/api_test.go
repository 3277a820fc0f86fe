package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/assent-run/assent/store"
)

// An error from a store that cannot be reached or cannot write answers 503
// store_unavailable, which a client may retry; any other error that is not
// a tool error stays a 500.
func TestWriteToolErrorStoreOutage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"full disk", fmt.Errorf("commit: %w", syscall.ENOSPC), 503, "store_unavailable"},
		{"marked", fmt.Errorf("save: %w", store.ErrUnavailable), 503, "store_unavailable"},
		{"a bug", errors.New("nil map"), 500, "internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			WriteToolError(w, tc.err)
			var body struct {
				Error struct {
					Code      string `json:"code"`
					Message   string `json:"message"`
					Retryable bool   `json:"retryable"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.status || body.Error.Code != tc.code || !body.Error.Retryable {
				t.Fatalf("%d %+v, want %d %s retryable", w.Code, body.Error, tc.status, tc.code)
			}
		})
	}
}

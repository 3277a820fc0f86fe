package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/assent-run/assent/client"
	"github.com/assent-run/assent/wire"
)

func TestFailAPIReadsTheWireShape(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   *client.Error // nil: not an error answer
	}{
		{"plain", 404, `{"error":{"code":"not_found","message":"no such Run","retryable":false}}`,
			&client.Error{Status: 404, Code: "not_found", Message: "no such Run"}},
		{"retryable with data", 429, `{"error":{"code":"control_backpressure","message":"wait","retryable":true,"data":{"pending":3}}}`,
			&client.Error{Status: 429, Code: "control_backpressure", Message: "wait", Retryable: true}},
		{"refused command", 404, `{"ok":false,"reason":"not_found","message":"m","error":{"code":"not_found","message":"m","retryable":false,"data":{"reason":"not_found"}}}`,
			&client.Error{Status: 404, Code: "not_found", Message: "m"}},
		{"not the error shape", 504, `gateway timeout`,
			&client.Error{Status: 504, Code: "http_504", Message: "gateway timeout", Retryable: true}},
		{"not an error", 200, `{"ok":true}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, isErr := client.ErrorOf(tc.status, []byte(tc.body))
			if tc.want == nil {
				if isErr {
					t.Fatalf("ErrorOf = %+v, want none", got)
				}
				return
			}
			if !isErr || got.Status != tc.want.Status || got.Code != tc.want.Code || got.Message != tc.want.Message || got.Retryable != tc.want.Retryable {
				t.Fatalf("ErrorOf = %+v, want %+v", got, tc.want)
			}
			var ee *exitError
			if err := failAPI(fmt.Errorf("wrapped: %w", got)); !errors.As(err, &ee) || ee.msg != string(tc.want.Code)+": "+tc.want.Message {
				t.Fatalf("failAPI = %v", err)
			}
		})
	}
	var ee *exitError
	err := failAPI(&client.TransportError{URL: "http://127.0.0.1:1", Err: errors.New("connection refused")})
	if !errors.As(err, &ee) || !strings.HasPrefix(ee.msg, "unreachable: cannot reach assent at http://127.0.0.1:1: connection refused") {
		t.Fatalf("failAPI(transport) = %v", err)
	}
	if _, ok := client.AsError(wire.New(wire.NotFound, "x")); !ok {
		t.Fatal("a wire error is not a client error")
	}
}

package main

import (
	"errors"
	"testing"
)

func TestAsAPIErrorReadsTheWireShape(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       *apiErr // nil: not an error answer
	}{
		{"plain", `{"error":{"code":"not_found","message":"no such Run","retryable":false}}`,
			&apiErr{Status: 404, Code: "not_found", Message: "no such Run"}},
		{"retryable with data", `{"error":{"code":"control_backpressure","message":"wait","retryable":true,"data":{"pending":3}}}`,
			&apiErr{Status: 404, Code: "control_backpressure", Message: "wait", Retryable: true}},
		{"refused command", `{"ok":false,"reason":"not_found","message":"m","error":{"code":"not_found","message":"m","retryable":false,"data":{"reason":"not_found"}}}`,
			&apiErr{Status: 404, Code: "not_found", Message: "m"}},
		{"not an error", `{"ok":true}`, nil},
		{"not JSON", `gateway timeout`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asAPIError(404, []byte(tc.body))
			if tc.want == nil {
				if got != nil {
					t.Fatalf("asAPIError = %+v, want none", got)
				}
				return
			}
			if got == nil || got.Status != tc.want.Status || got.Code != tc.want.Code || got.Message != tc.want.Message || got.Retryable != tc.want.Retryable {
				t.Fatalf("asAPIError = %+v, want %+v", got, tc.want)
			}
			var ee *exitError
			if err := failAPI(got); !errors.As(err, &ee) || ee.msg != tc.want.Code+": "+tc.want.Message {
				t.Fatalf("failAPI = %v", err)
			}
		})
	}
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// TestTokenNeverOnTheCommandLine: every command that takes a bearer token
// refuses one given as --token, before it reaches any server, and says
// where to put it instead.
func TestTokenNeverOnTheCommandLine(t *testing.T) {
	for _, args := range [][]string{
		{"mcp", "--url", "http://127.0.0.1:1"},
		{"mcp", "--data", t.TempDir()},
		{"demo", "agent", "--url", "http://127.0.0.1:1", "--no-wait"},
		{"run", "inspect", "r1", "--url", "http://127.0.0.1:1"},
		{"screen", "fetch", "http://127.0.0.1:1/api/generate"},
	} {
		var out, errw bytes.Buffer
		code := execute(append(args, "--token", "asnt_secret"), strings.NewReader(""), &out, &errw)
		if code != exitUsage || !strings.Contains(errw.String(), "secret_on_command_line") || !strings.Contains(errw.String(), "ASSENT_TOKEN") || !strings.Contains(errw.String(), "--token-file") || strings.Contains(errw.String(), "asnt_secret") {
			t.Errorf("%v --token: exit %d, stderr %q; want a usage refusal secret_on_command_line naming ASSENT_TOKEN and --token-file", args, code, errw.String())
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var errw bytes.Buffer
	if code := execute([]string{"run", "inspect", "r1", "--url", "http://127.0.0.1:1", "--token-file", empty}, strings.NewReader(""), io.Discard, &errw); code == 0 || !strings.Contains(errw.String(), "bad_token_file") {
		t.Errorf("empty --token-file: exit %d, %q; want bad_token_file", code, errw.String())
	}
}

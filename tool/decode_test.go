package tool

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeArgsErrors: each wrong argument is named with the JSON type it
// takes, in the message and the data, and no Go type name reaches the
// caller.
func TestDecodeArgsErrors(t *testing.T) {
	type subject struct {
		Type string `json:"type"`
		ID   int    `json:"id"`
	}
	type args struct {
		FormID  string            `json:"form_id"`
		Lines   int               `json:"lines"`
		Local   bool              `json:"local_only"`
		Names   []string          `json:"names"`
		Values  map[string]string `json:"values"`
		Subject *subject          `json:"subject"`
		Weight  float64           `json:"weight"`
	}
	tests := []struct {
		args string
		msg  string
		data map[string]any
	}{
		{`[]`, `the arguments must be a JSON object, not an array`, map[string]any{"field": "", "expected": "object", "got": "array"}},
		{`"x"`, `the arguments must be a JSON object, not a string`, map[string]any{"field": "", "expected": "object", "got": "string"}},
		{`{"form_id":[1]}`, `"form_id" must be a string, not an array`, map[string]any{"field": "form_id", "expected": "string", "got": "array"}},
		{`{"lines":"4"}`, `"lines" must be an integer, not a string`, map[string]any{"field": "lines", "expected": "integer", "got": "string"}},
		{`{"lines":1.5}`, `"lines" must be an integer (a whole number within range)`, map[string]any{"field": "lines", "expected": "integer", "got": "number out of range"}},
		{`{"local_only":"yes"}`, `"local_only" must be a boolean, not a string`, map[string]any{"field": "local_only", "expected": "boolean", "got": "string"}},
		{`{"names":"a"}`, `"names" must be an array, not a string`, map[string]any{"field": "names", "expected": "array", "got": "string"}},
		{`{"values":[]}`, `"values" must be an object, not an array`, map[string]any{"field": "values", "expected": "object", "got": "array"}},
		{`{"subject":{"id":"42"}}`, `"subject.id" must be an integer, not a string`, map[string]any{"field": "subject.id", "expected": "integer", "got": "string"}},
		{`{"weight":true}`, `"weight" must be a number, not a boolean`, map[string]any{"field": "weight", "expected": "number", "got": "boolean"}},
		{`{"nope":1}`, `unknown argument "nope"; the tool takes "form_id", "lines", "local_only", "names", "values", "subject", "weight"`,
			map[string]any{"field": "nope", "accepted": []string{"form_id", "lines", "local_only", "names", "values", "subject", "weight"}}},
		{`{"subject":{"extra":1}}`, `unknown field "extra" inside an argument's object`, map[string]any{"field": "extra"}},
		{`{"form_id":`, `the JSON ends too early`, nil},
		{`{"form_id" "x"}`, `not valid JSON (at byte`, nil},
	}
	for _, tc := range tests {
		var v args
		err := DecodeArgs(json.RawMessage(tc.args), &v)
		var te *Error
		if !errors.As(err, &te) || te.Code != "invalid_request" {
			t.Errorf("%s: %v, want an invalid_request *Error", tc.args, err)
			continue
		}
		if !strings.Contains(te.Message, tc.msg) {
			t.Errorf("%s: message %q, want it to contain %q", tc.args, te.Message, tc.msg)
		}
		if strings.Contains(te.Message, "Go ") || strings.Contains(te.Message, "struct") || strings.Contains(te.Message, "tool.") {
			t.Errorf("%s: message %q names a Go type", tc.args, te.Message)
		}
		if tc.data != nil && !reflect.DeepEqual(te.Data, tc.data) {
			t.Errorf("%s: data %#v, want %#v", tc.args, te.Data, tc.data)
		}
	}
}

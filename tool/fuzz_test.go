package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fzArgs has the shapes the tools' argument structs use.
type fzArgs struct {
	FormID   string            `json:"formId"`
	Lines    int               `json:"lines,omitempty"`
	Revision int64             `json:"revision,omitempty"`
	Local    *bool             `json:"localOnly,omitempty"`
	As       *string           `json:"as,omitempty"`
	Subject  *fzSubject        `json:"subject,omitempty"`
	Values   map[string]string `json:"values,omitempty"`
	Names    []string          `json:"names,omitempty"`
	Input    json.RawMessage   `json:"input,omitempty"`
	Value    any               `json:"value,omitempty"`
}

type fzSubject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

var fzArgFields = []string{"formId", "lines", "revision", "localOnly", "as", "subject", "values", "names", "input", "value"}

func fzCollect(v any, vals, keys *[]string) {
	switch x := v.(type) {
	case string:
		*vals = append(*vals, x)
	case []any:
		for _, e := range x {
			fzCollect(e, vals, keys)
		}
	case map[string]any:
		for k, e := range x {
			*keys = append(*keys, k)
			fzCollect(e, vals, keys)
		}
	}
}

// FuzzDecodeArgs feeds arbitrary arguments to DecodeArgs and checks:
//   - an error is an *Error with code invalid_request and an "invalid
//     arguments: " message that never repeats a string value of the
//     arguments;
//   - success means the arguments are exactly one JSON value (the
//     function refuses trailing data), an object or null, with every key
//     naming a field (unknown fields are refused);
//   - what was decoded, written back as JSON, decodes again to the same
//     value.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"formId":"profile"}`,
		`{"A":1,"B":2}`,
		`{"formId":"f","lines":100,"revision":9223372036854775807,"localOnly":true,"as":"run:x","subject":{"type":"order","id":"42"},"values":{"msg":"hi"},"names":["a","b"],"input":{"a":[1,{"b":null}]},"value":1e308}`,
		`{"lines":1e400}`,
		`{"lines":"4111111111111111-secret"}`,
		`{"revision":123456789012345678901234567890}`,
		`{"subject":{"type":"order","id":"42","extra":"x"}}`,
		`{"FORMID":"x"}`,
		`{"formId":"x","formId":"y"}`,
		`{"formId":null}`,
		`null`,
		`[]`,
		`"x"`,
		``,
		` {} `,
		`{}{}`,
		`{} x`,
		`{"formId":"\u0000\xff\ud800"}`,
		`{"input":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
		`{"formId":"` + strings.Repeat("x", 10000) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		var v fzArgs
		err := DecodeArgs(json.RawMessage(args), &v)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || te.Code != "invalid_request" || !strings.HasPrefix(te.Message, "invalid arguments: ") {
				t.Fatalf("error %#v is not an invalid_request *Error", err)
			}
			var any0 any
			if json.Unmarshal(args, &any0) == nil {
				var vals, keys []string
				fzCollect(any0, &vals, &keys)
				for _, s := range vals {
					if len(s) >= 8 && strings.Contains(te.Message, s) && !slices.Contains(keys, s) && !strings.Contains(strings.Join(fzArgFields, " ")+" fzArgs fzSubject", s) {
						t.Fatalf("error %q repeats the value %q", te.Message, s)
					}
				}
			}
			return
		}
		if !json.Valid(args) {
			t.Fatalf("accepted %q, which is not one JSON value", args)
		}
		args = fzFirst(args) // what follows was reported by the check above
		var m map[string]json.RawMessage
		if json.Unmarshal(args, &m) != nil || m == nil {
			if string(bytes.TrimSpace(args)) != "null" {
				t.Fatalf("accepted %q, which is not an object", args)
			}
		}
		for k := range m {
			if !slices.ContainsFunc(fzArgFields, func(f string) bool { return strings.EqualFold(f, k) }) {
				t.Fatalf("accepted the unknown key %q", k)
			}
		}
		b, merr := json.Marshal(v)
		if merr != nil {
			t.Fatalf("decoded %#v can't be written: %v", v, merr)
		}
		var again fzArgs
		if err := DecodeArgs(b, &again); err != nil {
			t.Fatalf("written %s doesn't decode: %v", b, err)
		}
		b2, _ := json.Marshal(again)
		if !bytes.Equal(b, b2) {
			t.Fatalf("round trip changed the arguments:\n %s\n %s", b, b2)
		}
	})
}

// fzFirst returns the first JSON value in b (all of b when it is not JSON).
func fzFirst(b []byte) []byte {
	var raw json.RawMessage
	if json.NewDecoder(bytes.NewReader(b)).Decode(&raw) != nil {
		return b
	}
	return raw
}

// FuzzTypedArgs feeds arbitrary arguments to a typed tool and checks:
//   - nothing panics, and a refusal is an *Error with code invalid_params
//     and a message;
//   - the handler runs only with arguments that are one JSON object which
//     the input schema accepts, every key of which names an argument.
func FuzzTypedArgs(f *testing.F) {
	for _, s := range []string{
		`{"action":"focus"}`, `{"action":"stage","name":"ab","duration":3,"tags":["a"],"subject":{"type":"t","id":"1"},"facts":{"x":{"type":"t","id":"2"}},"lines":"4"}`,
		`{"action":"fly"}`, `{}`, `null`, ``, `[]`, `{"action":"focus"} {}`, `{"action":"focus","lines":1e400}`,
		`{"action":"focus","duration":1e400}`, `{"action":"focus","name":"\u0000"}`, `{"action":"focus","Action":"stage"}`,
	} {
		f.Add([]byte(s))
	}
	tl := typedTool()
	f.Fuzz(func(t *testing.T, args []byte) {
		res, err := tl.Handler(context.Background(), Call{Args: args})
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || te.Code != CodeInvalidParams || te.Message == "" {
				t.Fatalf("%q: error %v is not an invalid_params *Error with a message", args, err)
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(args, &m) != nil || m == nil {
			t.Fatalf("%q: accepted, but it is not one JSON object", args)
		}
		accepted := jsonFields(reflect.TypeFor[typedArgs]())
		for k := range m {
			if !slices.Contains(accepted, k) {
				t.Fatalf("%q: accepted the key %q, which names no argument", args, k)
			}
		}
		if _, ok := res.Structured.(typedOut); !ok {
			t.Fatalf("%q: answer %#v", args, res.Structured)
		}
	})
}

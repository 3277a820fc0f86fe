package controls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/tool"
)

// fzObjectKeys returns the top-level keys of b when it is a JSON object.
func fzObjectKeys(b []byte) ([]string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys, true
}

// fzValues collects the string values (not the keys) anywhere in v, and
// the keys separately.
func fzValues(v any, vals, keys *[]string) {
	switch x := v.(type) {
	case string:
		*vals = append(*vals, x)
	case []any:
		for _, e := range x {
			fzValues(e, vals, keys)
		}
	case map[string]any:
		for k, e := range x {
			*keys = append(*keys, k)
			fzValues(e, vals, keys)
		}
	}
}

// executeFields are the JSON names of controls_execute's arguments.
var executeFields = []string{"action", "identity", "value", "durationMs", "revision"}

// FuzzDecodeControlArgs feeds arbitrary arguments to controls_execute (the
// strictest of the three control tools) and checks:
//   - an error is a *tool.Error with code invalid_params whose message
//     never repeats a string value of the arguments;
//   - success means the arguments are exactly one JSON object, every key
//     of which names an argument exactly ("source" and "confirmed",
//     which only a person's command carries, never get through);
//   - "value" was given exactly when a key names it, so a stage that
//     forgot its value is not taken as a proposal of null.
func FuzzDecodeControlArgs(f *testing.F) {
	for _, s := range []string{
		`{"action":"stage","identity":{"formId":"profile","controlId":"plan"},"value":"pro"}`,
		`{"action":"stage","identity":{"formId":"profile","controlId":"plan"},"value":null}`,
		`{"action":"stage","identity":{"formId":"profile","controlId":"plan"}}`,
		`{"action":"highlight","identity":{"formId":"f","controlId":"c","subject":{"type":"order","id":"42","label":"Order 42"}},"durationMs":60000}`,
		`{"action":"apply","identity":{"formId":"f","controlId":"c"},"revision":3}`,
		`{"action":"apply","identity":{"formId":"f","controlId":"c"},"confirmed":true}`,
		`{"action":"apply","identity":{"formId":"f","controlId":"c"},"source":"user"}`,
		`{"action":"apply","identity":{"formId":"f","controlId":"c"},"Source":"user","CONFIRMED":true}`,
		`{"action":"apply","identity":{"formId":"f","controlId":"c"},"confirmed":null}`,
		`{"action":"stage","identity":{"formId":"f","controlId":"c"},"value":{"a":[1,2,{"b":123456789012345678901234567890}]}}`,
		`{"action":"stage","identity":{"formId":"f","controlId":"c"},"value":"4111111111111111-secret"}`,
		`{"action":"stage","identity":{"formId":"f","controlId":"c"},"durationMs":"4111111111111111-secret"}`,
		`{"action":"stage","identity":{"formId":"f","controlId":"c"},"durationMs":1e400}`,
		`{"action":"stage","identity":{"formId":"f","controlId":"c"},"extra":1}`,
		`{"A":1,"B":2}`,
		`{}`,
		`null`,
		`[]`,
		`""`,
		``,
		`{} `,
		`{}{}`,
		`{"action":"\u0000\xff"}`,
		`{"identity":{"formId":"` + strings.Repeat("f", 300) + `","controlId":"c"}}`,
	} {
		f.Add([]byte(s))
	}
	var a executeArgs
	execute := tool.New(executeSpec(), func(_ context.Context, _ tool.Call, in executeArgs) (*tool.Reply[any], error) {
		a = in
		return &tool.Reply[any]{}, nil
	})
	f.Fuzz(func(t *testing.T, args []byte) {
		a = executeArgs{}
		_, err := execute.Handler(context.Background(), tool.Call{Args: args})
		if err != nil {
			var te *tool.Error
			if !errors.As(err, &te) || te.Code != tool.CodeInvalidParams {
				t.Fatalf("error %v is not an invalid_params *tool.Error", err)
			}
			var v any
			if json.Unmarshal(args, &v) == nil {
				var vals, keys []string
				fzValues(v, &vals, &keys)
				for _, s := range vals {
					if len(s) >= 8 && strings.Contains(te.Message, s) && !slices.Contains(keys, s) && !strings.Contains(strings.Join(executeFields, " "), s) {
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
		keys, isObject := fzObjectKeys(args)
		if !isObject {
			t.Fatalf("accepted %q, which is not an object", args)
		}
		valueKey := false
		for _, k := range keys {
			if !slices.Contains(executeFields, k) {
				t.Fatalf("accepted the key %q, which names no argument", k)
			}
			valueKey = valueKey || k == "value"
		}
		if a.Value.given != valueKey {
			t.Fatalf("value given %v, but a key names it: %v (%q)", a.Value.given, valueKey, args)
		}
	})
}

// FuzzParseAuditDetail feeds arbitrary Details to parseAuditDetail, and
// Details written by commandDetail from arbitrary values, and checks:
//   - a Detail that is not read gives the zero facts;
//   - a Detail that is read is non-empty and one JSON value;
//   - what commandDetail writes for a private form is always read back
//     with the form's owner, because the audit page decides from it who
//     may read the record once the form is gone; and the value comes back
//     exactly when it was to be shown and fits in 4096 bytes.
func FuzzParseAuditDetail(f *testing.F) {
	for _, s := range []struct {
		detail, value, owner string
		show                 bool
	}{
		{`{"value":"pro"}`, `"pro"`, "p_alice", true},
		{`{"formOwner":"p_alice","value":{"a":1}}`, `{"a":1}`, "p_alice", true},
		{`{"formOwner":null}`, `null`, "", false},
		{`{"value":null}`, `null`, "p_bob", true},
		{``, `[1,2,3]`, "p_x", false},
		{`null`, `1e308`, "p_x", true},
		{`[]`, `123456789012345678901234567890`, "p_x", true},
		{`{"formOwner":1}`, `"` + strings.Repeat("v", 5000) + `"`, "p_x", true},
		{`{"FORMOWNER":"p_eve"}`, `{"deep":[[[[[[{"a":null}]]]]]]}`, "p_x", true},
		{`{"value":1} {"formOwner":"x"}`, `"\u0000\xff"`, "p_\u00e9", true},
		{"\xff", `true`, "p_x", false},
	} {
		f.Add(s.detail, []byte(s.value), s.owner, s.show)
	}
	f.Fuzz(func(t *testing.T, detail string, value []byte, owner string, show bool) {
		facts, ok := parseAuditDetail(detail)
		if !ok && !reflect.DeepEqual(facts, auditFacts{}) {
			t.Fatalf("unread Detail %q gave facts %+v", detail, facts)
		}
		if ok && (detail == "" || !json.Valid([]byte(detail))) {
			t.Fatalf("read %q, which is not one JSON value", detail)
		}

		var v any
		if json.Unmarshal(value, &v) != nil || !utf8.ValidString(owner) {
			return
		}
		s := &Part{forms: map[string]*formDecl{"f": {owner: owner, private: true}}}
		cmd := control.Command{Action: control.Stage, Identity: control.Identity{FormID: "f", ControlID: "c"}, Value: v}
		d := s.commandDetail(cmd, show, "")
		got, ok := parseAuditDetail(d)
		if !ok {
			t.Fatalf("commandDetail wrote %q, which parseAuditDetail can't read", d)
		}
		if got.FormOwner == nil || *got.FormOwner != owner {
			t.Fatalf("Detail %q lost the owner %q of a private form", d, owner)
		}
		vb, _ := json.Marshal(v)
		wantValue := show && v != nil && len(vb) < 4096-len(`{"formOwner":,"value":}`)-len(owner)*6
		if wantValue && !reflect.DeepEqual(got.Value, v) {
			t.Fatalf("Detail %q has value %#v, want %#v", d, got.Value, v)
		}
		if !show && got.Value != nil {
			t.Fatalf("Detail %q shows a value that is not to be shown", d)
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

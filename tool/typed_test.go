package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type typedSubject struct {
	Type string `json:"type" minLength:"1"`
	ID   string `json:"id"`
}

type typedArgs struct {
	Action   string                  `json:"action" enum:"focus,stage" jsonschema:"What to do."`
	Name     string                  `json:"name,omitempty" maxLength:"5" pattern:"^[a-z]+$"`
	Duration int64                   `json:"duration,omitempty" minimum:"0" maximum:"100"`
	Tags     []string                `json:"tags,omitempty" maxItems:"2"`
	Subject  *typedSubject           `json:"subject,omitempty"`
	Facts    map[string]typedSubject `json:"facts,omitempty"`
	Lines    json.RawMessage         `json:"lines,omitempty" type:"string,integer"`
}

type typedOut struct {
	Echo string `json:"echo"`
}

func typedTool() Tool {
	return New(Spec[typedArgs]{Name: "t_typed", Example: typedArgs{Action: "focus"}},
		func(_ context.Context, _ Call, in typedArgs) (*Reply[typedOut], error) {
			return Answer(typedOut{Echo: in.Action + in.Name}), nil
		})
}

// TestTypedRefusals: every constraint the derived schema advertises is
// refused before the handler runs, as invalid_params naming the field.
func TestTypedRefusals(t *testing.T) {
	tl := typedTool()
	tests := []struct {
		args, msg, field string
	}{
		{`{}`, `"action" is required`, "action"},
		{`[]`, `the arguments must be a JSON object, not an array`, ""},
		{`{"action":"fly"}`, `"action" must be one of "focus", "stage"`, "action"},
		{`{"action":1}`, `"action" must be a string, not a number`, "action"},
		{`{"action":"focus","name":"abcdef"}`, `"name" must be at most 5 characters long; it has 6`, "name"},
		{`{"action":"focus","name":"AB"}`, `"name" must match ^[a-z]+$`, "name"},
		{`{"action":"focus","duration":101}`, `"duration" must be at most 100`, "duration"},
		{`{"action":"focus","duration":-1}`, `"duration" must be at least 0`, "duration"},
		{`{"action":"focus","duration":1.5}`, `"duration" must be an integer, not a number`, "duration"},
		{`{"action":"focus","tags":["a","b","c"]}`, `"tags" must hold at most 2 items; it has 3`, "tags"},
		{`{"action":"focus","subject":{"id":"x"}}`, `"subject.type" is required`, "subject.type"},
		{`{"action":"focus","subject":{"type":"","id":"x"}}`, `"subject.type" must not be empty`, "subject.type"},
		{`{"action":"focus","facts":{"a":{"type":"t","id":"x","more":1}}}`, `unknown field "more" inside "facts.a"`, "facts.a.more"},
		{`{"action":"focus","lines":true}`, `"lines" must be an integer or a string, not a boolean`, "lines"},
		{`{"action":"focus","nope":1}`, `unknown argument "nope"; the tool takes "action", "name", "duration", "tags", "subject", "facts", "lines"`, "nope"},
		{`{"action":`, `the JSON ends too early`, ""},
	}
	for _, tc := range tests {
		_, err := tl.Handler(context.Background(), Call{Args: json.RawMessage(tc.args)})
		var te *Error
		if !errors.As(err, &te) || te.Code != "invalid_params" {
			t.Errorf("%s: %v, want an invalid_params *Error", tc.args, err)
			continue
		}
		if !strings.Contains(te.Message, tc.msg) {
			t.Errorf("%s: message %q, want it to contain %q", tc.args, te.Message, tc.msg)
		}
		if tc.field != "" && te.Data["field"] != tc.field {
			t.Errorf("%s: data field %v, want %q", tc.args, te.Data["field"], tc.field)
		}
	}
	res, err := tl.Handler(context.Background(), Call{Args: json.RawMessage(`{"action":"stage","name":"ab","lines":"4"}`)})
	if err != nil || res.Structured.(typedOut).Echo != "stageab" {
		t.Fatalf("valid call: %+v, %v", res, err)
	}
}

// TestTypedSchema: the derived schemas carry the tags and the example.
func TestTypedSchema(t *testing.T) {
	tl := typedTool()
	if err := NewRegistry().Register(tl); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"enum":["focus","stage"]`, `"maxLength":5`, `"maximum":100`, `"description":"What to do."`,
		`"required":["action"]`, `"additionalProperties":false`, `"type":["string","integer"]`} {
		if !strings.Contains(string(tl.InputSchema), want) {
			t.Errorf("input schema %s lacks %s", tl.InputSchema, want)
		}
	}
	if string(tl.Example) != `{"action":"focus"}` {
		t.Errorf("example %s", tl.Example)
	}
	if !strings.Contains(string(tl.OutputSchema), `"echo"`) {
		t.Errorf("output schema %s", tl.OutputSchema)
	}
	bad := New(Spec[typedArgs]{Name: "t_bad"}, func(context.Context, Call, typedArgs) (*Reply[chan int], error) { return nil, nil })
	if err := NewRegistry().Register(bad); err == nil {
		t.Error("a tool whose answer has no schema was registered")
	}
	wrong := New(Spec[typedArgs]{Name: "t_wrong", Example: typedArgs{Action: "fly"}}, func(context.Context, Call, typedArgs) (*Reply[typedOut], error) { return nil, nil })
	if err := NewRegistry().Register(wrong); err == nil || !strings.Contains(err.Error(), "example") {
		t.Errorf("a tool whose example breaks its schema was registered: %v", err)
	}
}

// An unlisted enum value is left out of the schema a caller is shown,
// and a call that sends it still reaches the handler, which answers it.
func TestUnlistedEnumValues(t *testing.T) {
	tl := New(Spec[typedArgs]{Name: "t_unlisted", Example: typedArgs{Action: "focus"}, Unlisted: map[string][]string{"action": {"stage"}}},
		func(_ context.Context, _ Call, in typedArgs) (*Reply[typedOut], error) {
			if in.Action == "stage" {
				return nil, Errorf("human_confirmation_required", "a person stages")
			}
			return Answer(typedOut{Echo: in.Action}), nil
		})
	if tl.defect != nil {
		t.Fatal(tl.defect)
	}
	if s := string(tl.InputSchema); strings.Contains(s, `"stage"`) || !strings.Contains(s, `"focus"`) {
		t.Fatalf("listed schema: %s", s)
	}
	_, err := tl.Handler(context.Background(), Call{Args: json.RawMessage(`{"action":"stage"}`)})
	var te *Error
	if !errors.As(err, &te) || te.Code != "human_confirmation_required" {
		t.Fatalf("stage: %v", err)
	}
	_, err = tl.Handler(context.Background(), Call{Args: json.RawMessage(`{"action":"jump"}`)})
	if !errors.As(err, &te) || te.Code != CodeInvalidParams || strings.Contains(te.Message, "stage") {
		t.Fatalf("jump: %v", err)
	}
	bad := New(Spec[typedArgs]{Name: "t_bad", Example: typedArgs{Action: "focus"}, Unlisted: map[string][]string{"name": {"x"}}},
		func(context.Context, Call, typedArgs) (*Reply[typedOut], error) { return nil, nil })
	if bad.defect == nil {
		t.Fatal("unlisted values of an argument without an enum were accepted")
	}
}

package control

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckValue(t *testing.T) {
	n := func(i int) *int { return &i }
	plan := Metadata{Kind: KindSelect, Label: "Plan", Options: []Option{{Value: "free"}, {Value: "pro"}, {Value: "team"}, {Value: "legacy", Disabled: true}}}
	tests := []struct {
		name string
		md   Metadata
		v    any
		want string // "" accepts; otherwise a fragment of the message
	}{
		{"select option", plan, "pro", ""},
		{"select unknown option", plan, "enterprise", `"enterprise" is not one of the options (free, pro, team)`},
		{"select disabled option", plan, "legacy", "disabled"},
		{"select object", plan, map[string]any{"a": 1.0}, "not an object"},
		{"select numeric option", Metadata{Kind: KindRadioGroup, Options: []Option{{Value: 1}, {Value: 2}}}, 2.0, ""},
		{"select without options takes any scalar", Metadata{Kind: KindSelect}, "x", ""},
		{"email", Metadata{Kind: KindEmail}, "ada@example.com", ""},
		{"email malformed", Metadata{Kind: KindEmail, Label: "Email"}, "not-an-email", `does not fit Email: "not-an-email" is not an email address`},
		{"email empty", Metadata{Kind: KindEmail}, "", ""},
		{"email number", Metadata{Kind: KindEmail}, 5.0, "not a number"},
		{"text object", Metadata{Kind: KindText}, map[string]any{}, "must be text, not an object"},
		{"text list", Metadata{Kind: KindTextarea}, []any{"a"}, "not a list"},
		{"text null", Metadata{Kind: KindText}, nil, ""},
		{"text required null", Metadata{Kind: KindText, Constraints: &Constraints{Required: true}}, nil, "a value is required"},
		{"text required empty", Metadata{Kind: KindText, Constraints: &Constraints{Required: true}}, "", "a value is required"},
		{"text too long", Metadata{Kind: KindText, Constraints: &Constraints{MaxLength: n(3)}}, "abcd", "the most is 3"},
		{"text length counts characters", Metadata{Kind: KindText, Constraints: &Constraints{MaxLength: n(3)}}, "äöü", ""},
		{"text too short", Metadata{Kind: KindText, Constraints: &Constraints{MinLength: n(2)}}, "a", "the least is 2"},
		{"text pattern", Metadata{Kind: KindText, Constraints: &Constraints{Pattern: "[A-Z]{2}[0-9]+"}}, "PT50", ""},
		{"text pattern is anchored", Metadata{Kind: KindText, Constraints: &Constraints{Pattern: "[A-Z]{2}[0-9]+"}}, "xxPT50", "does not match the pattern"},
		{"number", Metadata{Kind: KindNumber, Constraints: &Constraints{Min: 0, Max: 10, Step: 0.5}}, 2.5, ""},
		{"number int type", Metadata{Kind: KindNumber}, 7, ""},
		{"number below", Metadata{Kind: KindNumber, Constraints: &Constraints{Min: 0}}, -1.0, "below the minimum 0"},
		{"number above", Metadata{Kind: KindSlider, Constraints: &Constraints{Max: 10}}, 11.0, "above the maximum 10"},
		{"number off step", Metadata{Kind: KindNumber, Constraints: &Constraints{Min: 1, Step: 2}}, 4.0, "not a multiple of the step 2"},
		{"number as text", Metadata{Kind: KindNumber}, "5", "must be a number, not text"},
		{"checkbox", Metadata{Kind: KindCheckbox}, true, ""},
		{"switch text", Metadata{Kind: KindSwitch}, "yes", "true or false"},
		{"date", Metadata{Kind: KindDate}, "2026-12-02", ""},
		{"date bad", Metadata{Kind: KindDate}, "02/12/2026", "YYYY-MM-DD"},
		{"date min", Metadata{Kind: KindDate, Constraints: &Constraints{Min: "2026-01-01"}}, "2025-12-31", "before the earliest allowed"},
		{"time", Metadata{Kind: KindTime}, "09:30", ""},
		{"datetime", Metadata{Kind: KindDatetime}, "2026-12-02T09:30", ""},
		{"datetime bad", Metadata{Kind: KindDatetime}, "tomorrow", "not a datetime"},
		{"multi-select", Metadata{Kind: KindMultiSelect, Options: []Option{{Value: "a"}, {Value: "b"}}}, []any{"a", "b"}, ""},
		{"multi-select unknown", Metadata{Kind: KindMultiSelect, Options: []Option{{Value: "a"}}}, []any{"a", "z"}, `"z" is not one of the options`},
		{"multi-select scalar", Metadata{Kind: KindMultiSelect}, "a", "must be a list"},
		{"tags too many", Metadata{Kind: KindTagsInput, Constraints: &Constraints{MaxLength: n(1)}}, []string{"a", "b"}, "the most is 1"},
		{"range", Metadata{Kind: KindRangeSlider, Constraints: &Constraints{Min: 0, Max: 100}}, []any{10.0, 20.0}, ""},
		{"range reversed", Metadata{Kind: KindRangeSlider}, []any{20.0, 10.0}, "above the high end"},
		{"range shape", Metadata{Kind: KindRangeSlider}, []any{1.0}, "two numbers"},
		{"custom takes anything", Metadata{Kind: KindCustom}, map[string]any{"x": 1.0}, ""},
		{"file takes anything", Metadata{Kind: KindFile}, "blob:1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.md.CheckValue(tc.v)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckValue(%v) = %v, want nil", tc.v, err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Reason != ReasonInvalidValue {
				t.Fatalf("CheckValue(%v) = %v, want reason invalid_value", tc.v, err)
			}
			if !strings.Contains(ce.Message, tc.want) {
				t.Errorf("message %q lacks %q", ce.Message, tc.want)
			}
		})
	}
}

func TestRegisterRefusesBadPattern(t *testing.T) {
	r := New(Config{})
	_, err := r.Register(Registration{Identity: profile, Metadata: Metadata{Kind: KindText, Constraints: &Constraints{Pattern: "("}}, Handles: NewValue("").Handles()})
	var ce *Error
	if !errors.As(err, &ce) || ce.Reason != ReasonInvalidRequest {
		t.Fatalf("Register with pattern \"(\" = %v, want invalid_request", err)
	}
}

// A proposal that does not fit the control is refused after the policy and
// before anything is stored; the person never sees it.
func TestStageAndApplyCheckTheValue(t *testing.T) {
	r := New(Config{})
	v := NewValue("free")
	id := Identity{FormID: "profile", ControlID: "plan"}
	mustRegister(t, r, Registration{Identity: id, Metadata: Metadata{Kind: KindSelect, Label: "Plan", Options: []Option{{Value: "free"}, {Value: "pro"}}}, Handles: v.Handles()})

	wantReason(t, exec(t, r, Command{Action: Stage, Identity: id, Value: "enterprise"}, agent), ReasonInvalidValue)
	if props := r.Proposals(t.Context(), "profile"); len(props) != 0 {
		t.Fatalf("a refused value was stored as a proposal: %+v", props)
	}
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: id, Value: "enterprise"}, person), ReasonInvalidValue)
	if v.Load() != "free" {
		t.Fatalf("value = %v after a refused apply", v.Load())
	}
	// The policy still comes first: an agent's apply is a person's to give.
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: id, Value: "enterprise"}, agent), ReasonHumanConfirmationRequired)

	wantReason(t, exec(t, r, Command{Action: Stage, Identity: id, Value: "pro"}, agent), "")
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: id}, person), "")
	if v.Load() != "pro" {
		t.Fatalf("value = %v, want pro", v.Load())
	}
}

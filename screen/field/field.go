// Package field checks the value a person entered in a form field of an
// Omni IR screen against the constraints the field declares.
//
// A field is an Input, DateInput, Select or Switch. A stream may declare
// constraints on it (required, format, minLength, maxLength; min and max on a
// DateInput), but it never supplies the words shown to the person: [Check]
// returns a [Problem] that names a message by key, and [Messages] turns that
// key into the application's own sentence. The same checks run in every
// renderer of the format, so the rules here are exact: values are trimmed of
// Unicode white space, lengths count Unicode code points, and the checks run
// in a fixed order and stop at the first failure.
//
// Props and values arrive as decoded JSON: float64 numbers, strings, bools,
// nil, []any and map[string]any. A constraint whose value has the wrong type
// is ignored (the parser has already rejected such a line), and no input makes
// Check panic.
//
// Field checks help people fix slips before anything is sent; they are not a
// security boundary. The backend still checks every action's params against
// the tool's own schema.
package field

import (
	"encoding/json"
	"unicode/utf8"
)

// Message keys. They are the same in every implementation of the format, so
// applications can translate them once.
const (
	KeyRequired      = "required"      // a required Input or DateInput is empty
	KeyChooseOption  = "chooseOption"  // a required Select holds none of its options
	KeyTurnOn        = "turnOn"        // a required Switch is off
	KeyInvalidEmail  = "invalidEmail"  // format="email" does not match
	KeyInvalidNumber = "invalidNumber" // format="number" does not match
	KeyInvalidPhone  = "invalidPhone"  // format="phone" does not match
	KeyInvalidURL    = "invalidUrl"    // format="url" does not match
	KeyTooShort      = "tooShort"      // fewer code points than minLength; values {min}
	KeyTooLong       = "tooLong"       // more code points than maxLength; values {max}
	KeyDateTooEarly  = "dateTooEarly"  // a date before min; values {min}
	KeyDateTooLate   = "dateTooLate"   // a date after max; values {max}
)

// Problem is the first check a field's value fails. Its JSON form is the
// conformance suite's: {"message": key, "values": {...}}.
type Problem struct {
	// Key names the message, one of the Key constants.
	Key string `json:"message"`
	// Values fills the message's placeholders: "min" for KeyTooShort and
	// KeyDateTooEarly, "max" for KeyTooLong and KeyDateTooLate, holding the
	// constraint exactly as the props gave it. Nil for other keys.
	Values map[string]any `json:"values,omitempty"`
}

// Check reports the first constraint that value breaks for a field of the
// given component with the given props, or nil when the value passes.
//
// component is a catalog name: "Input", "DateInput", "Select" or "Switch".
// Any other component is not a field and always passes; for an application
// component declared as a field, use [CheckAppField].
//
// The rules, in order:
//   - Switch: required and value is not true → turnOn.
//   - Select: required and value is not a string among options → chooseOption.
//   - DateInput: the trimmed text (empty when value is not a string) that is
//     empty fails with required when required and otherwise passes; then a
//     date before min → dateTooEarly, after max → dateTooLate, comparing the
//     text as strings.
//   - Input: the trimmed text (empty when value is not a string) that is
//     empty fails with required when required and otherwise passes every
//     other check; then format, minLength (tooShort) and maxLength (tooLong),
//     stopping at the first failure.
func Check(component string, props map[string]any, value any) *Problem {
	switch component {
	case "Input":
		return checkInput(props, value)
	case "DateInput":
		return checkDate(props, value)
	case "Select":
		return checkSelect(props, value)
	case "Switch":
		if required(props) && value != true {
			return &Problem{Key: KeyTurnOn}
		}
	}
	return nil
}

// CheckAppField checks the value of an application component declared as a
// field. Its only constraint is required: a value that is nil, false or a
// string of white space fails with required.
func CheckAppField(props map[string]any, value any) *Problem {
	if !required(props) {
		return nil
	}
	switch v := value.(type) {
	case nil:
		return &Problem{Key: KeyRequired}
	case bool:
		if !v {
			return &Problem{Key: KeyRequired}
		}
	case string:
		if Trim(v) == "" {
			return &Problem{Key: KeyRequired}
		}
	}
	return nil
}

// IsField reports whether component is one of the catalog's field components.
func IsField(component string) bool {
	switch component {
	case "Input", "DateInput", "Select", "Switch":
		return true
	}
	return false
}

func required(props map[string]any) bool {
	return props["required"] == true
}

// text returns the trimmed text of value, or "" when it is not a string.
func text(value any) string {
	s, _ := value.(string)
	return Trim(s)
}

func checkInput(props map[string]any, value any) *Problem {
	s := text(value)
	if s == "" {
		if required(props) {
			return &Problem{Key: KeyRequired}
		}
		return nil
	}
	if f, ok := props["format"].(string); ok {
		if key := checkFormat(f, s); key != "" {
			return &Problem{Key: key}
		}
	}
	lo, hasLo := number(props["minLength"])
	hi, hasHi := number(props["maxLength"])
	if !hasLo && !hasHi {
		return nil
	}
	// A string of n bytes holds between ceil(n/4) and n code points, which
	// settles most checks without counting.
	bytes := float64(len(s))
	fewest := float64((len(s) + 3) / 4)
	count := -1.0
	points := func() float64 {
		if count < 0 {
			count = float64(utf8.RuneCountInString(s))
		}
		return count
	}
	if hasLo && (bytes < lo || fewest < lo && points() < lo) {
		return &Problem{Key: KeyTooShort, Values: map[string]any{"min": props["minLength"]}}
	}
	if hasHi && (fewest > hi || bytes > hi && points() > hi) {
		return &Problem{Key: KeyTooLong, Values: map[string]any{"max": props["maxLength"]}}
	}
	return nil
}

// checkFormat returns the message key for s failing format f, or "" when s
// passes or f is not a known format.
func checkFormat(f, s string) string {
	switch f {
	case "email":
		if !isEmail(s) {
			return KeyInvalidEmail
		}
	case "number":
		if !isNumber(s) {
			return KeyInvalidNumber
		}
	case "phone":
		if !isPhone(s) {
			return KeyInvalidPhone
		}
	case "url":
		if !isURL(s) {
			return KeyInvalidURL
		}
	}
	return ""
}

func checkDate(props map[string]any, value any) *Problem {
	s := text(value)
	if s == "" {
		if required(props) {
			return &Problem{Key: KeyRequired}
		}
		return nil
	}
	if lo, ok := props["min"].(string); ok && compareUTF16(s, lo) < 0 {
		return &Problem{Key: KeyDateTooEarly, Values: map[string]any{"min": lo}}
	}
	if hi, ok := props["max"].(string); ok && compareUTF16(s, hi) > 0 {
		return &Problem{Key: KeyDateTooLate, Values: map[string]any{"max": hi}}
	}
	return nil
}

func checkSelect(props map[string]any, value any) *Problem {
	if !required(props) {
		return nil
	}
	if s, ok := value.(string); ok {
		switch opts := props["options"].(type) {
		case []any:
			for _, o := range opts {
				if o == s {
					return nil
				}
			}
		case []string:
			for _, o := range opts {
				if o == s {
					return nil
				}
			}
		}
	}
	return &Problem{Key: KeyChooseOption}
}

// number returns v as a float64 when it is a number of any Go numeric type.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

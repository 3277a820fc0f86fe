package run

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/assent-run/assent/run/recipe"
	"github.com/assent-run/assent/store"
)

// wirePlaceholderID stands in for a Control id when the wire size is
// checked before admission. Control ids are UUIDs, so every real id has
// this length.
const wirePlaceholderID = "00000000-0000-4000-8000-000000000000"

// ValidateAction checks a Control or Trace action token: lowercase
// semantic segments separated by dots, at most 64 characters.
func ValidateAction(action string) error {
	if err := recipe.CheckAction(action); err != nil {
		return errorf(CodeInvalidControl, "%v", err)
	}
	return nil
}

// canonicalJSON decodes raw and encodes it again compactly without HTML
// escaping, which is how its size is counted. Object keys come out sorted.
func canonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errTrailing
	}
	b, err := store.EncodeLine(v)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

var errTrailing = errorf(CodeInvalidRequest, "trailing data after JSON value")

// NormalizeControlInput validates a Control input and returns its
// canonical encoding (nil when absent). The input must be a string, an
// object or an array whose canonical JSON is at most 380 bytes.
func NormalizeControlInput(input json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(input)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	c, err := canonicalJSON(t)
	if err != nil {
		return nil, errorf(CodeInvalidControl, "control.input must be JSON-serializable")
	}
	switch c[0] {
	case '"', '{', '[':
	default:
		return nil, errorf(CodeInvalidControl, "control.input must be a string, an object or an array")
	}
	if len(c) > ControlInputMaxBytes {
		return nil, errorf(CodeInvalidControl, "control.input exceeds 380 serialized bytes")
	}
	return c, nil
}

// Envelope is a validated Control request: the action and its canonical
// input.
type Envelope struct {
	Action string
	Input  json.RawMessage
}

// NewEnvelope validates action and input as a Control envelope, including
// the size of its wire record, before anything is admitted.
func NewEnvelope(action string, input json.RawMessage) (Envelope, error) {
	action = strings.TrimSpace(action)
	if err := ValidateAction(action); err != nil {
		return Envelope{}, err
	}
	in, err := NormalizeControlInput(input)
	if err != nil {
		return Envelope{}, err
	}
	e := Envelope{Action: action, Input: in}
	if w := WireRecord(wirePlaceholderID, e.Action, e.Input); len(w) > ControlWireMaxBytes {
		return Envelope{}, errorf(CodeInvalidControl, "Run Control wire record exceeds the 512-byte portable bound")
	}
	return e, nil
}

// WireRecord is what a service reads from its FIFO: the JSON object
// {"id","action","input"} (input omitted when absent) and a newline.
func WireRecord(id, action string, input json.RawMessage) []byte {
	type wire struct {
		ID     string          `json:"id"`
		Action string          `json:"action"`
		Input  json.RawMessage `json:"input,omitempty"`
	}
	b, err := store.EncodeLine(wire{id, action, input})
	if err != nil {
		// Input is canonical JSON produced by NormalizeControlInput.
		panic("run: encode wire record: " + err.Error())
	}
	return b
}

// DecodeWireRecord parses one wire line as a service receives it.
func DecodeWireRecord(line []byte) (id, action string, input json.RawMessage, err error) {
	var w struct {
		ID     string          `json:"id"`
		Action string          `json:"action"`
		Input  json.RawMessage `json:"input"`
	}
	if len(line) > ControlWireMaxBytes {
		return "", "", nil, errorf(CodeInvalidControl, "Run Control wire record exceeds the 512-byte portable bound")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return "", "", nil, errorf(CodeInvalidControl, "malformed Control wire record: %v", err)
	}
	if w.ID == "" {
		return "", "", nil, errorf(CodeInvalidControl, "Control wire record has no id")
	}
	if err := ValidateAction(w.Action); err != nil {
		return "", "", nil, err
	}
	return w.ID, w.Action, w.Input, nil
}

// TruncateError bounds a Control error to 4 KiB, cutting on a UTF-8
// boundary and marking the cut with "… [truncated]".
func TruncateError(s string) string {
	const suffix = "… [truncated]"
	if len(s) <= store.ControlErrorMaxBytes {
		return s
	}
	n := store.ControlErrorMaxBytes - len(suffix)
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + suffix
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runScreenField runs "assent screen field" with args through execute, the
// binary's entry point, and returns its exit code and output.
func runScreenField(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = execute(append([]string{"screen", "field"}, args...), strings.NewReader(""), &out, &errw)
	return code, out.String(), errw.String()
}

func TestScreenField(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string // exact stdout
		err  string // substring of stderr
	}{
		{"required empty", []string{"--component", "Input", "--props", `{"required":true}`, "--value", `""`}, 0, "{\"message\":\"required\"}\n", ""},
		{"passes", []string{"--component", "Input", "--props", `{"required":true}`, "--value", `"Ada"`}, 0, "null\n", ""},
		{"values", []string{"--component", "Input", "--props", `{"minLength":3}`, "--value", `"ab"`}, 0, "{\"message\":\"tooShort\",\"values\":{\"min\":3}}\n", ""},
		{"date values", []string{"--component", "DateInput", "--props", `{"max":"2026-10-31"}`, "--value", `"2026-11-01"`}, 0, "{\"message\":\"dateTooLate\",\"values\":{\"max\":\"2026-10-31\"}}\n", ""},
		{"no HTML escaping", []string{"--component", "DateInput", "--props", `{"min":"<&>"}`, "--value", `"!"`}, 0, "{\"message\":\"dateTooEarly\",\"values\":{\"min\":\"<&>\"}}\n", ""},
		{"defaults: no props, null value", []string{"--component", "Switch"}, 0, "null\n", ""},
		{"null props", []string{"--component", "Switch", "--props", "null", "--value", "false"}, 0, "null\n", ""},
		{"switch", []string{"--component", "Switch", "--props", `{"required":true}`, "--value", `"true"`}, 0, "{\"message\":\"turnOn\"}\n", ""},
		{"select", []string{"--component", "Select", "--props", `{"required":true,"options":["S","M"]}`, "--value", `"XL"`}, 0, "{\"message\":\"chooseOption\"}\n", ""},
		{"text", []string{"--component", "Input", "--props", `{"minLength":3}`, "--value", `"ab"`, "--text"}, 0, "Type at least 3 characters.\n", ""},
		{"text passes", []string{"--component", "Input", "--value", `"ab"`, "--text"}, 0, "", ""},
		{"unquoted string", []string{"--component", "Input", "--value", "ada"}, 2, "", "--value is not valid JSON"},
		{"malformed props", []string{"--component", "Input", "--props", `{"required":}`}, 2, "", "--props is not valid JSON"},
		{"props not an object", []string{"--component", "Input", "--props", `[1]`}, 2, "", "--props must be a JSON object"},
		{"trailing data", []string{"--component", "Input", "--props", `{}}`}, 2, "", "--props"},
		{"two values", []string{"--component", "Input", "--value", `"a" "b"`}, 2, "", "--value"},
		{"no component", []string{"--value", `""`}, 2, "", "--component is required"},
		{"positional argument", []string{"--component", "Input", "extra"}, 2, "", "usage"},
		{"unknown flag", []string{"--component", "Input", "--nope"}, 2, "", "unknown flag"},
		{"not a field", []string{"--component", "Text", "--value", `""`}, 1, "", `"Text" is not a field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runScreenField(t, tt.args...)
			if code != tt.code || out != tt.out || !strings.Contains(errOut, tt.err) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q", code, out, errOut, tt.code, tt.out, tt.err)
			}
		})
	}
}

func TestScreenFieldHelp(t *testing.T) {
	code, out, _ := runScreenField(t, "--help")
	if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--component") {
		t.Errorf("exit %d, help %q", code, out)
	}
}

// TestScreenFieldConformance runs the shared suite's field cases through the
// command line, comparing the printed JSON with each case's expect.
func TestScreenFieldConformance(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "omni-ir", "conformance", "fields", "fields.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("shared field cases absent: %v", err)
	}
	var file struct {
		Cases []struct {
			ID        string         `json:"id"`
			Component string         `json:"component"`
			Props     map[string]any `json:"props"`
			Value     any            `json:"value"`
			Expect    any            `json:"expect"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	for _, c := range file.Cases {
		t.Run(c.ID, func(t *testing.T) {
			code, out, errOut := runScreenField(t, "--component", c.Component, "--props", jsonString(t, c.Props), "--value", jsonString(t, c.Value))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if want := jsonString(t, c.Expect) + "\n"; out != want {
				t.Errorf("printed %q, want %q", out, want)
			}
		})
	}
}

// jsonString returns v as compact JSON without HTML escaping, as the command
// prints it.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

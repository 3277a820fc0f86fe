package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/screen/field"
)

// newScreenFieldCmd returns "screen field", which checks one field value the
// way a renderer does before a press, and prints the conformance suite's
// answer: null, or {"message": key, "values": {...}}.
func newScreenFieldCmd(c *cli) *cobra.Command {
	var component, propsJSON, valueJSON string
	var asText bool
	cmd := &cobra.Command{
		Use:   "field --component NAME [--props JSON] [--value JSON]",
		Short: "Check a form field's value against its constraints",
		Long: `Check a value the way a renderer checks a field (an Input, DateInput, Select or
Switch) before a press, and print what it would say: null when the value
passes, or {"message": KEY} with "values" when the message has {min} or {max}.
--props are the field's props as a JSON object and --value the state it edits
as JSON (a string needs its quotes). With --text, print the default English
sentence instead, or nothing when the value passes.

Exit status: 0 when the check ran (whatever it found), 1 for a component that
is not a field, 2 for malformed JSON in a flag.`,
		Example: `  assent screen field --component Input --props '{"required":true}' --value '""'
  assent screen field --component Input --props '{"format":"email"}' --value '"ada@example.com"'
  assent screen field --component Input --props '{"minLength":3}' --value '"ab"' --text
  assent screen field --component DateInput --props '{"max":"2026-10-31"}' --value '"2026-11-01"'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if component == "" {
				return usageErr("--component is required\nRun '%s --help' for usage.", cmd.CommandPath())
			}
			if !field.IsField(component) {
				return refused("--component %q is not a field; use Input, DateInput, Select or Switch", component)
			}
			var props map[string]any
			if err := decodeFlagJSON("--props", propsJSON, &props); err != nil {
				return err
			}
			var value any
			if err := decodeFlagJSON("--value", valueJSON, &value); err != nil {
				return err
			}
			p := field.Check(component, props, value)
			if asText {
				if p == nil {
					return nil
				}
				_, err := fmt.Fprintln(c.out, field.Messages(nil).Text(p))
				return err
			}
			enc := json.NewEncoder(c.out)
			enc.SetEscapeHTML(false)
			return enc.Encode(p)
		},
	}
	cmd.Flags().StringVar(&component, "component", "", "the field's component: Input, DateInput, Select or Switch (required)")
	cmd.Flags().StringVar(&propsJSON, "props", "{}", "the field's props as a JSON object")
	cmd.Flags().StringVar(&valueJSON, "value", "null", "the field's current value as JSON")
	cmd.Flags().BoolVar(&asText, "text", false, "print the English message instead of JSON")
	return cmd
}

// decodeFlagJSON decodes the JSON value of a flag into v, or returns a
// usage error naming the flag.
func decodeFlagJSON(flag, text string, v any) error {
	err := json.Unmarshal([]byte(text), v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && strings.HasPrefix(typeErr.Value, "number "):
		// A number too large for a float64, wherever it stands.
		return usageErr("%s holds a number out of range (%v); numbers must fit a 64-bit float", flag, err)
	case errors.As(err, &typeErr):
		return usageErr("%s must be a JSON object, such as '{\"required\":true}'", flag)
	}
	return usageErr("%s is not valid JSON (%v); write strings with their quotes, such as '\"ada@example.com\"'", flag, err)
}

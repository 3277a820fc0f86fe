// Package schemaerr reads the errors of JSON Schema validation
// (github.com/santhosh-tekuri/jsonschema/v6) as the list of what failed.
package schemaerr

import "github.com/santhosh-tekuri/jsonschema/v6"

// Leaves returns the innermost failures of ve, in the order the validator
// reports them: the errors without causes, each naming the value at fault
// (InstanceLocation) and the keyword it broke (ErrorKind).
func Leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, Leaves(c)...)
	}
	return out
}

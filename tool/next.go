package tool

// Next is a call an answer suggests its caller make next: the name of a
// tool the caller is offered and arguments its input schema accepts, so an
// agent can make the call as given.
type Next struct {
	Tool      string         `json:"tool" jsonschema:"the tool to call"`
	Arguments map[string]any `json:"arguments" jsonschema:"the arguments to call it with"`
}

// NextCall returns the suggestion to call name with args (no arguments
// when args is nil).
func NextCall(name string, args map[string]any) Next {
	if args == nil {
		args = map[string]any{}
	}
	return Next{Tool: name, Arguments: args}
}

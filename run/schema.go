package run

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/assent-run/assent/tool"
)

// toolSchemas are the output schemas of the actors_* tools, generated from
// the types their structured results serialize, so a schema cannot drift
// from the answer it describes.
type toolSchemas struct {
	spawn, inspect, control, register json.RawMessage
	// recipeRun is the answer of an asynchronous registered Recipe tool.
	recipeRun json.RawMessage
}

// outputSchemas generates the output schemas once. The types are fixed at
// compile time, so a failure is a defect of this package; the tests
// generate them.
var outputSchemas = sync.OnceValue(func() toolSchemas {
	s, err := generateSchemas()
	if err != nil {
		panic(err)
	}
	return s
})

// toolViewSchema describes inspect tool:<name>: the live definition of a
// built-in tool, or the status or callable schema of a registered one.
const toolViewSchema = `{"type":"object","description":"inspect tool:<name>","properties":{
"name":{"type":"string"},
"description":{"type":"string"},
"parameters":{"type":"object","description":"the tool's input schema"},
"source":{"type":"string","description":"builtin, template or the Recipe stem"},
"callable_now":{"type":"boolean"},
"persisted":{"type":"boolean"},
"expose":{"type":"boolean"},
"published":{"type":"boolean"},
"registry_active":{"type":"boolean"},
"host_registered":{"type":"boolean"},
"active_tool":{"type":"boolean"},
"activation":{"type":"string"},
"activation_boundary":{"type":"string"},
"launch_kind":{"type":"string"},
"required_args":{"type":"array","items":{"type":"string"}},
"optional_args":{"type":"array","items":{"type":"string"}},
"diagnostics":{"type":"array","items":{"type":"string"}},
"next_actions":{"type":"array","items":{"type":"object","properties":{"tool":{"type":"string"},"arguments":{"type":"object"}},"required":["tool","arguments"]}}},
"required":["name","description"],"additionalProperties":false}`

func generateSchemas() (toolSchemas, error) {
	opts := tool.SchemaOptions()
	// A TraceDetail carries a Control record's fields only for control
	// items, so none of them is required there.
	record, err := tool.SchemaFor(reflect.TypeFor[ControlRecord](), opts)
	if err != nil {
		return toolSchemas{}, err
	}
	opts.TypeSchemas[reflect.TypeFor[*ControlRecord]()] = &jsonschema.Schema{Type: "object", Properties: record.Properties}
	// A ControlResult encodes as the one result it holds.
	var results []*jsonschema.Schema
	for _, t := range []reflect.Type{reflect.TypeFor[ControlDelivery](), reflect.TypeFor[KillResult](), reflect.TypeFor[ArchiveResult](), reflect.TypeFor[PruneResult]()} {
		s, err := tool.SchemaFor(t, opts)
		if err != nil {
			return toolSchemas{}, err
		}
		results = append(results, s)
	}
	opts.TypeSchemas[reflect.TypeFor[ControlResult]()] = &jsonschema.Schema{AnyOf: results}

	var toolView jsonschema.Schema
	if err := json.Unmarshal([]byte(toolViewSchema), &toolView); err != nil {
		return toolSchemas{}, err
	}
	var out toolSchemas
	for _, g := range []struct {
		dst   *json.RawMessage
		types []reflect.Type
		extra []*jsonschema.Schema
	}{
		{&out.spawn, []reflect.Type{reflect.TypeFor[SpawnResult](), reflect.TypeFor[PendingApproval]()}, nil},
		{&out.recipeRun, []reflect.Type{reflect.TypeFor[SpawnResult]()}, nil},
		{&out.inspect, []reflect.Type{reflect.TypeFor[RuntimeStatus](), reflect.TypeFor[RunList](), reflect.TypeFor[Triage](),
			reflect.TypeFor[RecipesSummary](), reflect.TypeFor[Run](), reflect.TypeFor[RecipeView](), reflect.TypeFor[TraceView](),
			reflect.TypeFor[ControlView](), reflect.TypeFor[Proposal]()}, []*jsonschema.Schema{&toolView}},
		{&out.control, []reflect.Type{reflect.TypeFor[ControlApplied]()}, nil},
		{&out.register, []reflect.Type{reflect.TypeFor[ToolRegistration](), reflect.TypeFor[ToolList](),
			reflect.TypeFor[ToolDeletion](), reflect.TypeFor[PendingApproval]()}, nil},
	} {
		b, err := tool.UnionSchema(opts, g.types, g.extra...)
		if err != nil {
			return toolSchemas{}, fmt.Errorf("run: %w", err)
		}
		*g.dst = b
	}
	return out, nil
}

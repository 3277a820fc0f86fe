package api

import (
	"encoding/json"
	"testing"
)

func TestOpenAPIBuilds(t *testing.T) {
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	n := 0
	for _, item := range doc.Paths {
		n += len(item)
	}
	if n != len(Routes()) {
		t.Fatalf("%d operations, %d routes", n, len(Routes()))
	}
}

// The document lists the query parameters routes read, with their types
// and bounds, as optional parameters "in": "query".
func TestOpenAPIListsQueryParameters(t *testing.T) {
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name     string         `json:"name"`
				In       string         `json:"in"`
				Required bool           `json:"required"`
				Explode  *bool          `json:"explode"`
				Schema   map[string]any `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, name string
		schema             map[string]any
	}{
		{"post", "/v1/flows/programs", "reason", map[string]any{"type": "string", "maxLength": 500.0}},
		{"post", "/v1/flows/programs", "deadline_seconds", map[string]any{"type": "integer", "minimum": 1.0, "maximum": 2592000.0}},
		{"get", "/v1/audit", "limit", map[string]any{"type": "integer", "minimum": 1.0, "maximum": 1000.0}},
		{"get", "/v1/proposals", "status", map[string]any{"type": "string", "enum": []any{"pending", "approved", "declined"}}},
		{"get", "/v1/flows/approvals", "instance", map[string]any{"type": "string"}},
		{"post", "/v1/screens", "secret", map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.name, func(t *testing.T) {
			op, ok := doc.Paths[tc.path][tc.method]
			if !ok {
				t.Fatal("no such operation")
			}
			for _, p := range op.Parameters {
				if p.Name != tc.name {
					continue
				}
				if p.In != "query" || p.Required {
					t.Fatalf("%s is in %q, required %v", p.Name, p.In, p.Required)
				}
				got, _ := json.Marshal(p.Schema)
				want, _ := json.Marshal(tc.schema)
				if string(got) != string(want) {
					t.Fatalf("schema %s, want %s", got, want)
				}
				if (tc.schema["type"] == "array") != (p.Explode != nil && *p.Explode) {
					t.Fatalf("explode %v", p.Explode)
				}
				return
			}
			t.Fatalf("%s is not listed: %+v", tc.name, op.Parameters)
		})
	}
}

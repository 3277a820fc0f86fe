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

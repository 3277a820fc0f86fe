package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

const schemaPath = "../../../../shared/omni-ir/conformance/schema.json"

// TestCommittedCatalogIsCurrent regenerates the catalog from the shared
// schema and compares it with the committed file.
func TestCommittedCatalogIsCurrent(t *testing.T) {
	if _, err := os.Stat(schemaPath); err != nil {
		t.Skip("shared schema.json not present")
	}
	got, err := generate(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "catalog_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("screen/catalog_gen.go is out of date: run go generate ./screen")
	}
}

func TestGenerateRefusesUnknownKeywords(t *testing.T) {
	dir := t.TempDir()
	for name, schema := range map[string]string{
		"keyword": `{"formatVersion": "0.8", "rootId": "root", "limits": {}, "components": {"X": {"positional": [], "props": {"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string", "format": "email"}}}}}, "mcpMutation": {"positional": [], "props": {"type": "object", "additionalProperties": false}}}`,
		"open":    `{"formatVersion": "0.8", "rootId": "root", "limits": {}, "components": {"X": {"positional": [], "props": {"type": "object"}}}, "mcpMutation": {"positional": [], "props": {"type": "object", "additionalProperties": false}}}`,
		"limit":   `{"formatVersion": "0.8", "rootId": "root", "limits": {"newLimit": 3}, "components": {}, "mcpMutation": {"positional": [], "props": {"type": "object", "additionalProperties": false}}}`,
		"json":    `{`,
	} {
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, []byte(schema), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := generate(p); err == nil {
			t.Errorf("%s: generated a catalog from a schema it can't translate", name)
		}
	}
}

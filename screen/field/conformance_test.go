package field

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sharedFields is the shared conformance suite's field cases, relative to this
// package's directory (the suite lives beside the repository's checkout).
var sharedFields = filepath.Join("..", "..", "..", "shared", "omni-ir", "conformance", "fields", "fields.json")

// fieldCase is one case of a field case file: the shared suite's shape, which
// the cases in testdata follow too.
type fieldCase struct {
	ID          string         `json:"id"`
	Description string         `json:"description"`
	Component   string         `json:"component"`
	Props       map[string]any `json:"props"`
	Value       any            `json:"value"`
	Expect      *Problem       `json:"expect"`
}

func loadCases(t *testing.T, path string) []fieldCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("case file %s is absent", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []fieldCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(file.Cases) == 0 {
		t.Fatalf("%s holds no cases", path)
	}
	return file.Cases
}

// canonical returns the JSON form of p, decoded again, so that numbers
// compare equal whatever Go type held them.
func canonical(t *testing.T, p *Problem) any {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func runCases(t *testing.T, path string) {
	cases := loadCases(t, path)
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.ID] {
			t.Errorf("%s: case id %q is used twice", path, c.ID)
		}
		seen[c.ID] = true
		t.Run(c.ID, func(t *testing.T) {
			got := Check(c.Component, c.Props, c.Value)
			if g, w := canonical(t, got), canonical(t, c.Expect); !reflect.DeepEqual(g, w) {
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(c.Expect)
				t.Errorf("%s\nCheck(%q, %v, %#v) = %s, want %s", c.Description, c.Component, c.Props, c.Value, gb, wb)
			}
		})
	}
}

func TestConformanceShared(t *testing.T) { runCases(t, sharedFields) }

func TestConformanceOwn(t *testing.T) { runCases(t, filepath.Join("testdata", "fields.json")) }

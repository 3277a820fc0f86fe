// Package conformance reads the screen format's conformance cases and
// checks a parser's outcome against them. Every parser of the format in
// this module — the Go package and the view's engine — is held to the same
// cases through it.
//
// A case file is {"area", "cases": [...]}; each case gives an input (a
// string, or parts where {"repeat": s, "times": n} stands for s repeated),
// the app's tools, assets, components and pictures, updates applied after
// the stream ends, and what to expect: issues as line:code pairs, and the
// document's nodes, state, mutations and missing ids.
package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// SharedDir is where the shared cases are, relative to a package directly
// below the module root (the shared material sits beside the repository).
const SharedDir = "../../shared/omni-ir/conformance/cases"

// File is one case file.
type File struct {
	Name  string `json:"-"`
	Area  string `json:"area"`
	Cases []Case `json:"cases"`
}

// Case is one conformance case.
type Case struct {
	ID          string          `json:"id"`
	Rules       []string        `json:"rules"`
	Description string          `json:"description"`
	Input       json.RawMessage `json:"input"`
	Tools       *[]string       `json:"tools"`
	Assets      []string        `json:"assets"`
	Components  json.RawMessage `json:"components"`
	Pictures    json.RawMessage `json:"pictures"`
	Updates     []Update        `json:"updates"`
	Expect      struct {
		Issues    []Issue         `json:"issues"`
		Nodes     json.RawMessage `json:"nodes"`
		State     json.RawMessage `json:"state"`
		Mutations json.RawMessage `json:"mutations"`
		Missing   json.RawMessage `json:"missing"`
	} `json:"expect"`
}

// Update is an update applied after the stream ended, with its outcome.
type Update struct {
	Input  json.RawMessage `json:"input"`
	Expect struct {
		Applied bool    `json:"applied"`
		Issues  []Issue `json:"issues"`
	} `json:"expect"`
}

// Issue is an issue as cases and parsers report it: a line (0 or absent
// for the end of the stream) and a code.
type Issue struct {
	Line *int   `json:"line"`
	Code string `json:"code"`
	// Message is the parser's words; cases do not give it.
	Message string `json:"message,omitempty"`
}

func (i Issue) key() string {
	if i.Line == nil || *i.Line == 0 {
		return "null:" + i.Code
	}
	return fmt.Sprintf("%d:%s", *i.Line, i.Code)
}

// ToolNames returns the case's tool registry; a case that names none has
// the one tool payments.confirm.
func (c *Case) ToolNames() []string {
	if c.Tools != nil {
		return *c.Tools
	}
	return []string{"payments.confirm"}
}

// Text joins the case's input.
func (c *Case) Text() (string, error) { return Text(c.Input) }

// Text joins an input given as a string or as parts.
func Text(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if err := json.Unmarshal(p, &s); err == nil {
			b.WriteString(s)
			continue
		}
		var r struct {
			Repeat string `json:"repeat"`
			Times  int    `json:"times"`
		}
		if err := json.Unmarshal(p, &r); err != nil {
			return "", err
		}
		b.WriteString(strings.Repeat(r.Repeat, r.Times))
	}
	return b.String(), nil
}

// Load reads every case file matching pattern.
func Load(pattern string) ([]File, error) {
	names, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		f := File{Name: strings.TrimSuffix(filepath.Base(n), ".json")}
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if len(f.Cases) > 0 {
			out = append(out, f)
		}
	}
	return out, nil
}

// Outcome is what a parser made of a case: the document in its JSON form
// ({"nodes", "state", "mutations", "missing"}), the issues of the stream,
// and each update's outcome.
type Outcome struct {
	Doc     json.RawMessage `json:"doc"`
	Issues  []Issue         `json:"issues"`
	Updates []struct {
		Applied bool    `json:"applied"`
		Issues  []Issue `json:"issues"`
	} `json:"updates"`
	// HTML is the screen as a renderer drew it once the stream ended, and
	// Partial before, when it says.
	HTML    string `json:"html,omitempty"`
	Partial string `json:"partial,omitempty"`
}

// Check reports on t every way got differs from what c expects.
func Check(t testing.TB, c *Case, got Outcome) {
	t.Helper()
	if len(got.Updates) != len(c.Updates) {
		t.Errorf("%d update outcomes for %d updates", len(got.Updates), len(c.Updates))
	}
	for i := range min(len(got.Updates), len(c.Updates)) {
		u, w := got.Updates[i], c.Updates[i].Expect
		if u.Applied != w.Applied {
			t.Errorf("update %d: applied = %v, want %v (issues %v)", i, u.Applied, w.Applied, keys(u.Issues))
		}
		if g, w := keys(u.Issues), keys(w.Issues); !reflect.DeepEqual(g, w) {
			t.Errorf("update %d issues:\n got %v\nwant %v", i, g, w)
		}
	}
	if g, w := keys(got.Issues), keys(c.Expect.Issues); !reflect.DeepEqual(g, w) {
		t.Errorf("issues:\n got %v\nwant %v", g, w)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(got.Doc, &doc); err != nil {
		t.Fatalf("document: %v", err)
	}
	equal(t, "nodes", doc["nodes"], c.Expect.Nodes)
	equal(t, "state", doc["state"], c.Expect.State)
	equal(t, "mutations", doc["mutations"], c.Expect.Mutations)
	equal(t, "missing", doc["missing"], c.Expect.Missing)
}

// keys returns the distinct line:code pairs, sorted.
func keys(issues []Issue) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, i := range issues {
		if k := i.key(); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func equal(t testing.TB, what string, got, want json.RawMessage) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	var g, w any
	_ = json.Unmarshal(got, &g)
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad expectation: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

package screen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The conformance runner: every case file of the shared suite that is
// present, and our own cases in testdata, fed whole and in pieces of 1, 5
// and 13 bytes.

type caseFile struct {
	Area  string     `json:"area"`
	Cases []confCase `json:"cases"`
}

type confCase struct {
	ID          string          `json:"id"`
	Rules       []string        `json:"rules"`
	Description string          `json:"description"`
	Input       json.RawMessage `json:"input"`
	Tools       *[]string       `json:"tools"`
	Assets      []string        `json:"assets"`
	Components  json.RawMessage `json:"components"`
	Pictures    json.RawMessage `json:"pictures"`
	Updates     []struct {
		Input  json.RawMessage `json:"input"`
		Expect struct {
			Applied bool        `json:"applied"`
			Issues  []caseIssue `json:"issues"`
		} `json:"expect"`
	} `json:"updates"`
	Expect struct {
		Issues    []caseIssue     `json:"issues"`
		Nodes     json.RawMessage `json:"nodes"`
		State     json.RawMessage `json:"state"`
		Mutations json.RawMessage `json:"mutations"`
		Missing   json.RawMessage `json:"missing"`
	} `json:"expect"`
}

type caseIssue struct {
	Line *int   `json:"line"`
	Code string `json:"code"`
}

func (c caseIssue) String() string {
	if c.Line == nil {
		return "null:" + c.Code
	}
	return fmt.Sprintf("%d:%s", *c.Line, c.Code)
}

// caseText joins an input given as a string or as parts, where a part
// {"repeat": s, "times": n} stands for s repeated n times.
func caseText(raw json.RawMessage) (string, error) {
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

func (c *confCase) options(t *testing.T) Options {
	t.Helper()
	opts := Options{Tools: []string{"payments.confirm"}, Assets: c.Assets}
	if c.Tools != nil {
		opts.Tools = *c.Tools
	}
	if len(c.Components) > 0 {
		comps, err := DeclareComponents(c.Components)
		if err != nil {
			t.Fatalf("components: %v", err)
		}
		opts.Components = comps
	}
	if len(c.Pictures) > 0 {
		pics, err := DeclarePictures(c.Pictures)
		if err != nil {
			t.Fatalf("pictures: %v", err)
		}
		opts.Pictures = pics
	}
	return opts
}

func issueSet(issues []Issue) []string {
	seen := map[string]bool{}
	var out []string
	for _, i := range issues {
		var k string
		if i.Line == 0 {
			k = "null:" + i.Code
		} else {
			k = fmt.Sprintf("%d:%s", i.Line, i.Code)
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func expectSet(issues []caseIssue) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, i := range issues {
		if k := i.String(); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func jsonEqual(t *testing.T, what string, got any, want json.RawMessage) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	gb, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var g, w any
	_ = json.Unmarshal(gb, &g)
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad expectation: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, gb, want)
	}
}

// runCase feeds the case in pieces of size chunk (0 = whole) and checks
// every expectation.
func runCase(t *testing.T, c *confCase, chunk int) {
	text, err := caseText(c.Input)
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	p := NewParser(c.options(t))
	b := []byte(text)
	if chunk <= 0 {
		_, _ = p.Write(b)
	} else {
		for i := 0; i < len(b); i += chunk {
			_, _ = p.Write(b[i:min(i+chunk, len(b))])
		}
	}
	doc := p.End()
	checkConsistent(t, doc)
	for i, u := range c.Updates {
		ut, err := caseText(u.Input)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		res, err := p.Update(ut)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if res.Applied != u.Expect.Applied {
			t.Errorf("update %d: applied = %v, want %v (issues %v)", i, res.Applied, u.Expect.Applied, res.Issues)
		}
		if g, w := issueSet(res.Issues), expectSet(u.Expect.Issues); !reflect.DeepEqual(g, w) && !(len(g) == 0 && len(w) == 0) {
			t.Errorf("update %d issues:\n got %v\nwant %v\n%v", i, g, w, res.Issues)
		}
	}
	if g, w := issueSet(doc.Issues()), expectSet(c.Expect.Issues); !reflect.DeepEqual(g, w) && !(len(g) == 0 && len(w) == 0) {
		t.Errorf("issues:\n got %v\nwant %v\n%s", g, w, issueDump(doc.Issues()))
	}
	db, _ := json.Marshal(doc)
	dec := json.NewDecoder(bytes.NewReader(db))
	var generic map[string]json.RawMessage
	if err := dec.Decode(&generic); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "nodes", generic["nodes"], c.Expect.Nodes)
	jsonEqual(t, "state", generic["state"], c.Expect.State)
	jsonEqual(t, "mutations", generic["mutations"], c.Expect.Mutations)
	jsonEqual(t, "missing", generic["missing"], c.Expect.Missing)
}

func issueDump(issues []Issue) string {
	var b strings.Builder
	for _, i := range issues {
		fmt.Fprintf(&b, "  line %d %s: %s\n", i.Line, i.Code, i.Message)
	}
	return b.String()
}

func runCaseFiles(t *testing.T, files []string) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cf caseFile
		if err := json.Unmarshal(data, &cf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(cf.Cases) == 0 {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			for i := range cf.Cases {
				c := &cf.Cases[i]
				t.Run(c.ID, func(t *testing.T) {
					for _, chunk := range []int{0, 1, 5, 13} {
						t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) { runCase(t, c, chunk) })
					}
				})
			}
		})
	}
}

const sharedCases = "../../shared/omni-ir/conformance/cases"

func TestConformanceShared(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedCases, "*.json"))
	if len(files) == 0 {
		t.Skipf("no shared conformance cases at %s", sharedCases)
	}
	runCaseFiles(t, files)
}

func TestConformanceOwn(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "cases", "*.json"))
	if len(files) == 0 {
		t.Fatal("no cases in testdata/cases")
	}
	runCaseFiles(t, files)
}

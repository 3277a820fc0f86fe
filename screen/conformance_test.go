package screen

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/assent-run/assent/screen/internal/conformance"
)

// The conformance runner: every case file of the shared suite that is
// present, and our own cases in testdata, fed whole and in pieces of 1, 5
// and 13 bytes.

func caseOptions(t *testing.T, c *conformance.Case) Options {
	t.Helper()
	opts := Options{Tools: c.ToolNames(), Assets: c.Assets}
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

// caseIssues converts issues to the cases' form.
func caseIssues(t *testing.T, issues []Issue) []conformance.Issue {
	t.Helper()
	b, err := json.Marshal(issues)
	if err != nil {
		t.Fatal(err)
	}
	var out []conformance.Issue
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// runCase feeds the case in pieces of size chunk (0 = whole) and checks
// every expectation.
func runCase(t *testing.T, c *conformance.Case, chunk int) {
	text, err := c.Text()
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	p := NewParser(caseOptions(t, c))
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
	var got conformance.Outcome
	for i, u := range c.Updates {
		ut, err := conformance.Text(u.Input)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		res, err := p.Update(ut)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		got.Updates = append(got.Updates, struct {
			Applied bool                `json:"applied"`
			Issues  []conformance.Issue `json:"issues"`
		}{res.Applied, caseIssues(t, res.Issues)})
	}
	got.Issues = caseIssues(t, doc.Issues())
	if got.Doc, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	conformance.Check(t, c, got)
}

func runCaseFiles(t *testing.T, files []conformance.File) {
	for _, f := range files {
		t.Run(f.Name, func(t *testing.T) {
			for i := range f.Cases {
				c := &f.Cases[i]
				t.Run(c.ID, func(t *testing.T) {
					for _, chunk := range []int{0, 1, 5, 13} {
						t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) { runCase(t, c, chunk) })
					}
				})
			}
		})
	}
}

const sharedCases = conformance.SharedDir

func TestConformanceShared(t *testing.T) {
	files, err := conformance.Load(filepath.Join(sharedCases, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skipf("no shared conformance cases at %s", sharedCases)
	}
	runCaseFiles(t, files)
}

func TestConformanceOwn(t *testing.T) {
	files, err := conformance.Load(filepath.Join("testdata", "cases", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no cases in testdata/cases")
	}
	runCaseFiles(t, files)
}

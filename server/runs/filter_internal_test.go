package runs

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/assent-run/assent/run"
)

// FuzzRunFilter: any query string gives a bounded, valid filter, and
// matching with it never panics.
func FuzzRunFilter(f *testing.F) {
	for _, s := range []string{"", "status=running&agent=a&recipe=svc&q=x", "status=bogus", "q=" + strings.Repeat("é", 150), "q=%ff%fe", "status=active&status=done", "q=%00", "q=%c3+" + strings.Repeat("0", 250)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		rf := parseRunFilter(q)
		if len(rf.Query) > maxRunQuery || !utf8.ValidString(rf.Query) {
			t.Fatalf("query %q", rf.Query)
		}
		if rf.Status != "" && !slices.Contains(runStatusFilters, rf.Status) {
			t.Fatalf("status %q", rf.Status)
		}
		rf.match(run.Run{ID: raw, Status: run.StatusRunning, OwnerID: rf.Agent})
		if again := parseRunFilter(rf.values()); again != rf {
			t.Fatalf("filter %+v does not survive its own query: %+v", rf, again)
		}
	})
}

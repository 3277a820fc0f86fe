package run

import (
	"testing"

	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/tool"
)

// mustToolSet returns the tool set of m on reg, filing proposals in db.
func mustToolSet(t testing.TB, db *sqlite.DB, m *Manager, reg *tool.Registry) *ToolSet {
	t.Helper()
	ts, err := NewToolSet(m, reg, ToolStores{Proposals: db.Proposals(), Principals: db.Principals()})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestNewToolSetNeedsItsStores: a tool set missing a store it files or
// checks proposals in is refused when it is built, not found out when an
// agent's command is filed.
func TestNewToolSetNeedsItsStores(t *testing.T) {
	f := newFixture(t)
	full := ToolStores{Proposals: f.db.Proposals(), Principals: f.db.Principals()}
	tests := []struct {
		name   string
		m      *Manager
		reg    *tool.Registry
		stores ToolStores
		ok     bool
	}{
		{"complete", f.m, tool.NewRegistry(), full, true},
		{"no manager", nil, tool.NewRegistry(), full, false},
		{"no registry", f.m, nil, full, false},
		{"no proposals", f.m, tool.NewRegistry(), ToolStores{Principals: full.Principals}, false},
		{"no principals", f.m, tool.NewRegistry(), ToolStores{Proposals: full.Proposals}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := NewToolSet(tt.m, tt.reg, tt.stores)
			if (err == nil) != tt.ok || (ts != nil) != tt.ok {
				t.Fatalf("NewToolSet = %v, %v; want ok %v", ts, err, tt.ok)
			}
		})
	}
}

package flow

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRegistryOrderRanksOnce checks that ranking once and breaking ties by position
// orders transitions given in id order as comparing class rank, priority
// and id does.
func TestRegistryOrderRanksOnce(t *testing.T) {
	classes := []string{Progress, Recovery, ObservedExternal, ObjectiveRequired, ExplicitOnly, "unknown"}
	for _, n := range []int{0, 1, 7, 60, 500} {
		ts := make([]Transition, n)
		want := make([]*Transition, n)
		for i := range ts {
			ts[i] = Transition{ID: fmt.Sprintf("p/t%04d", i), SelectionClass: classes[(i*7)%len(classes)], Priority: int64((i * 13) % 5)}
			want[i] = &ts[i]
		}
		slices.SortStableFunc(want, func(a, b *Transition) int {
			return cmp.Or(cmp.Compare(Rank(a.SelectionClass), Rank(b.SelectionClass)), cmp.Compare(a.Priority, b.Priority), strings.Compare(a.ID, b.ID))
		})
		reg := registryOrder(ts)
		if len(reg) != n {
			t.Fatalf("n=%d: %d transitions ordered", n, len(reg))
		}
		for i := range reg {
			if reg[i] != want[i] {
				t.Fatalf("n=%d: position %d holds %s, want %s", n, i, reg[i].ID, want[i].ID)
			}
		}
	}
}

func TestEntryPhasesAndDerivedFacets(t *testing.T) {
	// transition returns a state.assign transition from src to dst.
	transition := func(id string, src, dst []string, assign string, target string) map[string]any {
		tr := map[string]any{"id": id, "selection_class": "PROGRESS", "priority": 1, "source_phases": src, "target_phases": dst,
			"authority": []string{"agent"}, "required_capabilities": []string{"state.write"}, "effect": "state.assign",
			"verifier": "conditions.match", "prescription": map[string]any{"operation": "go", "expected_postcondition": "done"}}
		if assign != "" {
			tr["assignments"] = []any{map[string]any{"facet": assign, "value": "v"}}
		}
		if target != "" {
			tr["target_conditions"] = []any{map[string]any{"facet": target, "statuses": []string{"known"}}}
		}
		return tr
	}
	tests := []struct {
		name        string
		transitions []any
		entry       []string
		derived     []string
		phases      []string
	}{
		{"a line", []any{
			transition("submit", []string{"draft"}, []string{"submitted"}, "status", ""),
			transition("approve", []string{"submitted"}, []string{"approved"}, "approval", "approval"),
		}, []string{"draft"}, []string{"approval", "status"}, []string{"approved", "draft", "submitted"}},
		{"two ways in", []any{
			transition("a", []string{"new", "imported"}, []string{"open"}, "", "checked"),
			transition("b", []string{"open"}, []string{"closed"}, "", ""),
		}, []string{"imported", "new"}, []string{"checked"}, []string{"closed", "imported", "new", "open"}},
		{"a way back is no way in", []any{
			transition("go", []string{"start"}, []string{"middle"}, "", ""),
			transition("back", []string{"middle"}, []string{"start"}, "", ""),
		}, nil, nil, []string{"middle", "start"}},
		{"a cycle", []any{
			transition("on", []string{"off"}, []string{"on"}, "light", ""),
			transition("off", []string{"on"}, []string{"off"}, "light", ""),
		}, nil, []string{"light"}, []string{"off", "on"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, variant(t, readFile(t, "testdata/minimal.json"), func(m doc) {
				m["transitions"] = tt.transitions
				m["owned_resources"] = []any{}
			}))
			if got := p.EntryPhases(); !slices.Equal(got, tt.entry) {
				t.Errorf("EntryPhases() = %q, want %q", got, tt.entry)
			}
			if got := p.DerivedFacets(); !slices.Equal(got, tt.derived) {
				t.Errorf("DerivedFacets() = %q, want %q", got, tt.derived)
			}
			if got := p.Phases(); !slices.Equal(got, tt.phases) {
				t.Errorf("Phases() = %q, want %q", got, tt.phases)
			}
		})
	}
}

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

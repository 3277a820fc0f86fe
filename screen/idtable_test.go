package screen

import (
	"fmt"
	"testing"
)

func TestIDTable(t *testing.T) {
	for _, n := range []int{0, 1, 11, 12, 13, 100, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var tab idTable
			entries := make([]entry, n)
			for i := range entries {
				entries[i].id = fmt.Sprintf("id%d", i)
				if tab.get(entries[i].id) != nil {
					t.Fatalf("%s found before it was put", entries[i].id)
				}
				tab.add(&entries[i], tab.hash(entries[i].id))
			}
			for i := range entries {
				if got := tab.get(entries[i].id); got != &entries[i] {
					t.Fatalf("get(%q) = %p, want %p", entries[i].id, got, &entries[i])
				}
			}
			for _, id := range []string{"", "id", fmt.Sprintf("id%d", n), "ID0"} {
				if got := tab.get(id); got != nil {
					t.Errorf("get(%q) = %q, want nil", id, got.id)
				}
			}
			if tab.n != n {
				t.Errorf("n = %d, want %d", tab.n, n)
			}
			if len(tab.slots) > 0 && tab.n*4 > len(tab.slots)*3 {
				t.Errorf("%d ids in %d slots: fuller than three quarters", tab.n, len(tab.slots))
			}
		})
	}
}

func TestFirstDuplicate(t *testing.T) {
	many := func(n int, extra ...string) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("c%d", i)
		}
		return append(ids, extra...)
	}
	tests := []struct {
		name string
		ids  []string
		want string // "" for none
	}{
		{"empty", nil, ""},
		{"short, distinct", []string{"a", "b", "c"}, ""},
		{"short, repeated", []string{"a", "b", "a", "b"}, "a"},
		{"long, distinct", many(200), ""},
		{"long, repeated at the end", many(200, "c7"), "c7"},
		{"long, first repeat wins", append([]string{"x", "y"}, many(30, "y", "x")...), "y"},
	}
	var tab idTable
	var slots []int32
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hashes := make([]uint64, len(tt.ids))
			for i, id := range tt.ids {
				hashes[i] = tab.hash(id)
			}
			got, dup, s := firstDuplicate(tt.ids, hashes, slots)
			slots = s
			if got != tt.want || dup != (tt.want != "") {
				t.Errorf("firstDuplicate = %q, %v; want %q", got, dup, tt.want)
			}
			for _, v := range slots {
				if v != 0 {
					t.Fatal("scratch slots left dirty")
				}
			}
		})
	}
}

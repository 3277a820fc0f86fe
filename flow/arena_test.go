package flow

import (
	"fmt"
	"strings"
	"testing"
)

func TestSlabClone(t *testing.T) {
	var s slab[string]
	var lists [][]string
	for i := range 300 { // several chunks
		src := make([]string, i%5+1)
		for j := range src {
			src[j] = fmt.Sprint(i, ".", j)
		}
		lists = append(lists, s.clone(src))
	}
	for i, l := range lists {
		if cap(l) != len(l) {
			t.Fatalf("list %d: cap %d, len %d; appending would overwrite a neighbour", i, cap(l), len(l))
		}
		for j, v := range l {
			if want := fmt.Sprint(i, ".", j); v != want {
				t.Fatalf("list %d member %d = %q, want %q", i, j, v, want)
			}
		}
	}
	if s.clone(nil) != nil || s.clone([]string{}) != nil {
		t.Fatal("an empty list clones to a non-nil slice")
	}
	big := make([]string, 3*chunkLen)
	if got := s.clone(big); len(got) != len(big) {
		t.Fatalf("a list longer than a chunk cloned to %d members", len(got))
	}
}

func TestSlabNew(t *testing.T) {
	var s slab[Policy]
	ptrs := make([]*Policy, 2*chunkLen+3)
	for i := range ptrs {
		ptrs[i] = s.new()
		ptrs[i].ManagedOperations = []string{fmt.Sprint(i)}
	}
	for i, p := range ptrs {
		if p.ManagedOperations[0] != fmt.Sprint(i) {
			t.Fatalf("element %d was overwritten: %v", i, p.ManagedOperations)
		}
	}
}

func TestStringArena(t *testing.T) {
	var a stringArena
	long := strings.Repeat("x", maxArenaString+1)
	var got, want []string
	for i := range 2000 {
		w := fmt.Sprintf("string %d", i)
		if i%500 == 0 {
			w = long
		}
		want = append(want, w, "p/"+w)
		got = append(got, a.bytes([]byte(w)), a.join("p", "/", w))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("string %d = %q, want %q", i, got[i], want[i])
		}
	}
	if a.bytes(nil) != "" || a.join("", "", "") != "" {
		t.Fatal("empty input gave a non-empty string")
	}
}

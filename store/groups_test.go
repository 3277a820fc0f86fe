package store

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckGroupName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"finance", true},
		{"ops-eu.2", true},
		{"9lives", true},
		{strings.Repeat("a", GroupNameMax), true},
		{strings.Repeat("a", GroupNameMax+1), false},
		{"", false},
		{"Finance", false},
		{"_x", false},
		{"a b", false},
		{"é", false},
		{"a\x00", false},
	} {
		err := CheckGroupName(tc.name)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckGroupName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func FuzzCheckGroupName(f *testing.F) {
	for _, s := range []string{"finance", "", "-", "A", "a.b-c_d", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckGroupName(s) != nil {
			return
		}
		if len(s) == 0 || len(s) > GroupNameMax || strings.ToLower(s) != s || strings.ContainsAny(s, " \x00/") {
			t.Fatalf("accepted %q", s)
		}
	})
}

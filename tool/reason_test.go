package tool

import (
	"strings"
	"testing"
)

func TestCheckReason(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"  the invoice is due today \n", "the invoice is due today", true},
		{"line one\nline two\twith a tab", "line one\nline two\twith a tab", true},
		{strings.Repeat("é", MaxReason), strings.Repeat("é", MaxReason), true},
		{strings.Repeat("a", MaxReason+1), "", false},
		{"bell\a", "", false},
		{"esc\x1b[31m", "", false},
		{"bad \xff utf8", "", false},
		{"<script>alert(1)</script>", "<script>alert(1)</script>", true},
	}
	for _, tt := range tests {
		got, err := CheckReason(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("CheckReason(%q) = %q, %v; want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && err.Code != CodeInvalidValue {
			t.Errorf("CheckReason(%q): code %s", tt.in, err.Code)
		}
	}
}

func FuzzCheckReason(f *testing.F) {
	for _, s := range []string{"", "why", "a\nb", "\x00", strings.Repeat("x", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := CheckReason(s)
		if err != nil {
			return
		}
		if len([]rune(got)) > MaxReason || strings.ContainsAny(got, "\x00\r\x1b") {
			t.Fatalf("accepted %q", got)
		}
	})
}

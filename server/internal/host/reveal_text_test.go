package host

import (
	"strings"
	"testing"
)

func TestRevealText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain text\twith a tab\n", "plain text\twith a tab\n"},
		{"Pay to \u202eKCAB\u202c", "Pay to ⟨U+202E⟩KCAB⟨U+202C⟩"},
		{"a\u200bb", "a⟨U+200B⟩b"},
		{"bad \xff byte", "bad ⟨0xFF⟩ byte"},
		{"tag \U000E0041", "tag ⟨U+E0041⟩"},
		{"<b>&</b>", "<b>&</b>"}, // text, escaped later by the template
	} {
		if got := RevealText(tc.in); got != tc.want {
			t.Errorf("RevealText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRevealText: the result holds no character a person cannot see, and
// text without one is returned unchanged.
func FuzzRevealText(f *testing.F) {
	for _, s := range []string{"", "abc", "\u202e\u2066x\u2069", "\xff\xfe", "a\u200db", "\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := RevealText(s)
		if HiddenChars(got) != 0 {
			t.Fatalf("RevealText(%q) = %q still hides characters", s, got)
		}
		if HiddenChars(s) == 0 && got != s {
			t.Fatalf("RevealText(%q) = %q changed plain text", s, got)
		}
		if n := strings.Count(got, "⟨") - strings.Count(s, "⟨"); n != HiddenChars(s) {
			t.Fatalf("RevealText(%q) = %q has %d escapes, want %d", s, got, n, HiddenChars(s))
		}
	})
}

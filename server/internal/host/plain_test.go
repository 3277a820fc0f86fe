package host

import (
	"strings"
	"testing"
)

func TestPlainName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"expense.amount_band", "Amount band"},
		{"payee_iban", "Payee iban"},
		{"approval", "Approval"},
		{"a.b.c-d", "C d"},
		{"", ""},
		{"trailing.", "Trailing."},
		{"élan", "Élan"},
	} {
		if got := PlainName(c.in); got != c.want {
			t.Errorf("PlainName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPlainValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"over_limit", "over limit"},
		{"person", "person"},
		{"1,250.00 EUR", "1,250.00 EUR"},
		{"a.b", "a.b"},
		{"", ""},
	} {
		if got := PlainValue(c.in); got != c.want {
			t.Errorf("PlainValue(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestReadableTime(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"2026-12-06T08:31:28.909Z", "2026-12-06 08:31:28 UTC"},
		{"2026-12-06T09:31:28+01:00", "2026-12-06 08:31:28 UTC"},
		{"yesterday", "yesterday"},
		{"", ""},
	} {
		if got := ReadableTime(c.in); got != c.want {
			t.Errorf("ReadableTime(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzPlain: the words made of any name, value or time never panic, and a
// value with spaces is left as it is.
func FuzzPlain(f *testing.F) {
	for _, s := range []string{"expense.amount_band", "over_limit", "2026-12-06T08:31:28.909Z", "", ".", "a b", "\u202e_x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = PlainName(s)
		_ = ReadableTime(s)
		if v := PlainValue(s); strings.ContainsAny(s, " \t\n") && v != s {
			t.Fatalf("PlainValue(%q) = %q, want it unchanged", s, v)
		}
	})
}

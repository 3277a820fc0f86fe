package host

import "testing"

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

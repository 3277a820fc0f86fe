package host

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// PlainName turns a runtime name (a fact "expense.amount_band", a facet,
// a parameter "payee_iban") into words a person reads as a label: the last
// dotted part, with underscores and dashes as spaces and a capital first
// letter ("Amount band"). The runtime's own name belongs under a card's
// technical details.
func PlainName(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 && i < len(name)-1 {
		name = name[i+1:]
	}
	w := PlainValue(name)
	r, n := utf8.DecodeRuneInString(w)
	if n == 0 {
		return w
	}
	return string(unicode.ToUpper(r)) + w[n:]
}

// PlainValue shows an identifier-like value ("over_limit") as words
// ("over limit"). Anything that is not a single identifier (text with
// spaces, amounts, IBANs) is returned as it is.
func PlainValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n") {
		return v
	}
	for _, r := range v {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-') {
			return v
		}
	}
	return strings.NewReplacer("_", " ", "-", " ").Replace(v)
}

// ReadableTime shows an RFC 3339 instant ("2026-12-06T08:31:28.909Z") as a
// person reads it in UTC ("2026-12-06 08:31:28 UTC"); anything else is
// returned as it is.
func ReadableTime(iso string) string {
	t, err := time.Parse(time.RFC3339Nano, iso)
	if err != nil {
		return iso
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

package flows

import (
	"strconv"
	"strings"
)

// NormalizeIBAN removes the spaces of an IBAN and upper-cases it, so that
// two spellings of one account compare equal.
func NormalizeIBAN(s string) string {
	return strings.ToUpper(strings.Join(strings.Fields(s), ""))
}

// ShowIBAN shows an IBAN in full, in groups of four characters
// ("PT50 0002 0123 1234 5678 9123 4"), so a person can compare it with the
// invoice group by group. The approval cards and instance pages show every
// fact whose facet ends in "iban" so, and an application's approval
// summary (RegisterApprovalSummary) can show a payee the same way. A value
// that is not shaped like an IBAN is shown quoted, with any invisible or
// control character escaped, and says so.
func ShowIBAN(s string) string {
	n := NormalizeIBAN(s)
	if len(n) < 15 || len(n) > 34 || !isUpperLetters(n[:2]) || !isDigits(n[2:4]) ||
		strings.IndexFunc(n, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) >= 0 {
		return strconv.QuoteToASCII(s) + " (not shaped like an IBAN)"
	}
	var b strings.Builder
	for i := 0; i < len(n); i += 4 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n[i:min(i+4, len(n))])
	}
	return b.String()
}

func isUpperLetters(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}

func isDigits(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

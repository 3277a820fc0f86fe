package field

import (
	"regexp"
	"testing"
)

// jsSpace is the ECMAScript \s class written out, so that Go's regexp (whose
// \s is ASCII only) can run the format's regular expressions as written.
const jsSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// reference holds the format checks as the regular expressions the format
// states. The scheme is matched letter by letter because Go's (?i) folds
// more than ASCII (it would match U+017F for s).
var reference = map[string]*regexp.Regexp{
	"email":  regexp.MustCompile(`^[^` + jsSpace + `@]+@[^` + jsSpace + `@.]+(\.[^` + jsSpace + `@.]+)+$`),
	"number": regexp.MustCompile(`^[+-]?[0-9]+([.,][0-9]+)?$`),
	"phone":  regexp.MustCompile(`^\+?[0-9 ().-]+$`),
	"url":    regexp.MustCompile(`^[hH][tT][tT][pP][sS]?://[^` + jsSpace + `/?#.]+(\.[^` + jsSpace + `/?#.]+)+([/?#][^` + jsSpace + `]*)?$`),
}

var nonDigit = regexp.MustCompile(`[^0-9]`)

// referenceFormat is checkFormat written with the regular expressions.
func referenceFormat(format, s string) bool {
	if !reference[format].MatchString(s) {
		return false
	}
	if format == "phone" {
		n := len(nonDigit.ReplaceAllString(s, ""))
		return 7 <= n && n <= 15
	}
	return true
}

func TestFormatsMatchReference(t *testing.T) {
	values := []string{
		"", "a", "a@b.c", "a@b", "a@@b.c", "a b@c.d", "a\u00a0b@c.d", "a@b..c", "a@.b.c", "a@b.c.", "\xff@b.c",
		"1", "+1", "-1,5", "1.", ".1", "1.2.3", "\u0661",
		"1234567", "+1 (415) 555-0123", "+", "++1234567", "1234567890123456", "12345 67",
		"https://a.b", "HTTP://A.B", "http://a.b/", "https://a.b?q", "https://a.b#f", "https://a..b", "https://a",
		"https://a.b c", "https://a.b/\u3000", "ftp://a.b", "https:/a.b", "https://\u017f.b", "htt\u017fs://a.b",
		"https://a.b:8080/p?q#f", "https://user@a.b", "https://a.b\u200b",
	}
	for format := range reference {
		for _, v := range values {
			want := referenceFormat(format, v)
			if got := checkFormat(format, v) == ""; got != want {
				t.Errorf("%s %q: passes = %v, the regular expression says %v", format, v, got, want)
			}
		}
	}
}

func FuzzFormats(f *testing.F) {
	for _, s := range []string{"a@b.c", "+1 (415) 555-0123", "-1,5", "https://a.b/c?d#e", "HTTPS://A.B", "\u00a0", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for format := range reference {
			want := referenceFormat(format, s)
			if got := checkFormat(format, s) == ""; got != want {
				t.Fatalf("%s %q: passes = %v, the regular expression says %v", format, s, got, want)
			}
		}
	})
}

package field

import (
	"cmp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// IsSpace reports whether r is white space as the format's reference
// implementations see it: the ECMAScript WhiteSpace and LineTerminator sets
// (tab, vertical tab, form feed, space, no-break space, byte order mark, line
// feed, carriage return, U+2028, U+2029 and every space separator, Zs).
//
// It differs from [unicode.IsSpace] in two places: U+FEFF is white space here
// and U+0085 is not.
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00a0', '\ufeff', '\u2028', '\u2029':
		return true
	}
	if r < 0x80 {
		return false
	}
	return unicode.Is(unicode.Zs, r)
}

// Trim returns s without leading and trailing white space as [IsSpace]
// defines it. It is how a field's value is trimmed before every check.
func Trim(s string) string {
	start := 0
	for start < len(s) {
		r, n := utf8.DecodeRuneInString(s[start:])
		if !IsSpace(r) {
			break
		}
		start += n
	}
	end := len(s)
	for end > start {
		r, n := utf8.DecodeLastRuneInString(s[start:end])
		if !IsSpace(r) {
			break
		}
		end -= n
	}
	return s[start:end]
}

// hasSpace reports whether s contains white space.
func hasSpace(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == ' ' || '\t' <= c && c <= '\r' {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if IsSpace(r) {
			return true
		}
		i += n
	}
	return false
}

// dotted reports whether host is two or more non-empty parts separated by
// dots.
func dotted(host string) bool {
	if host == "" || host[0] == '.' || host[len(host)-1] == '.' {
		return false
	}
	dots := 0
	for i := 1; i < len(host); i++ {
		if host[i] == '.' {
			if host[i-1] == '.' {
				return false
			}
			dots++
		}
	}
	return dots > 0
}

// isEmail matches ^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$: a local part, one @, and
// a host of at least two dot-separated parts, with no white space anywhere.
func isEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || hasSpace(s) {
		return false
	}
	host := s[at+1:]
	return strings.IndexByte(host, '@') < 0 && dotted(host)
}

// isNumber matches ^[+-]?\d+([.,]\d+)?$ with ASCII digits.
func isNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := skipDigits(s, i)
	if j == i {
		return false
	}
	if j == len(s) {
		return true
	}
	if s[j] != '.' && s[j] != ',' {
		return false
	}
	k := skipDigits(s, j+1)
	return k > j+1 && k == len(s)
}

func skipDigits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// isPhone matches ^\+?[0-9 ().-]+$ and then requires 7 to 15 digits.
func isPhone(s string) bool {
	i := 0
	if i < len(s) && s[i] == '+' {
		i++
	}
	if i == len(s) {
		return false
	}
	digits := 0
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digits++
		case c == ' ' || c == '(' || c == ')' || c == '.' || c == '-':
		default:
			return false
		}
	}
	return 7 <= digits && digits <= 15
}

// isURL matches ^https?:\/\/[^\s/?#.]+(\.[^\s/?#.]+)+([/?#]\S*)?$ with the
// scheme in any case: http:// or https://, a host of at least two
// dot-separated parts, then optionally a path, query or fragment, and no
// white space anywhere.
func isURL(s string) bool {
	var rest string
	switch {
	case hasPrefixFold(s, "http://"):
		rest = s[len("http://"):]
	case hasPrefixFold(s, "https://"):
		rest = s[len("https://"):]
	default:
		return false
	}
	if hasSpace(rest) {
		return false
	}
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host = rest[:i]
	}
	return dotted(host)
}

// hasPrefixFold reports whether s begins with the ASCII prefix, ignoring
// ASCII case only.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// compareUTF16 compares a and b by their UTF-16 code units, as the format's
// reference implementations compare strings. It differs from a byte
// comparison only between characters above U+FFFF and those from U+E000 to
// U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, la := utf16Units(ra)
			ub, lb := utf16Units(rb)
			if ua != ub {
				return cmp.Compare(ua, ub)
			}
			return cmp.Compare(la, lb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Units returns the first and second UTF-16 code unit of r (second is
// 0 when r needs one unit).
func utf16Units(r rune) (rune, rune) {
	if r < 0x10000 {
		return r, 0
	}
	r -= 0x10000
	return 0xd800 + r>>10, 0xdc00 + r&0x3ff
}

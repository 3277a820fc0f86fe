package field

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Messages holds the sentences shown for problems, by message key. A key
// that is missing falls back to the English default, so an application
// replaces only the words it wants to; a nil Messages is the English
// defaults. The sentences are the application's own words: nothing in a
// stream can choose them.
//
// A sentence may hold {min} and {max} placeholders, filled by [FillTemplate].
type Messages map[string]string

// english holds the default sentences. It is never modified.
var english = map[string]string{
	KeyRequired:      "This field is required.",
	KeyChooseOption:  "Pick one of the options.",
	KeyTurnOn:        "Switch this on to go ahead.",
	KeyInvalidEmail:  "Type an email address, such as name@example.com.",
	KeyInvalidNumber: "Type a number, such as 12 or 4.5.",
	KeyInvalidPhone:  "Type a phone number of 7 to 15 digits.",
	KeyInvalidURL:    "Type a web address that begins with https://.",
	KeyTooShort:      "Type at least {min} characters.",
	KeyTooLong:       "Type no more than {max} characters.",
	KeyDateTooEarly:  "Pick {min} or a later date.",
	KeyDateTooLate:   "Pick {max} or an earlier date.",
}

// fallback is shown for a key that neither the application nor the
// defaults know.
const fallback = "Check this field."

// English returns a new copy of the default English sentences, keyed by
// message key, for an application to start its own wording from.
func English() Messages {
	m := make(Messages, len(english))
	for k, v := range english {
		m[k] = v
	}
	return m
}

// Text returns the plain-text sentence for p: the application's sentence for
// p.Key if m has one, else the English default, with p.Values filled in. It
// returns "" for a nil p (the field passes).
func (m Messages) Text(p *Problem) string {
	if p == nil {
		return ""
	}
	t, ok := m[p.Key]
	if !ok {
		t, ok = english[p.Key]
	}
	if !ok {
		t = fallback
	}
	return FillTemplate(t, p.Values)
}

// FillTemplate replaces each {name} in tmpl, where name is one or more ASCII
// letters, by the text of values[name] (see [FormatValue]). A placeholder
// whose name is not in values is kept as written. The template is read once:
// text inserted for a placeholder is never read again, so a value holding
// "{max}" is shown as "{max}".
func FillTemplate(tmpl string, values map[string]any) string {
	if len(values) == 0 || strings.IndexByte(tmpl, '{') < 0 {
		return tmpl
	}
	var b strings.Builder
	b.Grow(len(tmpl) + 16)
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			break
		}
		n := 0
		for open+1+n < len(tmpl) && isLetter(tmpl[open+1+n]) {
			n++
		}
		end := open + 1 + n
		if n == 0 || end >= len(tmpl) || tmpl[end] != '}' {
			b.WriteString(tmpl[:open+1])
			tmpl = tmpl[open+1:]
			continue
		}
		v, ok := values[tmpl[open+1:end]]
		if !ok {
			b.WriteString(tmpl[:end+1])
		} else {
			b.WriteString(tmpl[:open])
			b.WriteString(FormatValue(v))
		}
		tmpl = tmpl[end+1:]
	}
	b.WriteString(tmpl)
	return b.String()
}

func isLetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// FormatValue returns the plain text a template shows for a decoded JSON
// value: a string as it is, nil as "", true and false as words, a number as
// the format's reference implementations print it (42.5 as "42.5", 3 as
// "3", 1e21 as "1e+21"), and a list or object as compact JSON.
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return formatNumber(x)
	case float32:
		return formatNumber(float64(x))
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case uint:
		return strconv.FormatUint(uint64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return formatNumber(f)
		}
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// formatNumber prints f as ECMAScript's Number.prototype.toString does:
// plain digits for magnitudes from 1e-6 up to 1e21, exponent form otherwise,
// always the shortest digits that round-trip.
func formatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	// Go writes at least two exponent digits (1e-07); ECMAScript writes
	// none of the leading zeros (1e-7).
	i := strings.IndexByte(s, 'e')
	mant, exp := s[:i], s[i+1:]
	sign := exp[:1]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + exp
}

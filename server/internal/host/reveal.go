package host

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Hidden reports whether r is a character a reader of a web page cannot
// see, or one that changes the order in which the text around it is drawn:
// the bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E,
// U+200F, U+061C), zero-width and invisible characters (U+200B–U+200D,
// U+2060–U+2064, U+FEFF, U+180E, U+00AD, the tag characters
// U+E0000–U+E007F, the Hangul fillers and the other default-ignorable
// code points), every other format (Cf) and control (Cc) character except
// newline and tab, and the line and paragraph separators U+2028 and U+2029.
//
// Variation selectors are not hidden: they only pick a glyph's
// presentation (as in emoji) and cannot reorder or hide the text around
// them.
func Hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point)
}

// HiddenChars counts the characters of s that Reveal shows as escapes:
// those Hidden reports, and bytes that are not valid UTF-8.
func HiddenChars(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || Hidden(r) {
			n++
		}
		i += size
	}
	return n
}

// Reveal returns s as HTML text that draws every character a person could
// not otherwise see as a visible escape, so that what the person reads is
// what a program given s gets. Each character Hidden reports becomes
//
//	<span class="hidden-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>
//
// and each byte that is not valid UTF-8 becomes ⟨0xFF⟩ in such a span;
// everything else is HTML-escaped text. The result is safe in an HTML
// element's content, never in an attribute.
func Reveal(s string) template.HTML {
	var b strings.Builder
	b.Grow(len(s))
	plain := 0 // start of the text not yet written
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var label, title string
		switch {
		case r == utf8.RuneError && size == 1:
			label = fmt.Sprintf("0x%02X", s[i])
			title = label + " NOT VALID UTF-8"
		case Hidden(r):
			label = fmt.Sprintf("U+%04X", r)
			title = label + " " + runeName(r)
		default:
			i += size
			continue
		}
		b.WriteString(template.HTMLEscapeString(s[plain:i]))
		b.WriteString(`<span class="hidden-char" title="`)
		b.WriteString(template.HTMLEscapeString(title))
		b.WriteString(`">`)
		b.WriteString(template.HTMLEscapeString("⟨" + label + "⟩"))
		b.WriteString(`</span>`)
		i += size
		plain = i
	}
	b.WriteString(template.HTMLEscapeString(s[plain:]))
	return template.HTML(b.String())
}

// RevealText returns s with each character Reveal shows as an escape
// written as that escape in plain text ("⟨U+202E⟩", "⟨0xFF⟩"), for text
// that a template escapes itself, such as a screen's components.
func RevealText(s string) string {
	if HiddenChars(s) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "⟨0x%02X⟩", s[i])
		case Hidden(r):
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// HiddenChars counts the characters of the item's text that Reveal shows
// as escapes: its title, summary, lines, fields, warning and note.
func (it InboxItem) HiddenChars() int {
	n := HiddenChars(it.Title) + HiddenChars(it.Summary) + HiddenChars(it.Warn) + HiddenChars(it.Note) + HiddenChars(it.Why)
	for _, l := range it.Lines {
		n += HiddenChars(l)
	}
	for _, f := range slices.Concat(it.Fields, it.Details) {
		n += HiddenChars(f.Label) + HiddenChars(f.Value)
	}
	return n
}

// countHidden is the template function hiddenchars: the number of
// characters Reveal escapes in its arguments, each a string, a []string,
// an InboxField or a []InboxField.
func countHidden(vs ...any) (int, error) {
	n := 0
	for _, v := range vs {
		switch v := v.(type) {
		case string:
			n += HiddenChars(v)
		case []string:
			for _, s := range v {
				n += HiddenChars(s)
			}
		case InboxField:
			n += HiddenChars(v.Label) + HiddenChars(v.Value)
		case []InboxField:
			for _, f := range v {
				n += HiddenChars(f.Label) + HiddenChars(f.Value)
			}
		case InboxItem:
			n += v.HiddenChars()
		case nil:
		default:
			return 0, fmt.Errorf("hiddenchars: cannot count the characters of a %T", v)
		}
	}
	return n, nil
}

// runeName is the Unicode name of a hidden character r, or a description
// of its class when the name is not listed here.
func runeName(r rune) string {
	if n, ok := hiddenNames[r]; ok {
		return n
	}
	switch {
	case r >= 0xE0020 && r <= 0xE007E:
		return fmt.Sprintf("TAG CHARACTER %q", r-0xE0000)
	case unicode.Is(unicode.Cc, r):
		return "CONTROL CHARACTER"
	case unicode.Is(unicode.Cf, r):
		return "FORMAT CHARACTER"
	}
	return "INVISIBLE CHARACTER"
}

// hiddenNames are the Unicode names of the hidden characters most used to
// hide or reorder text.
var hiddenNames = map[rune]string{
	0x00:    "NULL",
	0x07:    "BELL",
	0x08:    "BACKSPACE",
	0x0B:    "LINE TABULATION",
	0x0C:    "FORM FEED",
	0x0D:    "CARRIAGE RETURN",
	0x1B:    "ESCAPE",
	0x7F:    "DELETE",
	0x85:    "NEXT LINE",
	0xAD:    "SOFT HYPHEN",
	0x034F:  "COMBINING GRAPHEME JOINER",
	0x061C:  "ARABIC LETTER MARK",
	0x115F:  "HANGUL CHOSEONG FILLER",
	0x1160:  "HANGUL JUNGSEONG FILLER",
	0x180E:  "MONGOLIAN VOWEL SEPARATOR",
	0x200B:  "ZERO WIDTH SPACE",
	0x200C:  "ZERO WIDTH NON-JOINER",
	0x200D:  "ZERO WIDTH JOINER",
	0x200E:  "LEFT-TO-RIGHT MARK",
	0x200F:  "RIGHT-TO-LEFT MARK",
	0x2028:  "LINE SEPARATOR",
	0x2029:  "PARAGRAPH SEPARATOR",
	0x202A:  "LEFT-TO-RIGHT EMBEDDING",
	0x202B:  "RIGHT-TO-LEFT EMBEDDING",
	0x202C:  "POP DIRECTIONAL FORMATTING",
	0x202D:  "LEFT-TO-RIGHT OVERRIDE",
	0x202E:  "RIGHT-TO-LEFT OVERRIDE",
	0x2060:  "WORD JOINER",
	0x2061:  "FUNCTION APPLICATION",
	0x2062:  "INVISIBLE TIMES",
	0x2063:  "INVISIBLE SEPARATOR",
	0x2064:  "INVISIBLE PLUS",
	0x2066:  "LEFT-TO-RIGHT ISOLATE",
	0x2067:  "RIGHT-TO-LEFT ISOLATE",
	0x2068:  "FIRST STRONG ISOLATE",
	0x2069:  "POP DIRECTIONAL ISOLATE",
	0x3164:  "HANGUL FILLER",
	0xFEFF:  "ZERO WIDTH NO-BREAK SPACE",
	0xFFA0:  "HALFWIDTH HANGUL FILLER",
	0xE0001: "LANGUAGE TAG",
	0xE007F: "CANCEL TAG",
}

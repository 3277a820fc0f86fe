package confirm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/assent-run/assent/screen/field"
)

// Confirmation is the sentence a person confirms before a tool runs, in the
// application's own words: either a template ([Template]) or a function of
// the checked params ([Func]). The zero Confirmation means the tool runs
// without asking.
type Confirmation struct {
	template string
	fn       func(ctx context.Context, params map[string]any) (string, error)
}

// Template returns a confirmation written from tmpl. Each {name} in tmpl,
// where name is a params key (an ASCII letter or underscore, then letters,
// digits and underscores), is replaced once by the text of that param (see
// [field.FormatValue]: a string as it is, null as "", 42.5 as "42.5"). The
// inserted text is never read again, so a param holding "{other}" shows as
// "{other}". Braces that don't form a placeholder are kept as written. A
// value holding right-to-left letters or invisible direction controls (such
// as U+202E) loses the controls and is wrapped in U+2068 and U+2069, so it
// can't reorder the rest of the sentence.
//
// A template that names a param the press did not send fails with
// confirmation_failed and the tool does not run: a sentence that leaves out
// what the person is asked to approve is the kind of slip a confirmation
// exists to prevent. Make such params required in the tool's schema.
func Template(tmpl string) Confirmation {
	return Confirmation{template: tmpl}
}

// Func returns a confirmation whose sentence fn writes from the params after
// they passed the tool's schema, for example to show an amount as currency.
// If fn returns an error, panics or returns a blank sentence, the press fails
// with confirmation_failed and the tool does not run. A nil fn is the zero
// Confirmation.
func Func(fn func(ctx context.Context, params map[string]any) (string, error)) Confirmation {
	return Confirmation{fn: fn}
}

// IsZero reports whether c asks for no confirmation.
func (c Confirmation) IsZero() bool {
	return c.template == "" && c.fn == nil
}

// String describes c for logs: the template, "func" or "none".
func (c Confirmation) String() string {
	switch {
	case c.fn != nil:
		return "func"
	case c.template != "":
		return fmt.Sprintf("template %q", c.template)
	}
	return "none"
}

// placeholder is one {name} of a template: the byte offsets of its braces.
type placeholder struct {
	start, end int // tmpl[start:end] is "{name}"
	name       string
}

// placeholders returns the {name} placeholders of tmpl in order.
func placeholders(tmpl string) []placeholder {
	var out []placeholder
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '{' {
			continue
		}
		j := i + 1
		for j < len(tmpl) && isIdent(tmpl[j], j == i+1) {
			j++
		}
		if j > i+1 && j < len(tmpl) && tmpl[j] == '}' {
			out = append(out, placeholder{start: i, end: j + 1, name: tmpl[i+1 : j]})
			i = j
		}
	}
	return out
}

func isIdent(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

// fill writes the sentence of tmpl for params.
func fill(tmpl string, ph []placeholder, params map[string]any, display map[string]string) (string, error) {
	var b strings.Builder
	last := 0
	for _, p := range ph {
		v, ok := params[p.name]
		if !ok {
			return "", fmt.Errorf("the template names param %q, which the press did not send; make it required in the tool's schema", p.name)
		}
		b.WriteString(tmpl[last:p.start])
		text, shown := display[p.name]
		if !shown {
			text = field.FormatValue(v)
		}
		b.WriteString(isolate(text))
		last = p.end
	}
	b.WriteString(tmpl[last:])
	return b.String(), nil
}

// isolate returns s unchanged unless it could change the direction of the
// text around it: when s holds a right-to-left letter or a bidirectional
// formatting character, isolate removes the formatting characters (they are
// invisible) and wraps the rest in FIRST STRONG ISOLATE and POP DIRECTIONAL
// ISOLATE. So a value can't reorder the rest of the sentence: without this,
// a note holding RIGHT-TO-LEFT OVERRIDE placed before an amount would show
// 1000 as 0001.
func isolate(s string) string {
	needs := false
	for _, r := range s {
		if isBidiControl(r) || isRightToLeft(r) {
			needs = true
			break
		}
	}
	if !needs {
		return s
	}
	return "\u2068" + strings.Map(func(r rune) rune {
		if isBidiControl(r) {
			return -1
		}
		return r
	}, s) + "\u2069"
}

// isBidiControl reports whether r is an explicit bidirectional formatting
// character or mark: LRM, RLM, ALM, an embedding, override or isolate, or
// their terminators.
func isBidiControl(r rune) bool {
	return r == '\u200e' || r == '\u200f' || r == '\u061c' ||
		'\u202a' <= r && r <= '\u202e' || '\u2066' <= r && r <= '\u2069'
}

// rightToLeft holds the scripts written right to left.
var rightToLeft = []*unicode.RangeTable{
	unicode.Hebrew, unicode.Arabic, unicode.Syriac, unicode.Thaana, unicode.Nko,
	unicode.Samaritan, unicode.Mandaic, unicode.Adlam, unicode.Hanifi_Rohingya,
	unicode.Yezidi, unicode.Mende_Kikakui, unicode.Imperial_Aramaic,
	unicode.Phoenician, unicode.Kharoshthi, unicode.Avestan, unicode.Old_South_Arabian,
}

func isRightToLeft(r rune) bool {
	return r >= 0x0590 && unicode.IsOneOf(rightToLeft, r)
}

// Sentence writes the confirmation's sentence for params, which should have
// passed the tool's schema. It returns "" and no error for the zero
// Confirmation. Registry.Prepare calls it; it is exported so an application
// can preview its sentences.
func (c Confirmation) Sentence(ctx context.Context, params map[string]any) (s string, err error) {
	switch {
	case c.fn != nil:
		defer func() {
			if r := recover(); r != nil {
				s, err = "", fmt.Errorf("the confirmation function panicked: %v", r)
			}
		}()
		s, err = c.fn(ctx, params)
		if err != nil {
			return "", err
		}
	case c.template != "":
		s, err = fill(c.template, placeholders(c.template), params, displayFrom(ctx))
		if err != nil {
			return "", err
		}
	default:
		return "", nil
	}
	if blank(s) {
		return "", errors.New("the confirmation sentence is blank; a person can't confirm nothing")
	}
	return s, nil
}

// blank reports whether s shows nothing: only white space and invisible
// format characters.
func blank(s string) bool {
	for _, r := range s {
		if !field.IsSpace(r) && !unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

type displayKey struct{}

// WithDisplay returns a copy of ctx carrying the text a screen shows for
// some params. A template fills {name} with display[name] when it is
// present instead of the param's plain text, so the sentence shows an
// amount the way the screen does ("$42.50", not "42.5"). The text is
// inserted once, as plain text, like any value.
func WithDisplay(ctx context.Context, display map[string]string) context.Context {
	if len(display) == 0 {
		return ctx
	}
	return context.WithValue(ctx, displayKey{}, display)
}

func displayFrom(ctx context.Context) map[string]string {
	if ctx == nil {
		return nil
	}
	d, _ := ctx.Value(displayKey{}).(map[string]string)
	return d
}

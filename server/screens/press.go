package screens

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/field"
	"github.com/assent-run/assent/screen/render"
)

// What the runtime's dialog asks, besides the application's sentence.

// wordScreenChanged is what a person sees when a press waiting for them no
// longer matches the screen: the tool would get values the page does not
// show.
const wordScreenChanged = "The screen changed since this was asked, so nothing was sent. Check it and press the button again."

// currencyCode is the shape of an ISO 4217 currency code.
var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// checkCurrency refuses a tool's Currency that names no param of a
// plain shape or no ISO 4217 code.
func checkCurrency(t Tool) error {
	for name, code := range t.Currency {
		if name == "" || !currencyCode.MatchString(code) {
			return &confirm.Error{Code: confirm.CodeInvalidTool, Tool: t.Name,
				Message: fmt.Sprintf("currency of param %q is %q; give an ISO 4217 code such as \"USD\"", name, code)}
		}
	}
	return nil
}

// shownParams returns the text the confirmation sentence shows for
// each number param that is an amount of money, so the sentence reads
// "$42.50", not "42.5". Only the application says a param is money, and
// in which currency (Tool.Currency): the tool gets a bare number, so the
// unit is the tool's to say. A screen's stream never decides it, whatever
// currency the screen shows the amount in; a param the tool names no
// currency for shows as the number it is.
func (s *Part) shownParams(toolName string, params map[string]any) map[string]string {
	s.scrMu.Lock()
	declared := s.toolCurrency[toolName]
	s.scrMu.Unlock()
	var out map[string]string
	for k, v := range params {
		f, ok := v.(float64)
		if !ok {
			continue
		}
		code, ok := declared[k]
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = moneyText(f, code)
	}
	return out
}

// moneyText writes f as an amount of the currency code, as screens show
// money ("$1,250.00"), unless that would round it: an amount with more
// than two decimals shows every digit ("42.505 USD"), so the sentence
// never reads a value the tool does not get.
func moneyText(f float64, code string) string {
	plain := strconv.FormatFloat(f, 'f', -1, 64)
	if _, frac, ok := strings.Cut(plain, "."); ok && len(frac) > 2 {
		return plain + " " + code
	}
	return render.Money(f, code)
}

// namedParams returns the params the confirmation's template names as
// {name}; none for a confirmation a function writes, which may show any
// of them in any form.
func namedParams(c confirm.Confirmation) map[string]bool {
	desc, ok := strings.CutPrefix(c.String(), "template ")
	if !ok {
		return nil
	}
	tmpl, err := strconv.Unquote(desc)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for rest := tmpl; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return out
		}
		rest = rest[i+1:]
		j := 0
		for j < len(rest) && isIdentByte(rest[j], j == 0) {
			j++
		}
		if j > 0 && j < len(rest) && rest[j] == '}' {
			out[rest[:j]] = true
		}
	}
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

// pressQuestionLocked is what the runtime's dialog asks for the press pp:
// the application's sentence, then every param the sentence does not name
// and no field of the page shows, with the value the tool gets (a value
// the screen only shows as text, or does not show at all). So nothing is
// sent that the person was not shown: the fields show the rest, and a
// press whose params no longer match them does not run (see
// pressStaleLocked). Secret params are never shown. sc.mu is held.
func (s *Part) pressQuestionLocked(sc *liveScreen, pp *pendingPress) string {
	t, ok := s.screenTools.Lookup(pp.tool)
	if !ok {
		return pp.sentence
	}
	skip := namedParams(t.Confirm)
	if skip == nil {
		skip = map[string]bool{}
	}
	for _, name := range t.Secret {
		skip[name] = true
	}
	if m := pressableLocked(sc, pp.button); m != nil && m.Tool == pp.tool {
		shown := shownFieldsLocked(sc, s.secretKeysLocked(sc))
		for k, raw := range m.Params {
			if ref, ok := raw.(screen.StateRef); ok && len(shown[string(ref)]) > 0 {
				skip[k] = true
			}
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(pp.params)) {
		if !skip[k] {
			parts = append(parts, k+" = "+paramText(pp.params[k]))
		}
	}
	if len(parts) == 0 {
		return pp.sentence
	}
	return pp.sentence + " Also sent: " + strings.Join(parts, "; ") + "."
}

// paramText writes a param's value as the dialog shows it: text in quotes
// with invisible and control characters escaped, so an empty or blank
// value shows as one; anything else as JSON. A value holding right-to-left
// letters is isolated, so it can't reorder the rest of the dialog.
func paramText(v any) string {
	var out string
	if str, ok := v.(string); ok {
		out = strconv.Quote(str)
	} else {
		b, err := json.Marshal(v)
		if err != nil {
			return field.FormatValue(v)
		}
		out = string(b)
	}
	for _, r := range out {
		if r >= 0x0590 && unicode.In(r, unicode.Hebrew, unicode.Arabic, unicode.Syriac, unicode.Thaana, unicode.Nko,
			unicode.Samaritan, unicode.Mandaic, unicode.Adlam, unicode.Hanifi_Rohingya, unicode.Yezidi) {
			return "\u2068" + out + "\u2069"
		}
	}
	return out
}

// pressParamsLocked returns the params a press of the governed Button m
// sends now: its literals, and the screen's values of the $keys it reads.
// sc.mu is held.
func pressParamsLocked(sc *liveScreen, m *screen.Mutation) map[string]any {
	params := make(map[string]any, len(m.Params))
	for k, v := range m.Params {
		if ref, ok := v.(screen.StateRef); ok {
			v, _ = sc.doc.State(string(ref))
		}
		params[k] = v
	}
	return params
}

// pressStaleLocked reports whether the press pp no longer matches the
// screen: its button is gone or calls another tool, or a param it would
// send is not what the button sends now (an entry changed, a press filed
// later changed a field, an update changed a value). The person is asked
// about the screen they see, so such a press never runs. Secret params,
// which the press does not keep, are left out. sc.mu is held.
func pressStaleLocked(sc *liveScreen, pp *pendingPress) bool {
	m := pressableLocked(sc, pp.button)
	if m == nil || m.Tool != pp.tool {
		return true
	}
	now := pressParamsLocked(sc, m)
	for k, v := range pp.params {
		if cur, ok := now[k]; !ok || !sameJSON(cur, v) {
			return true
		}
	}
	return false
}

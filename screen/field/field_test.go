package field

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckOrder(t *testing.T) {
	tests := []struct {
		name      string
		component string
		props     map[string]any
		value     any
		want      string // message key, "" for nil
	}{
		{"required wins over format", "Input", map[string]any{"required": true, "format": "url", "minLength": 3.0}, " ", KeyRequired},
		{"format wins over minLength", "Input", map[string]any{"format": "phone", "minLength": 30.0}, "abc", KeyInvalidPhone},
		{"minLength wins over maxLength", "Input", map[string]any{"minLength": 5.0, "maxLength": 1.0}, "abc", KeyTooShort},
		{"maxLength after a passing format", "Input", map[string]any{"format": "number", "maxLength": 2.0}, "123", KeyTooLong},
		{"everything passes", "Input", map[string]any{"required": true, "format": "email", "minLength": 5.0, "maxLength": 50.0}, "a@b.co", ""},
		{"empty optional skips all", "Input", map[string]any{"format": "email", "minLength": 5.0}, "\u3000", ""},
		{"required date before min", "DateInput", map[string]any{"required": true, "min": "2026-01-01"}, "", KeyRequired},
		{"date after max", "DateInput", map[string]any{"max": "2026-01-01"}, "2026-01-02", KeyDateTooLate},
		{"int props from Go callers", "Input", map[string]any{"maxLength": 2}, "abc", KeyTooLong},
		{"json.Number props", "Input", map[string]any{"minLength": json.Number("4")}, "abc", KeyTooShort},
		{"[]string options", "Select", map[string]any{"required": true, "options": []string{"a", "b"}}, "b", ""},
		{"nil props", "Input", nil, nil, ""},
		{"required must be the bool true", "Input", map[string]any{"required": "true"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.component, tt.props, tt.value)
			key := ""
			if got != nil {
				key = got.Key
			}
			if key != tt.want {
				t.Errorf("Check(%q, %v, %q) = %+v, want key %q", tt.component, tt.props, tt.value, got, tt.want)
			}
		})
	}
}

func TestCheckValuesKeepPropType(t *testing.T) {
	// The values hold the constraint exactly as the props gave it, so a
	// caller's JSON round-trips unchanged.
	p := Check("Input", map[string]any{"minLength": 3}, "ab")
	if v, ok := p.Values["min"].(int); !ok || v != 3 {
		t.Fatalf("values = %#v, want min: int 3", p.Values)
	}
	b, _ := json.Marshal(p)
	if string(b) != `{"message":"tooShort","values":{"min":3}}` {
		t.Errorf("JSON = %s", b)
	}
	b, _ = json.Marshal(Check("Switch", map[string]any{"required": true}, nil))
	if string(b) != `{"message":"turnOn"}` {
		t.Errorf("JSON = %s", b)
	}
}

func TestCheckAppField(t *testing.T) {
	req := map[string]any{"required": true}
	tests := []struct {
		props map[string]any
		value any
		fails bool
	}{
		{req, nil, true},
		{req, false, true},
		{req, " \n", true},
		{req, "x", false},
		{req, true, false},
		{req, 0.0, false},
		{req, []any{}, false},
		{map[string]any{}, nil, false},
		{nil, "", false},
	}
	for _, tt := range tests {
		got := CheckAppField(tt.props, tt.value)
		if (got != nil) != tt.fails {
			t.Errorf("CheckAppField(%v, %#v) = %+v, want fails=%v", tt.props, tt.value, got, tt.fails)
		}
		if got != nil && got.Key != KeyRequired {
			t.Errorf("key = %q, want %q", got.Key, KeyRequired)
		}
	}
}

func TestIsField(t *testing.T) {
	for _, c := range []string{"Input", "DateInput", "Select", "Switch"} {
		if !IsField(c) {
			t.Errorf("IsField(%q) = false", c)
		}
	}
	for _, c := range []string{"", "input", "Text", "Button", "Input "} {
		if IsField(c) {
			t.Errorf("IsField(%q) = true", c)
		}
	}
}

func TestIsSpaceMatchesECMAScript(t *testing.T) {
	// The ECMAScript white space set is unicode.IsSpace with U+FEFF added
	// and U+0085 removed.
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := unicode.IsSpace(r)
		switch r {
		case '\ufeff':
			want = true
		case '\u0085':
			want = false
		}
		if got := IsSpace(r); got != want {
			t.Fatalf("IsSpace(%U) = %v, want %v", r, got, want)
		}
	}
}

func TestTrim(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  ", ""},
		{"\ufeff a \u00a0", "a"},
		{"\u0085a\u0085", "\u0085a\u0085"},
		{"a b", "a b"},
		{"\xff ", "\xff"},
		{"\u2000\u200a\u202f\u205f\u3000x", "x"},
	}
	for _, tt := range tests {
		if got := Trim(tt.in); got != tt.want {
			t.Errorf("Trim(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"a", "", 1},
		{"", "a", -1},
		{"2026-10-14", "2026-10-14", 0},
		{"2026-10-13", "2026-10-14", -1},
		{"2026-10-14", "2026-10-1", 1},
		// U+1F600 is D83D DE00 in UTF-16, below U+FFFF; in UTF-8 it sorts after.
		{"\U0001F600", "\uffff", -1},
		{"\uffff", "\U0001F600", 1},
		{"\U0001F600", "\U0001F601", -1},
		{"\U00010000", "\U0001FFFF", -1},
	}
	for _, tt := range tests {
		if got := compareUTF16(tt.a, tt.b); got != tt.want {
			t.Errorf("compareUTF16(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFillTemplate(t *testing.T) {
	tests := []struct {
		tmpl   string
		values map[string]any
		want   string
	}{
		{"Use at least {min} characters.", map[string]any{"min": 3.0}, "Use at least 3 characters."},
		{"{min}-{max}", map[string]any{"min": 1, "max": 2.5}, "1-2.5"},
		{"{min} {min}", map[string]any{"min": "x"}, "x x"},
		{"keep {unknown}", map[string]any{"min": 1}, "keep {unknown}"},
		{"no values {min}", nil, "no values {min}"},
		{"not re-read: {min}", map[string]any{"min": "{max}", "max": 9}, "not re-read: {max}"},
		{"{{min}}", map[string]any{"min": 1}, "{1}"},
		{"{min", map[string]any{"min": 1}, "{min"},
		{"{}", map[string]any{"": 1}, "{}"},
		{"{m1n}", map[string]any{"m1n": 1}, "{m1n}"},
		{"{ min }", map[string]any{"min": 1}, "{ min }"},
		{"%d %s {min}", map[string]any{"min": "%s"}, "%d %s %s"},
		{"trailing {", map[string]any{"min": 1}, "trailing {"},
		{"{min}", map[string]any{"min": nil}, ""},
		{"<b>{min}</b>", map[string]any{"min": "<i>"}, "<b><i></b>"},
	}
	for _, tt := range tests {
		if got := FillTemplate(tt.tmpl, tt.values); got != tt.want {
			t.Errorf("FillTemplate(%q, %v) = %q, want %q", tt.tmpl, tt.values, got, tt.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	a, b := 0.1, 0.2
	point3 := a + b
	tests := []struct {
		v    any
		want string
	}{
		{nil, ""},
		{"text", "text"},
		{true, "true"},
		{false, "false"},
		{42.5, "42.5"},
		{42.0, "42"},
		{math.Copysign(0, -1), "0"},
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{1.5e-7, "1.5e-7"},
		{1e-7, "1e-7"},
		{1e-6, "0.000001"},
		{-2e-10, "-2e-10"},
		{123456789012345680000.0, "123456789012345680000"},
		{point3, "0.30000000000000004"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
		{math.NaN(), "NaN"},
		{7, "7"},
		{int64(-7), "-7"},
		{uint(7), "7"},
		{json.Number("12.50"), "12.5"},
		{json.Number("x"), "x"},
		{[]any{1.0, "a"}, `[1,"a"]`},
		{map[string]any{"b": 1.0, "a": true}, `{"a":true,"b":1}`},
		{func() {}, ""},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.v); got != tt.want {
			t.Errorf("FormatValue(%#v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestMessages(t *testing.T) {
	tooShort := &Problem{Key: KeyTooShort, Values: map[string]any{"min": 3.0}}
	tests := []struct {
		name string
		m    Messages
		p    *Problem
		want string
	}{
		{"nil problem", nil, nil, ""},
		{"default", nil, tooShort, "Type at least 3 characters."},
		{"replaced", Messages{KeyTooShort: "Au moins {min} caractères."}, tooShort, "Au moins 3 caractères."},
		{"other keys keep defaults", Messages{KeyTooLong: "x"}, tooShort, "Type at least 3 characters."},
		{"replacement may drop placeholders", Messages{KeyRequired: "Obligatoire"}, &Problem{Key: KeyRequired}, "Obligatoire"},
		{"unknown key", nil, &Problem{Key: "nope"}, fallback},
		{"app-defined key", Messages{"nope": "Custom"}, &Problem{Key: "nope"}, "Custom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Text(tt.p); got != tt.want {
				t.Errorf("Text = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEnglishCoversEveryKey(t *testing.T) {
	keys := []string{KeyRequired, KeyChooseOption, KeyTurnOn, KeyInvalidEmail, KeyInvalidNumber,
		KeyInvalidPhone, KeyInvalidURL, KeyTooShort, KeyTooLong, KeyDateTooEarly, KeyDateTooLate}
	en := English()
	if len(en) != len(keys) {
		t.Errorf("English has %d sentences, want %d", len(en), len(keys))
	}
	for _, k := range keys {
		s := en[k]
		if s == "" || !strings.HasSuffix(s, ".") {
			t.Errorf("English()[%q] = %q, want a sentence", k, s)
		}
	}
	for _, k := range []string{KeyTooShort, KeyDateTooEarly} {
		if !strings.Contains(en[k], "{min}") {
			t.Errorf("%q lacks {min}", k)
		}
	}
	for _, k := range []string{KeyTooLong, KeyDateTooLate} {
		if !strings.Contains(en[k], "{max}") {
			t.Errorf("%q lacks {max}", k)
		}
	}
	// English returns a copy: changing it changes nothing else.
	en[KeyRequired] = "changed"
	if English()[KeyRequired] == "changed" || Messages(nil).Text(&Problem{Key: KeyRequired}) == "changed" {
		t.Error("English shares its map")
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"", " ", "a@b.c", "+1 (415) 555-0123", "https://a.b/c", "-1,5", "2026-10-14", "\xff\xfe", "\ufeff\u00a0", "\U0001F600"} {
		f.Add("Input", `{"format":"email","minLength":3,"maxLength":5,"required":true}`, s)
		f.Add("Input", `{"format":"url"}`, s)
		f.Add("Input", `{"format":"phone","minLength":1e308}`, s)
		f.Add("DateInput", `{"min":"2026-01-01","max":"2026-12-31","required":true}`, s)
		f.Add("Select", `{"options":["a",1,null],"required":true}`, s)
		f.Add("Switch", `{"required":true}`, s)
	}
	f.Add("Input", `{"minLength":"x","maxLength":null,"format":[1]}`, "x")
	f.Add("Select", `{"options":{"a":1},"required":true}`, "a")
	f.Fuzz(func(t *testing.T, component, propsJSON, value string) {
		var props map[string]any
		_ = json.Unmarshal([]byte(propsJSON), &props)
		for _, v := range []any{value, nil, true, 1.5, []any{value}} {
			p := Check(component, props, v)
			if p == nil {
				continue
			}
			if p.Key == "" {
				t.Fatalf("empty key from Check(%q, %v, %#v)", component, props, v)
			}
			if text := Messages(nil).Text(p); text == "" || !utf8.ValidString(text) && utf8.ValidString(value) {
				t.Fatalf("bad message %q for %+v", text, p)
			}
		}
		_ = CheckAppField(props, value)
		_ = FillTemplate(value, map[string]any{"min": value, "max": 1.0})
	})
}

// TestLengthBounds checks the byte-length shortcuts of the length checks
// against counting code points, for strings of 1- to 4-byte characters.
func TestLengthBounds(t *testing.T) {
	pieces := []string{"a", "é", "€", "\U0001F600"}
	var values []string
	var build func(prefix string, depth int)
	build = func(prefix string, depth int) {
		values = append(values, prefix)
		if depth == 0 {
			return
		}
		for _, p := range pieces {
			build(prefix+p, depth-1)
		}
	}
	build("", 5)
	for _, v := range values {
		if v == "" {
			continue
		}
		n := utf8.RuneCountInString(v)
		for bound := 1; bound <= 21; bound++ {
			b := float64(bound)
			gotMin := Check("Input", map[string]any{"minLength": b}, v)
			if (gotMin != nil) != (n < bound) {
				t.Fatalf("minLength %d, %q (%d points): %+v", bound, v, n, gotMin)
			}
			gotMax := Check("Input", map[string]any{"maxLength": b}, v)
			if (gotMax != nil) != (n > bound) {
				t.Fatalf("maxLength %d, %q (%d points): %+v", bound, v, n, gotMax)
			}
		}
	}
}

func TestCheckLeavesPropsAlone(t *testing.T) {
	props := map[string]any{"required": true, "format": "email", "minLength": 10.0, "options": []any{"a"}}
	before, _ := json.Marshal(props)
	p := Check("Input", props, "a@b.co")
	p.Values["min"] = 99.0 // a caller changing a problem's values changes nothing in props
	Check("Select", props, "b")
	after, _ := json.Marshal(props)
	if string(before) != string(after) {
		t.Errorf("props changed: %s → %s", before, after)
	}
}

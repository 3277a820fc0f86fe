package field

import "testing"

func BenchmarkCheck(b *testing.B) {
	cases := []struct {
		name      string
		component string
		props     map[string]any
		value     any
	}{
		{"InputNoConstraints", "Input", map[string]any{}, "hello"},
		{"InputRequiredPass", "Input", map[string]any{"required": true}, "  Ada Lovelace  "},
		{"InputEmailPass", "Input", map[string]any{"required": true, "format": "email", "maxLength": 254.0}, "ada.lovelace@example.co.uk"},
		{"InputEmailFail", "Input", map[string]any{"format": "email"}, "ada@localhost"},
		{"InputURLPass", "Input", map[string]any{"format": "url"}, "https://shop.example.com/cart?item=42#top"},
		{"InputPhonePass", "Input", map[string]any{"format": "phone"}, "+1 (415) 555-0123"},
		{"InputTooLong", "Input", map[string]any{"maxLength": 10.0}, "a value that is much too long"},
		{"InputLong2000", "Input", map[string]any{"minLength": 1.0, "maxLength": 2000.0}, string(make([]byte, 0)) + longText},
		{"DateInputPass", "DateInput", map[string]any{"min": "2026-01-01", "max": "2026-12-31"}, "2026-06-15"},
		{"SelectPass", "Select", map[string]any{"required": true, "options": []any{"S", "M", "L", "XL"}}, "XL"},
		{"SwitchFail", "Switch", map[string]any{"required": true}, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Check(c.component, c.props, c.value)
			}
		})
	}
}

var longText = func() string {
	b := make([]byte, 2000)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}()

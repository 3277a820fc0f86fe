package field_test

import (
	"fmt"

	"github.com/assent-run/assent/screen/field"
)

func ExampleCheck() {
	props := map[string]any{"required": true, "format": "email"}
	for _, v := range []any{"", "ada@localhost", " ada@example.com "} {
		p := field.Check("Input", props, v)
		fmt.Printf("%q: %v\n", v, p)
	}
	// Output:
	// "": &{required map[]}
	// "ada@localhost": &{invalidEmail map[]}
	// " ada@example.com ": <nil>
}

func ExampleMessages_Text() {
	p := field.Check("Input", map[string]any{"minLength": 8.0}, "secret")
	var english field.Messages
	french := field.Messages{field.KeyTooShort: "Saisissez au moins {min} caractères."}
	fmt.Println(english.Text(p))
	fmt.Println(french.Text(p))
	// Output:
	// Type at least 8 characters.
	// Saisissez au moins 8 caractères.
}

func ExampleFillTemplate() {
	// A value is inserted once and never read as a placeholder itself.
	fmt.Println(field.FillTemplate("Between {min} and {max}.", map[string]any{"min": "{max}", "max": 10.0}))
	// Output:
	// Between {max} and 10.
}

package jcs_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/assent-run/assent/flow/jcs"
)

func TestTransform(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"whitespace", " { \"b\" : 1 ,\n\"a\":[ true,false , null ] } ", `{"a":[true,false,null],"b":1}`},
		{"nested sort", `{"z":{"y":1,"x":2},"a":{}}`, `{"a":{},"z":{"x":2,"y":1}}`},
		{"utf16 order", `{"\ufb33":1,"\ud83d\ude00":2,"a":3}`, "{\"a\":3,\"\U0001F600\":2,\"\ufb33\":1}"},
		{"escapes", `"\u0041\u000f\n\t\"\\\/\u00e9\u2028"`, "\"A\\u000f\\n\\t\\\"\\\\/\u00e9\u2028\""},
		{"control short forms", `"\b\f\r\u0000\u001f"`, `"\b\f\r\u0000\u001f"`},
		{"integers", `[0,-0,1,-1,9007199254740991,100]`, `[0,0,1,-1,9007199254740991,100]`},
		{"exponents", `[1e21,1e-7,1.5e300,0.000001,123.456e2]`, `[1e+21,1e-7,1.5e+300,0.000001,12345.6]`},
		{"fraction", `[1.0,0.1,4.50]`, `[1,0.1,4.5]`},
		{"empty", `[{},[],""]`, `[{},[],""]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jcs.Transform([]byte(tt.in))
			if err != nil {
				t.Fatalf("Transform: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Transform(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestTransformRejects(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1,"a":2}`, `[1] [2]`, `[1] x`, "\"\xff\"", `{"a":}`, `01`, `[1,]`, `NaN`,
	} {
		if got, err := jcs.Transform([]byte(in)); err == nil {
			t.Errorf("Transform(%q) = %s, want an error", in, got)
		}
	}
}

func TestAppendInt(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0"}, {-7, "-7"}, {1 << 53, "9007199254740992"}, {math.MaxInt64, "9223372036854775807"[:0] + "9223372036854776000"},
	}
	for _, tt := range tests {
		if got := string(jcs.AppendInt(nil, tt.n)); got != tt.want {
			t.Errorf("AppendInt(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func TestAppendStringInvalidUTF8(t *testing.T) {
	got := string(jcs.AppendString(nil, "a\xffb"))
	if got != "\"a\uFFFDb\"" {
		t.Errorf("got %q", got)
	}
}

func FuzzTransform(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1e21,"\u0000"]`, `{"b":[],"a":{"c":null}}`, `"x"`, `1.5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := jcs.Transform(in)
		if err != nil {
			return
		}
		if !utf8.Valid(out) {
			t.Fatalf("output is not UTF-8: %q", out)
		}
		again, err := jcs.Transform(out)
		if err != nil {
			t.Fatalf("canonical output does not parse: %v\n%s", err, out)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("not idempotent:\n%s\n%s", out, again)
		}
	})
}

func ExampleTransform() {
	out, err := jcs.Transform([]byte(`{ "b": [3, 1.50], "a": "\u00e9" }`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"a":"é","b":[3,1.5]}
}

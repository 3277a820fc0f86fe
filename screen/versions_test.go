package screen

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for malformed
	}{
		{"0.8", "0.8"},
		{"1.0", "1.0"},
		{"0.5", "0.5"},
		{"0.6", "0.5"},
		{"0.7", "0.5"},
		{"00.06", "0.5"},
		{"0.60", "0.60"},
		{"1.6", "1.6"},
		{"007.010", "7.10"},
		{"0.0", "0.0"},
		{"123456789012345678901234567890.0", "123456789012345678901234567890.0"},
		{"", ""},
		{".", ""},
		{"0.", ""},
		{".8", ""},
		{"0", ""},
		{"8", ""},
		{"0.8.1", ""},
		{"+0.8", ""},
		{"-0.8", ""},
		{" 0.8", ""},
		{"0.8 ", ""},
		{"0,8", ""},
		{"v0.8", ""},
		{"0.8beta", ""},
		{"0x1.0", ""},
		{"\u0660.\u0668", ""}, // Arabic-Indic digits
		{"\uff10.\uff18", ""}, // full-width digits
		{"1e1.0", ""},
	}
	for _, tt := range tests {
		f, err := ParseFormat(tt.in)
		if tt.want == "" {
			if !errors.Is(err, ErrMalformedFormat) {
				t.Errorf("ParseFormat(%q) = %v, %v; want ErrMalformedFormat", tt.in, f, err)
			}
			continue
		}
		if err != nil || f.String() != tt.want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %s", tt.in, f, err, tt.want)
		}
	}
}

func TestParseFormatErrorMessage(t *testing.T) {
	_, err := ParseFormat("0.8.1")
	if err == nil || !strings.Contains(err.Error(), `"0.8.1"`) || !strings.Contains(err.Error(), "MAJOR.MINOR") {
		t.Errorf("error %v should quote the input and say what to write", err)
	}
}

func TestCompareFormats(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0.8", "0.8", 0},
		{"0.5", "0.8", -1},
		{"0.8", "0.5", 1},
		{"0.9", "0.8", 1},
		{"0.10", "0.9", 1}, // numbers, not decimals
		{"0.999", "0.8", 1},
		{"1.0", "0.999", 1},
		{"0.6", "0.5", 0},
		{"0.7", "0.5", 0},
		{"0.6", "0.7", 0},
		{"0.7", "0.8", -1},
		{"0.6", "0.4", 1},
		{"1.6", "1.5", 1}, // only 0.6 and 0.7 are substituted
		{"0.08", "0.8", 0},
		{"10.0", "9.99", 1},
		{"123456789012345678901234567890.0", "123456789012345678901234567889.9", 1},
		{"99999999999999999999.0", "100000000000000000000.0", -1},
	}
	for _, tt := range tests {
		got, err := CompareFormats(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("CompareFormats(%q, %q) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
		if back, _ := CompareFormats(tt.b, tt.a); back != -tt.want {
			t.Errorf("CompareFormats(%q, %q) = %d, want %d", tt.b, tt.a, back, -tt.want)
		}
	}
	for _, pair := range [][2]string{{"0.8", "x"}, {"x", "0.8"}, {"", ""}} {
		if _, err := CompareFormats(pair[0], pair[1]); !errors.Is(err, ErrMalformedFormat) {
			t.Errorf("CompareFormats(%q, %q) error = %v, want ErrMalformedFormat", pair[0], pair[1], err)
		}
	}
}

func TestCanRead(t *testing.T) {
	tests := []struct {
		requested, written string
		want               bool
	}{
		// A 0.8 server serves clients asking for 0.8 or newer and refuses older ones.
		{"0.8", "0.8", true},
		{"0.9", "0.8", true},
		{"1.0", "0.8", true},
		{"0.5", "0.8", false},
		{"0.6", "0.8", false},
		{"0.7", "0.8", false},
		// 0.6 and 0.7 name format 0.5, so a server writing 0.5 serves them.
		{"0.6", "0.5", true},
		{"0.7", "0.5", true},
		{"0.5", "0.7", true},
		{"0.5", "0.4", true},
		// Malformed versions are never readable.
		{"", "0.8", false},
		{"0.8 ", "0.8", false},
		{"latest", "0.8", false},
		{"0.8", "", false},
	}
	for _, tt := range tests {
		if got := CanRead(tt.requested, tt.written); got != tt.want {
			t.Errorf("CanRead(%q, %q) = %v, want %v", tt.requested, tt.written, got, tt.want)
		}
	}
}

func TestFormatConstants(t *testing.T) {
	if _, err := ParseFormat(FormatVersion); err != nil {
		t.Fatal(err)
	}
	if FormatMarker != "# omni-ir 0.8" {
		t.Errorf("FormatMarker = %q", FormatMarker)
	}
	var zero StreamFormat
	if zero.String() != "0.0" {
		t.Errorf("zero StreamFormat = %q, want 0.0", zero)
	}
	a, _ := ParseFormat("00.6")
	b, _ := ParseFormat("0.5")
	if a != b {
		t.Errorf("%v != %v: a format must have one representation", a, b)
	}
}

func FuzzCompareFormats(f *testing.F) {
	for _, s := range []string{"0.8", "0.6", "00.7", "1.0", "", ".", "0.8.1", "+1.0", "9999999999999999999999.1"} {
		f.Add(s, "0.8")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := CompareFormats(a, b)
		back, err2 := CompareFormats(b, a)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("errors differ: %v, %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformedFormat) {
				t.Fatalf("error %v does not wrap ErrMalformedFormat", err)
			}
			return
		}
		if c != -back {
			t.Fatalf("CompareFormats(%q,%q)=%d but reversed %d", a, b, c, back)
		}
		fa, _ := ParseFormat(a)
		again, err := ParseFormat(fa.String())
		if err != nil || again != fa {
			t.Fatalf("ParseFormat(%q).String() = %q does not round-trip", a, fa)
		}
		if CanRead(a, b) != (c >= 0) {
			t.Fatalf("CanRead(%q, %q) disagrees with CompareFormats", a, b)
		}
	})
}

func ExampleCanRead() {
	// A server writing format 0.8 decides whether to serve a client that
	// asked for ?version=...
	for _, requested := range []string{"0.8", "0.9", "0.7", "0.5"} {
		fmt.Println(requested, CanRead(requested, FormatVersion))
	}
	// Output:
	// 0.8 true
	// 0.9 true
	// 0.7 false
	// 0.5 false
}

func ExampleCompareFormats() {
	c, _ := CompareFormats("0.10", "0.9")
	fmt.Println(c)
	c, _ = CompareFormats("0.6", "0.5") // 0.6 names format 0.5
	fmt.Println(c)
	_, err := CompareFormats("0.8.1", "0.8")
	fmt.Println(err)
	// Output:
	// 1
	// 0
	// malformed stream format version "0.8.1": write MAJOR.MINOR with two whole numbers, such as "0.8"
}

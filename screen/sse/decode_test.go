package sse

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// decodeAll feeds input to a fresh decoder in reads of n bytes (0: all at
// once) and returns the events and the first error.
func decodeAll(input string, n, limit int) ([]Event, error) {
	d := NewDecoder(limit)
	var evs []Event
	yield := func(ev Event) bool { evs = append(evs, ev); return true }
	b := []byte(input)
	for len(b) > 0 {
		k := len(b)
		if n > 0 && k > n {
			k = n
		}
		if err := d.Feed(b[:k], yield); err != nil {
			return evs, err
		}
		b = b[k:]
	}
	return evs, nil
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []Event
	}{
		{"event", "event: chunk\ndata: {}\n\n", []Event{{"chunk", "{}"}}},
		{"no name is message", "data: x\n\n", []Event{{"message", "x"}}},
		{"empty name is message", "event:\ndata: x\n\n", []Event{{"message", "x"}}},
		{"crlf", "event: a\r\ndata: x\r\n\r\n", []Event{{"a", "x"}}},
		{"cr", "event: a\rdata: x\r\r", []Event{{"a", "x"}}},
		{"cr then lf is one line end", "data: x\r\n\r\ndata: y\r\r\n", []Event{{"message", "x"}, {"message", "y"}}},
		{"lf cr is two line ends", "data: x\n\rdata: y\n\n", []Event{{"message", "x"}, {"message", "y"}}},
		{"bom dropped", "\ufeffdata: x\n\n", []Event{{"message", "x"}}},
		{"one bom only", "\ufeff\ufeffdata: x\n\ndata: y\n\n", []Event{{"message", "y"}}},
		{"bom prefix is text", "\xef\xbbdata: x\n\ndata: y\n\n", []Event{{"message", "y"}}},
		{"comment", ": ping\ndata: x\n: ping\n\n", []Event{{"message", "x"}}},
		{"comment only event", ":\n\n", nil},
		{"multi-line data", "data: a\ndata:\ndata: b\n\n", []Event{{"message", "a\n\nb"}}},
		{"empty data", "data:\n\n", []Event{{"message", ""}}},
		{"field without colon", "data\ndata\n\n", []Event{{"message", "\n"}}},
		{"one space removed", "event:  a\ndata:  x \n\n", []Event{{" a", " x "}}},
		{"tab kept", "data:\tx\n\n", []Event{{"message", "\tx"}}},
		{"first colon", "data: a: b\n\n", []Event{{"message", "a: b"}}},
		{"other fields", "id: 7\nretry: 1\nfoo: bar\nDATA: no\ndata: x\n\n", []Event{{"message", "x"}}},
		{"no data", "event: done\nid: 1\n\n", nil},
		{"name reset after event", "event: a\ndata: 1\n\ndata: 2\n\n", []Event{{"a", "1"}, {"message", "2"}}},
		{"name reset after dataless event", "event: a\n\ndata: 2\n\n", []Event{{"message", "2"}}},
		{"unfinished event", "data: x\n", nil},
		{"unfinished line", "data: x", nil},
		{"utf8", "data: é東😀\n\n", []Event{{"message", "é東😀"}}},
		{"invalid utf8", "data: a\xffb\xe2\x82c\xf0\x9f\x98\n\n", []Event{{"message", "a\ufffdb\ufffdc\ufffd"}}},
		{"invalid utf8 in name", "event: chunk\xc3\ndata: x\n\n", []Event{{"chunk\ufffd", "x"}}},
	}
	for _, tt := range tests {
		for _, n := range readSizes {
			t.Run(fmt.Sprintf("%s/read=%d", tt.name, n), func(t *testing.T) {
				got, err := decodeAll(tt.input, n, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("events %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func TestDecoderLimit(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		limit   int
		want    []Event
		wantErr bool
	}{
		{"fits", "data: 12345\n\n", 11, []Event{{"message", "12345"}}, false},
		{"line too long", "data: 123456\n\n", 11, nil, true},
		{"data adds up", "data: 1234\ndata: 5678\n\n", 14, nil, true},
		{"comments don't count", ": " + strings.Repeat("p", 100) + "\ndata: 1\n\n", 8, []Event{{"message", "1"}}, false},
		{"limit per event", "data: 1234\n\ndata: 5678\n\n", 10, []Event{{"message", "1234"}, {"message", "5678"}}, false},
		{"events before the error", "data: 1\n\ndata: " + strings.Repeat("x", 20), 10, []Event{{"message", "1"}}, true},
	}
	for _, tt := range tests {
		for _, n := range readSizes {
			t.Run(fmt.Sprintf("%s/read=%d", tt.name, n), func(t *testing.T) {
				got, err := decodeAll(tt.input, n, tt.limit)
				if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrEventTooLarge)) {
					t.Errorf("error %v, want error %v", err, tt.wantErr)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("events %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func TestDecoderStops(t *testing.T) {
	d := NewDecoder(0)
	var got []Event
	yield := func(ev Event) bool { got = append(got, ev); return false }
	if err := d.Feed([]byte("data: 1\n\ndata: 2\n\n"), yield); err != nil {
		t.Fatal(err)
	}
	if err := d.Feed([]byte("data: 3\n\n"), yield); err != nil {
		t.Fatal(err)
	}
	if want := []Event{{"message", "1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

func TestToValidUTF8(t *testing.T) {
	// Expected results follow the Encoding Standard's decoder: one U+FFFD
	// for each maximal subpart of an ill-formed sequence.
	const r = "\ufffd"
	tests := []struct{ in, want string }{
		{"abc", "abc"},
		{"\ufffd", r},
		{"\xff", r},
		{"\x80\x80", r + r},
		{"\xc0\xaf", r + r},         // overlong: lead byte never valid
		{"\xe2\x82", r},             // truncated three-byte sequence
		{"\xe2\x82A", r + "A"},      // one U+FFFD for the maximal subpart
		{"\xe0\x80\x80", r + r + r}, // E0 needs A0..BF next
		{"\xe0\xa0", r},
		{"\xed\xa0\x80", r + r + r}, // surrogate
		{"\xed\x9f", r},
		{"\xf0\x9f\x98", r},
		{"\xf0\x8f\x80\x80", r + r + r + r}, // overlong four-byte
		{"\xf4\x90\x80\x80", r + r + r + r}, // above U+10FFFF
		{"\xf4\x8f\xbf", r},
		{"\xf5\x80", r + r},
		{"a\xf1\x80\x80b\xc3", "a" + r + "b" + r},
	}
	for _, tt := range tests {
		if got := string(toValidUTF8([]byte(tt.in))); got != tt.want {
			t.Errorf("toValidUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

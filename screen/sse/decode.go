package sse

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// DefaultMaxEventSize is the most bytes a [Decoder] holds for one event
// (its data so far plus the line being read) when not told otherwise.
const DefaultMaxEventSize = 8 << 20

// ErrEventTooLarge is returned by [Decoder.Feed] when one event grows past
// the decoder's limit. The decoder reads nothing more after it.
var ErrEventTooLarge = errors.New("sse: event larger than the limit")

// Event is one Server-Sent Event.
type Event struct {
	// Name is the value of the event's last event field, or "message"
	// when it had none (or an empty one).
	Name string
	// Data is the values of the event's data fields joined with "\n".
	Data string
}

// byteOrderMark is the UTF-8 encoding of U+FEFF, dropped from the start of
// an event stream.
const byteOrderMark = "\xEF\xBB\xBF"

// A Decoder splits the bytes of an event stream into events, as the HTML
// standard's event-stream interpretation does. It holds one line at a time
// and the data of the event being read, so feeding the same bytes in any
// pieces gives the same events. A Decoder is not safe for concurrent use.
type Decoder struct {
	max int

	started bool // the byte order mark has been dropped or ruled out
	bomN    int  // leading bytes matched against the byte order mark

	line    []byte // the line being read
	comment bool   // the line being read starts with ":" and is dropped
	lastCR  bool   // the last byte ended a line with CR; an LF next is part of it

	name    []byte // the event field of the event being read
	data    []byte // its data fields, each followed by "\n"
	stopped bool   // yield asked to stop, or the limit was passed
	err     error
}

// NewDecoder returns a decoder that holds at most maxEventSize bytes for one
// event; zero or less means [DefaultMaxEventSize].
func NewDecoder(maxEventSize int) *Decoder {
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	return &Decoder{max: maxEventSize}
}

// Feed reads the next bytes of the stream and calls yield with each event
// they complete, in order. When yield returns false, Feed returns at once
// and the decoder ignores everything fed after. Feed returns
// [ErrEventTooLarge] once an event passes the limit, and after it.
//
// There is no call for the end of the stream: an event is complete only at
// its closing blank line, so whatever is pending at the end is no event.
func (d *Decoder) Feed(p []byte, yield func(Event) bool) error {
	if d.stopped {
		return d.err
	}
	if !d.started {
		for len(p) > 0 && d.bomN < len(byteOrderMark) {
			if p[0] != byteOrderMark[d.bomN] {
				break
			}
			d.bomN++
			p = p[1:]
		}
		switch {
		case d.bomN == len(byteOrderMark):
			d.started = true
		case len(p) == 0:
			return nil // all of p may still be a byte order mark
		default:
			// Not a byte order mark: the bytes matched so far are
			// text. They hold no line end, so they only start the line.
			d.started = true
			if err := d.appendLine([]byte(byteOrderMark[:d.bomN])); err != nil {
				return err
			}
		}
	}
	for len(p) > 0 {
		if d.lastCR {
			d.lastCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			return d.appendLine(p)
		}
		if err := d.appendLine(p[:i]); err != nil {
			return err
		}
		d.lastCR = p[i] == '\r'
		p = p[i+1:]
		if ev, ok := d.endLine(); ok && !yield(ev) {
			d.stopped = true
			return nil
		}
	}
	return nil
}

// appendLine adds part of a line, dropping comment lines as they come.
func (d *Decoder) appendLine(b []byte) error {
	if d.comment || len(b) == 0 {
		return nil
	}
	if len(d.line) == 0 && b[0] == ':' {
		d.comment = true
		return nil
	}
	if len(d.line)+len(b)+len(d.data)+len(d.name) > d.max {
		d.stopped = true
		d.err = ErrEventTooLarge
		return d.err
	}
	d.line = append(d.line, b...)
	return nil
}

// endLine interprets the line just read and reports an event when the line
// is the blank line that completes one.
func (d *Decoder) endLine() (Event, bool) {
	if d.comment {
		d.comment = false
		return Event{}, false
	}
	line := toValidUTF8(d.line)
	d.line = d.line[:0]
	if len(line) == 0 {
		return d.dispatch()
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		d.name = append(d.name[:0], value...)
	case "data":
		d.data = append(d.data, value...)
		d.data = append(d.data, '\n')
	}
	// id, retry and any other field are ignored (SPEC 10.6, 10.11).
	return Event{}, false
}

// dispatch completes the event being read. An event without data is no
// event.
func (d *Decoder) dispatch() (Event, bool) {
	defer func() {
		d.name = d.name[:0]
		d.data = d.data[:0]
	}()
	if len(d.data) == 0 {
		return Event{}, false
	}
	ev := Event{Name: string(d.name), Data: string(d.data[:len(d.data)-1])}
	if ev.Name == "" {
		ev.Name = "message"
	}
	return ev, true
}

// toValidUTF8 decodes b as the Encoding Standard's UTF-8 decoder does: each
// maximal part of an invalid sequence becomes one U+FFFD. It returns b
// itself when b is valid.
func toValidUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		out = append(out, "\uFFFD"...)
		i += invalidPrefix(b[i:])
	}
	return out
}

// invalidPrefix returns the length of the maximal subpart of an invalid
// UTF-8 sequence at the start of b: a lead byte and the continuation bytes
// that could still have completed it (Unicode 3.9, "U+FFFD substitution of
// maximal subparts"), or 1.
func invalidPrefix(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for n <= need && n < len(b) && b[n] >= lo && b[n] <= hi {
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}

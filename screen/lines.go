package screen

import (
	"strings"
	"unicode/utf8"
)

// lineReader splits a byte stream into lines (SPEC 3.1–3.7). It decodes
// UTF-8 as the WHATWG decoder does, one byte at a time, so a character split
// across writes decodes exactly as if it had arrived whole, and each maximal
// invalid sequence becomes one U+FFFD. A line longer than the limit is
// reported once, as soon as it is known to be too long, and its text is
// dropped rather than kept until its end.
type lineReader struct {
	// decoder state
	cp    rune
	need  int // continuation bytes still needed
	lower byte
	upper byte

	buf        []byte // the current line, valid UTF-8
	units      int    // its length in UTF-16 code units
	discarding bool   // the current line overflowed
	line       int    // number of the current line (1-based)
	started    bool   // a character has been decoded (a leading BOM is dropped)
	limit      int

	onLine     func(line int, text string)
	onOverflow func(line int)

	text textArena // where line texts are kept
}

// textArena makes the texts of lines out of shared chunks of bytes, so
// that a stream of short lines costs an allocation per chunk rather than
// per line. What a chunk holds never changes once written, and a chunk
// stays alive as long as a string made from it, which for the lines of a
// document is as long as the document.
type textArena struct {
	b strings.Builder
}

// Sizes of the arena: chunks start at firstTextChunk bytes and double up
// to textChunk, so that a short stream stays small; longer texts than
// maxArenaText get their own allocation rather than leave a chunk half
// used.
const (
	firstTextChunk = 512
	textChunk      = 16 << 10
	maxArenaText   = textChunk / 8
)

// make returns b as a string.
func (a *textArena) make(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > maxArenaText {
		return string(b)
	}
	if c := a.b.Cap(); c-a.b.Len() < len(b) {
		a.b = strings.Builder{}
		a.b.Grow(max(min(max(firstTextChunk, 2*c), textChunk), len(b)))
	}
	start := a.b.Len()
	a.b.Write(b)
	return a.b.String()[start:]
}

func (r *lineReader) init(limit int, onLine func(int, string), onOverflow func(int)) {
	r.line = 1
	r.lower, r.upper = 0x80, 0xBF
	r.limit = limit
	r.onLine = onLine
	r.onOverflow = onOverflow
}

// write feeds bytes.
func (r *lineReader) write(b []byte) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if r.need == 0 {
			if c < 0x80 {
				if c == '\n' {
					r.started = true
					r.endLine()
					continue
				}
				// Fast path: copy a run of ASCII bytes at once.
				j := i + 1
				for j < len(b) && b[j] < 0x80 && b[j] != '\n' {
					j++
				}
				r.appendASCII(b[i:j])
				i = j - 1
				continue
			}
			switch {
			case c >= 0xC2 && c <= 0xDF:
				r.need, r.cp = 1, rune(c&0x1F)
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					r.lower = 0xA0
				} else if c == 0xED {
					r.upper = 0x9F
				}
				r.need, r.cp = 2, rune(c&0x0F)
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					r.lower = 0x90
				} else if c == 0xF4 {
					r.upper = 0x8F
				}
				r.need, r.cp = 3, rune(c&0x07)
			default:
				r.appendRune(utf8.RuneError)
			}
			continue
		}
		if c < r.lower || c > r.upper {
			// The sequence so far is invalid; the byte starts afresh.
			r.need, r.cp = 0, 0
			r.lower, r.upper = 0x80, 0xBF
			r.appendRune(utf8.RuneError)
			i--
			continue
		}
		r.lower, r.upper = 0x80, 0xBF
		r.cp = r.cp<<6 | rune(c&0x3F)
		r.need--
		if r.need == 0 {
			cp := r.cp
			r.cp = 0
			r.appendRune(cp)
		}
	}
}

// end flushes the decoder and the last line (SPEC 3.4).
func (r *lineReader) end() {
	if r.need > 0 {
		r.need, r.cp = 0, 0
		r.lower, r.upper = 0x80, 0xBF
		r.appendRune(utf8.RuneError)
	}
	if r.discarding {
		r.discarding = false
		return
	}
	if len(r.buf) > 0 {
		r.emit()
	}
}

func (r *lineReader) appendASCII(b []byte) {
	r.started = true
	if r.discarding {
		return
	}
	// Decide before copying, so that a long run is never buffered.
	n := r.units + len(b)
	if b[len(b)-1] == '\r' {
		n--
	}
	if n > r.limit {
		r.overflow()
		return
	}
	r.buf = append(r.buf, b...)
	r.units += len(b)
}

func (r *lineReader) appendRune(c rune) {
	if !r.started {
		// Like a WHATWG decoder, drop a byte order mark at the very start.
		r.started = true
		if c == 0xFEFF {
			return
		}
	}
	if r.discarding {
		return
	}
	r.buf = utf8.AppendRune(r.buf, c)
	if c >= 0x10000 {
		r.units += 2
	} else {
		r.units++
	}
	r.checkLength()
}

// checkLength drops the line once it is longer than the limit. A trailing
// carriage return is not counted yet: it may be half of a CRLF ending.
func (r *lineReader) checkLength() {
	n := r.units
	if len(r.buf) > 0 && r.buf[len(r.buf)-1] == '\r' {
		n--
	}
	if n > r.limit {
		r.overflow()
	}
}

// overflow drops the current line and reports it once.
func (r *lineReader) overflow() {
	r.discarding = true
	r.buf = r.buf[:0]
	r.units = 0
	if r.onOverflow != nil {
		r.onOverflow(r.line)
	}
}

func (r *lineReader) endLine() {
	if r.discarding {
		r.discarding = false
	} else {
		r.emit()
	}
	r.line++
}

func (r *lineReader) emit() {
	b := r.buf
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	line := r.line
	text := r.text.make(b)
	r.buf = r.buf[:0]
	r.units = 0
	r.onLine(line, text)
}

package flow

import "strings"

// Loading a program makes many small strings and slices that live exactly
// as long as the program. The types below carve them out of shared chunks,
// which turns thousands of allocations per program into dozens. A chunk is
// only ever appended to, so what was handed out never changes.

// Chunks start small and double up to chunkLen elements for a slab and
// chunkBytes bytes for strings, so that a small program stays small.
const (
	firstChunkLen   = 4
	chunkLen        = 128
	firstChunkBytes = 256
	chunkBytes      = 4096
	// maxArenaString is the longest string kept in a chunk; longer ones
	// get their own allocation rather than leave a chunk half used.
	maxArenaString = chunkBytes / 8
)

// slab hands out slices and pointers to elements of shared chunks.
type slab[T any] struct {
	buf []T
}

// clone returns a copy of list (nil when list is empty), capped so that
// appending to it copies rather than overwriting a neighbour.
func (s *slab[T]) clone(list []T) []T {
	if len(list) == 0 {
		return nil
	}
	s.reserve(len(list))
	start := len(s.buf)
	s.buf = append(s.buf, list...)
	return s.buf[start:len(s.buf):len(s.buf)]
}

// one returns a slice holding v alone.
func (s *slab[T]) one(v T) []T {
	s.reserve(1)
	s.buf = append(s.buf, v)
	n := len(s.buf)
	return s.buf[n-1 : n : n]
}

// new returns a pointer to a fresh zero element.
func (s *slab[T]) new() *T {
	s.reserve(1)
	var zero T
	s.buf = append(s.buf, zero)
	return &s.buf[len(s.buf)-1]
}

// reserve makes room for n more elements in the current chunk.
func (s *slab[T]) reserve(n int) {
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]T, 0, max(min(max(firstChunkLen, 2*cap(s.buf)), chunkLen), n))
	}
}

// stringArena makes strings out of shared chunks of bytes.
type stringArena struct {
	b strings.Builder
}

// bytes returns p as a string.
func (a *stringArena) bytes(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if len(p) > maxArenaString {
		return string(p)
	}
	start := a.reserve(len(p))
	a.b.Write(p)
	return a.b.String()[start:]
}

// join returns the concatenation of x, sep and y.
func (a *stringArena) join(x, sep, y string) string {
	n := len(x) + len(sep) + len(y)
	if n > maxArenaString {
		return x + sep + y
	}
	start := a.reserve(n)
	a.b.WriteString(x)
	a.b.WriteString(sep)
	a.b.WriteString(y)
	return a.b.String()[start:]
}

// reserve makes room for n more bytes in the current chunk and returns
// where they start.
func (a *stringArena) reserve(n int) int {
	if c := a.b.Cap(); c-a.b.Len() < n {
		a.b = strings.Builder{}
		a.b.Grow(max(min(max(firstChunkBytes, 2*c), chunkBytes), n))
	}
	return a.b.Len()
}

package run

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// A Masker writes what is written to it to an underlying writer with
// every occurrence of a secret value, and every "Bearer <token>", replaced
// by [REDACTED]. It works on a stream: a secret split across two writes,
// or across lines, is still masked, because a tail that could begin a
// secret is held back until the next write shows whether it does. Close
// writes what is held back. A Masker is not safe for concurrent use.
type Masker struct {
	w       io.Writer
	secrets [][]byte // longest first
	held    []byte
	// prev is the last byte passed on, for where a word starts.
	prev byte
	err  error
}

// maskMinLen is the shortest value masked: a shorter one would mask
// ordinary text everywhere and tell a reader little.
const maskMinLen = 2

// maxBearerHold bounds how long a "Bearer" token is held back waiting for
// its end; a longer run of token characters is masked as it stands.
const maxBearerHold = 8 << 10

// NewMasker returns a Masker writing to w that masks secrets (values
// shorter than two bytes are ignored) and bearer tokens.
func NewMasker(w io.Writer, secrets []string) *Masker {
	m := &Masker{w: w}
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) >= maskMinLen && !seen[s] {
			seen[s] = true
			m.secrets = append(m.secrets, []byte(s))
		}
	}
	slices.SortFunc(m.secrets, func(a, b []byte) int { return len(b) - len(a) })
	return m
}

// Write masks p and writes what can be decided; it reports len(p) unless
// the underlying writer failed.
func (m *Masker) Write(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	m.held = append(m.held, p...)
	out, rest := m.scan(m.held, false)
	if k := len(m.held) - len(rest); k > 0 {
		m.prev = m.held[k-1]
	}
	m.held = append(m.held[:0], rest...)
	if len(out) > 0 {
		if _, err := m.w.Write(out); err != nil {
			m.err = err
			return 0, err
		}
	}
	return len(p), nil
}

// Close writes what is held back, masked, and closes nothing else.
func (m *Masker) Close() error {
	if m.err != nil {
		return m.err
	}
	out, _ := m.scan(m.held, true)
	m.held = m.held[:0]
	if len(out) > 0 {
		if _, err := m.w.Write(out); err != nil {
			m.err = err
		}
	}
	return m.err
}

var (
	bearerWord = []byte("bearer")
	redacted   = []byte(redactedMarker)
)

// scan masks b and returns the masked text that is decided and the tail
// of b that must wait for more input (none when final).
func (m *Masker) scan(b []byte, final bool) (out, rest []byte) {
	out = make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if n, ok := m.secretAt(b[i:], final); ok {
			if n < 0 {
				return out, b[i:] // may be the start of a secret
			}
			out = append(out, redacted...)
			i += n
			continue
		}
		before := m.prev
		if i > 0 {
			before = b[i-1]
		}
		if n, keep, ok := bearerAt(b[i:], !isTokenByte(before), final); ok {
			if n < 0 {
				return out, b[i:]
			}
			out = append(out, b[i:i+keep]...)
			out = append(out, redacted...)
			i += n
			continue
		}
		out = append(out, b[i])
		i++
	}
	return out, nil
}

// secretAt reports whether a secret begins at the start of b: ok with its
// length, or ok with -1 when b is shorter than a secret it begins (more
// input decides; never when final).
func (m *Masker) secretAt(b []byte, final bool) (int, bool) {
	// Longest first: a longer secret that more input may still complete
	// holds the output before a shorter one it begins with is taken, so
	// no tail of the longer one is ever written.
	for _, s := range m.secrets {
		if bytes.HasPrefix(b, s) {
			return len(s), true
		}
		if !final && len(b) < len(s) && bytes.HasPrefix(s, b) {
			return -1, true
		}
	}
	return 0, false
}

// bearerAt reports whether "Bearer <token>" (any case, one or more spaces
// or tabs) begins at the start of b, at a word start: ok with the length
// of the whole and keep, the length of what stays ("Bearer "), or ok with
// -1 when more input decides.
func bearerAt(b []byte, wordStart, final bool) (n, keep int, ok bool) {
	if !wordStart || len(b) == 0 || b[0]|0x20 != 'b' {
		return 0, 0, false
	}
	k := min(len(b), len(bearerWord))
	if !bytes.EqualFold(b[:k], bearerWord[:k]) {
		return 0, 0, false
	}
	if k < len(bearerWord) {
		return -1, 0, !final
	}
	i := len(bearerWord)
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	if i == len(bearerWord) {
		if i == len(b) && !final {
			return -1, 0, true
		}
		return 0, 0, false
	}
	keep = i
	for i < len(b) && isTokenByte(b[i]) {
		i++
	}
	if i == len(b) && !final && i-keep < maxBearerHold {
		return -1, 0, true // the token may go on
	}
	if i == keep {
		return 0, 0, false
	}
	return i, keep, true
}

// isTokenByte reports whether c may stand in a bearer token.
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._~+/=-", c) >= 0
}

// MaskString masks secrets and bearer tokens in s, as a Masker does.
func MaskString(s string, secrets []string) string {
	var b bytes.Buffer
	m := NewMasker(&b, secrets)
	m.Write([]byte(s))
	m.Close()
	return b.String()
}

// maskEnv is the variable that hands a Run's init the values to mask in
// the process's output. The init removes it before it starts the process.
const maskEnv = "ASSENT_MASK"

// encodeMask encodes secrets for maskEnv.
func encodeMask(secrets []string) string {
	b, _ := json.Marshal(secrets)
	return base64.StdEncoding.EncodeToString(b)
}

// decodeMask decodes maskEnv's value.
func decodeMask(s string) []string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	var out []string
	_ = json.Unmarshal(b, &out)
	return out
}

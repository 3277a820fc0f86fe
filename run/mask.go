package run

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
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

// relayArg0 is argv[0] of the process that masks a Run's output where the
// Run has no init of its own to do it (no namespaces): the server's own
// executable, started under this name. It is a process rather than a
// goroutine of the server so that a Run outlives the server as it does
// with an init: its output pipes stay open and masked after the server
// stops.
const relayArg0 = "assent-run-mask"

// The relay is dispatched here, before main, so that every program that
// starts Runs can serve as it, whether or not it calls Init.
func init() {
	if len(os.Args) > 0 && os.Args[0] == relayArg0 {
		os.Exit(runRelay(os.Stdin))
	}
}

// relaySecretsMax bounds what the relay reads of its secrets.
const relaySecretsMax = 16 << 20

// runRelay is the masking relay: it reads the JSON list of values to mask
// from secrets, then copies fd 3 to fd 5 and fd 4 to fd 6 through Maskers
// until both inputs end.
func runRelay(secrets io.Reader) int {
	b, err := io.ReadAll(io.LimitReader(secrets, relaySecretsMax))
	if err != nil {
		return 125
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return 125
	}
	var copies sync.WaitGroup
	for i := range uintptr(2) {
		in, out := os.NewFile(3+i, "in"), os.NewFile(5+i, "out")
		if in == nil || out == nil {
			return 125
		}
		copies.Go(func() { maskCopy(out, in, list) })
	}
	copies.Wait()
	return 0
}

// maskCopy copies in to out through a Masker of secrets until in ends,
// then closes both.
func maskCopy(out io.WriteCloser, in io.ReadCloser, secrets []string) {
	m := NewMasker(out, secrets)
	_, _ = io.Copy(m, in)
	_ = m.Close()
	in.Close()
	out.Close()
}

// relayDrain bounds how long the end of a Run waits for its relay to write
// the last of the output: a process the Run left behind may hold the pipe
// open longer.
const relayDrain = 2 * time.Second

// maskRelay is a started masking relay: the write ends the Run's process
// gets as its stdout and stderr, and done, closed once the relay ended.
type maskRelay struct {
	stdout, stderr *os.File
	done           chan struct{}
}

// startMaskRelay starts a relay (see relayArg0) that writes what comes
// through its pipes to stdout and stderr with secrets and bearer tokens
// masked. The caller gives the returned write ends to the process and
// closes them once it started.
func startMaskRelay(stdout, stderr *os.File, secrets []string) (*maskRelay, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	list, _ := json.Marshal(append([]string{}, secrets...))
	cmd := &exec.Cmd{Path: exe, Args: []string{relayArg0}, Env: []string{},
		Stdin:       bytes.NewReader(list),
		ExtraFiles:  []*os.File{outR, errR, stdout, stderr},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}, // not signalled with the Run's group
	}
	err = cmd.Start()
	outR.Close()
	errR.Close()
	if err != nil {
		outW.Close()
		errW.Close()
		return nil, err
	}
	r := &maskRelay{stdout: outW, stderr: errW, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(r.done)
	}()
	return r, nil
}

// wait waits until the relay ended or relayDrain has passed.
func (r *maskRelay) wait() {
	t := time.NewTimer(relayDrain)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
	}
}

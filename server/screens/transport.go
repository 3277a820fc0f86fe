package screens

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/wire"
)

// Generator writes screens for prompts: a model, or the mock that serves
// canned screens. It writes the stream through emit in pieces that may end
// anywhere, and returns how it stopped. The server writes the version marker
// itself, and reads every piece with its own parser. Generate must return
// soon after ctx is done (the client went away or the server is stopping).
type Generator interface {
	Generate(ctx context.Context, prompt string, emit func(text string) error) (GenerateResult, error)
}

// GenerateResult is how a generation ended.
type GenerateResult struct {
	// StopReason is end_turn, max_tokens or refusal.
	StopReason string
	// Model names the model that wrote the stream.
	Model string
}

// GenerateError is a generation that failed, sent to the client as an
// error event with its code (timeout, model_error, rate_limited, refusal,
// unavailable, daily_cap, …).
type GenerateError struct {
	Code      string
	Message   string
	Retryable bool
}

func (e *GenerateError) Error() string { return e.Code + ": " + e.Message }

// SetGenerator replaces the generator behind POST /api/generate.
func (s *Part) SetGenerator(g Generator) {
	s.scrMu.Lock()
	s.generator = g
	s.scrMu.Unlock()
}

// MockGenerator serves canned screens: the one whose name (without .omni)
// appears in the prompt, letters and digits compared without case, or else
// the first by name. It writes one line per
// piece, Delay apart, so a screen visibly streams in.
type MockGenerator struct {
	// Screens maps a name to its stream.
	Screens map[string]string
	Delay   time.Duration
}

// LoadMockScreens reads the *.omni files of fsys's top directory.
func LoadMockScreens(fsys fs.FS) (map[string]string, error) {
	names, err := fs.Glob(fsys, "*.omni")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(path.Base(n), ".omni")] = string(b)
	}
	return out, nil
}

// Generate implements Generator.
func (m MockGenerator) Generate(ctx context.Context, prompt string, emit func(string) error) (GenerateResult, error) {
	names := make([]string, 0, len(m.Screens))
	for n := range m.Screens {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return GenerateResult{}, &GenerateError{Code: "unavailable", Message: "the mock generator has no canned screens", Retryable: false}
	}
	// Names match however the prompt spells or hyphenates them: "a sign-up
	// form" finds signup.
	squash := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				return unicode.ToLower(r)
			}
			return -1
		}, s)
	}
	pick := names[0]
	lp := squash(prompt)
	for _, n := range names {
		if strings.Contains(lp, squash(n)) {
			pick = n
			break
		}
	}
	text := m.Screens[pick]
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n') + 1
		if i == 0 {
			i = len(text)
		}
		if m.Delay > 0 {
			t := time.NewTimer(m.Delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return GenerateResult{}, ctx.Err()
			case <-t.C:
			}
		}
		if err := emit(text[:i]); err != nil {
			return GenerateResult{}, err
		}
		text = text[i:]
	}
	return GenerateResult{StopReason: "end_turn", Model: "mock"}, nil
}

// writeEvent writes one server-sent event: an event line, one data line
// holding one JSON object, and a blank line.
func writeEvent(w http.ResponseWriter, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

func startSSE(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
}

func ping(w http.ResponseWriter) error {
	if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// handleGenerate serves POST /api/generate?version= (SPEC 10.1–10.13): the
// generator's stream as server-sent events, read by a server-side parser
// into a screen the caller owns, which the web UI shows as it arrives.
func (s *Part) handleGenerate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Prompt string `json:"prompt"`
	}
	if !host.DecodeJSON(w, r, 64<<10, &req) {
		return
	}
	if n := utf8.RuneCountInString(req.Prompt); n < 1 || n > 2000 {
		host.WriteError(w, wire.InvalidRequest, "prompt must be 1 to 2,000 characters")
		return
	}
	if v, ok := r.URL.Query()["version"]; ok {
		if _, err := screen.ParseFormat(v[0]); err != nil {
			host.WriteError(w, wire.InvalidRequest, "version must be MAJOR.MINOR, such as "+screen.FormatVersion)
			return
		}
		if !screen.CanRead(v[0], screen.FormatVersion) {
			host.WriteError(w, wire.UnsupportedVersion, "this server writes stream format "+screen.FormatVersion+", newer than "+v[0]+"; ask without a version, or update the client")
			return
		}
	}
	s.scrMu.Lock()
	gen := s.generator
	s.scrMu.Unlock()
	if gen == nil {
		host.WriteError(w, wire.Unsupported, "this server has no screen generator: an application sets one (Screens().SetGenerator); assent serve --demo answers with canned screens")
		return
	}
	p := host.PrincipalOf(r)
	sc, err := s.newScreen(r.Context(), p, Options{})
	if err != nil {
		host.WriteToolError(w, err)
		return
	}
	startSSE(w)
	start := s.Now()
	send := func(text string) error {
		s.writeScreen(sc, []byte(text))
		return writeEvent(w, "chunk", map[string]string{"text": text})
	}
	if err := send(screen.FormatMarker + "\n"); err != nil {
		s.endScreen(context.WithoutCancel(r.Context()), sc)
		return
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.Streams, cancel)
	defer stop()
	pieces := make(chan string)
	type outcome struct {
		res GenerateResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := gen.Generate(ctx, req.Prompt, func(text string) error {
			select {
			case pieces <- text:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		done <- outcome{res, err}
	}()
	tick := time.NewTicker(host.PingInterval)
	defer tick.Stop()
	for {
		select {
		case text := <-pieces:
			if err := send(text); err != nil {
				cancel()
				<-done
				s.endScreen(context.WithoutCancel(ctx), sc)
				return
			}
		case <-tick.C:
			if ping(w) != nil {
				cancel()
				<-done
				s.endScreen(context.WithoutCancel(ctx), sc)
				return
			}
		case out := <-done:
			s.endScreen(context.WithoutCancel(ctx), sc)
			if out.err != nil {
				var ge *GenerateError
				switch {
				case errors.As(out.err, &ge):
				case r.Context().Err() != nil:
					return // the client went away
				case s.Streams.Err() != nil:
					ge = &GenerateError{Code: "unavailable", Message: "the server is shutting down; try again shortly", Retryable: true}
				default:
					ge = &GenerateError{Code: "model_error", Message: "the model failed; try again", Retryable: true}
				}
				writeEvent(w, "error", map[string]any{"code": ge.Code, "message": ge.Message, "retryable": ge.Retryable})
				return
			}
			writeEvent(w, "live", map[string]string{"screen": sc.id})
			reason := out.res.StopReason
			if reason == "" {
				reason = "end_turn"
			}
			writeEvent(w, "done", map[string]any{"stopReason": reason, "model": out.res.Model, "ms": s.Now().Sub(start).Milliseconds()})
			return
		}
	}
}

// handleLive serves GET /api/live?screen=&after= (SPEC 10.36–10.40): the
// screen's updates after seq after, in order, then new ones as they are
// applied; end when the screen closes.
func (s *Part) handleLive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			host.WriteError(w, wire.InvalidRequest, "after must be the seq of the last update applied, 0 at first")
			return
		}
		after = n
	}
	sc, ok := s.screenFor(r.Context(), host.PrincipalOf(r), q.Get("screen"))
	if !ok {
		host.WriteError(w, wire.NotFound, "no such screen is followed for you; generate or show it again")
		return
	}
	sc.mu.Lock()
	closed := sc.closed
	sc.mu.Unlock()
	if closed {
		host.WriteError(w, wire.NotFound, "that screen is no longer followed")
		return
	}
	startSSE(w)
	ctx := r.Context()
	for {
		ups, changed, closed := sc.updatesAfter(after)
		for _, u := range ups {
			if _, err := w.Write(u.frame); err != nil {
				return
			}
			after = u.Seq
		}
		if len(ups) > 0 && http.NewResponseController(w).Flush() != nil {
			return
		}
		if closed {
			writeEvent(w, "end", struct{}{})
			return
		}
		t := time.NewTimer(host.PingInterval)
		select {
		case <-changed:
		case <-t.C:
			if ping(w) != nil {
				return
			}
		case <-ctx.Done():
		case <-s.Streams.Done():
		}
		t.Stop()
		if ctx.Err() != nil || s.Streams.Err() != nil {
			return
		}
	}
}

// updatesAfter returns the updates after seq after, the channel closed at
// the next change, and whether the screen has closed. When updates after
// after are no longer all kept, it returns one catch-up update numbered as
// the latest, holding the latest line of each id and $key the updates
// assigned that the screen still has, except $keys a field reads.
func (sc *liveScreen) updatesAfter(after int64) ([]liveUpdate, <-chan struct{}, bool) {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	if sc.seq <= after {
		return nil, sc.changed, sc.closed
	}
	if len(sc.updates) > 0 && sc.updates[0].Seq <= after+1 {
		i, _ := slices.BinarySearchFunc(sc.updates, after+1, func(u liveUpdate, seq int64) int { return int(u.Seq - seq) })
		return slices.Clone(sc.updates[i:]), sc.changed, sc.closed
	}
	fieldKeys := map[string]bool{}
	for _, n := range sc.doc.Nodes() {
		if k := sc.doc.Edits(n.ID); k != "" {
			fieldKeys[k] = true
		}
	}
	mutations := map[string]bool{}
	for _, m := range sc.doc.Mutations() {
		mutations[m.ID] = true
	}
	var b strings.Builder
	for _, k := range sc.order {
		keep := false
		if strings.HasPrefix(k, "$") {
			_, has := sc.doc.State(k)
			keep = has && !fieldKeys[k]
		} else {
			keep = sc.doc.Node(k) != nil || mutations[k]
		}
		if keep {
			b.WriteString(sc.latest[k])
			b.WriteByte('\n')
		}
	}
	return []liveUpdate{newLiveUpdate(sc.seq, b.String())}, sc.changed, sc.closed
}

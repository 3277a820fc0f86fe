package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/assent-run/assent/screen"
)

// DefaultIdleTimeout is how long a client waits for the next byte of a
// stream before it treats the connection as lost (SPEC 10.10: servers ping
// at least every 15 seconds).
const DefaultIdleTimeout = 45 * time.Second

// maxErrorBody is the most of an error answer's body read.
const maxErrorBody = 1 << 20

// ErrInvalidRequest is wrapped by the errors of [Client.Generate] for a
// request it can't send: a URL that isn't http or https, or a version that
// isn't MAJOR.MINOR.
var ErrInvalidRequest = errors.New("sse: invalid request")

// Sink receives the text of a stream. [*screen.Parser] is one.
type Sink interface {
	// Write is given the text of each chunk, in order, exactly as
	// received.
	Write(p []byte) (int, error)
	// End is called once the response has ended, whatever the reason.
	End() *screen.Document
}

// Request asks a server for a screen (SPEC 10.1).
type Request struct {
	// URL is the server's generate endpoint, such as
	// "https://example.com/api/generate". Its query is kept.
	URL string
	// Prompt is sent as the body {"prompt": Prompt}.
	Prompt string
	// Version, when not empty, is the stream format the parser reads,
	// MAJOR.MINOR, sent as the query parameter version.
	Version string
	// Header holds more headers to send, such as Authorization.
	// Content-Type and Accept are always the SPEC's.
	Header http.Header
}

// Client reads generate streams. The zero value is ready to use.
type Client struct {
	// HTTPClient sends requests; nil means http.DefaultClient. Its
	// Timeout, if any, bounds the whole stream.
	HTTPClient *http.Client
	// IdleTimeout is how long to wait for the next byte of a stream
	// before reporting connection_lost; zero means DefaultIdleTimeout,
	// a negative value waits for ever.
	IdleTimeout time.Duration
	// MaxEventSize bounds one event; zero means DefaultMaxEventSize.
	MaxEventSize int
	// RetryWithoutVersion asks once more without a version when the
	// server answers unsupported_version (SPEC 10.12), for servers that
	// refuse every version but their own. The version marker at the start
	// of the stream then says whether it is newer than the parser reads.
	RetryWithoutVersion bool
}

// Generate asks for a screen and feeds the stream into sink, returning how
// it ended. The error is non-nil only for a request that can't be sent
// (wrapping [ErrInvalidRequest]); every failure of the server or the
// network is an [Outcome].
//
// When the server answers an error status, or no answer arrives, nothing is
// written and sink is not ended; otherwise sink is ended exactly once.
func (c *Client) Generate(ctx context.Context, req Request, sink Sink) (Outcome, error) {
	o, err := c.generate(ctx, req, sink)
	if err == nil && c.RetryWithoutVersion && req.Version != "" && o.HTTPStatus != 0 && o.Code == CodeUnsupportedVersion {
		req.Version = ""
		return c.generate(ctx, req, sink)
	}
	return o, err
}

func (c *Client) generate(ctx context.Context, req Request, sink Sink) (Outcome, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Outcome{}, fmt.Errorf("%w: URL %q is not an http or https URL", ErrInvalidRequest, req.URL)
	}
	if req.Version != "" {
		if _, err := screen.ParseFormat(req.Version); err != nil {
			return Outcome{}, fmt.Errorf("%w: version: %v", ErrInvalidRequest, err)
		}
		q := u.Query()
		q.Set("version", req.Version)
		u.RawQuery = q.Encode()
	}
	body, err := json.Marshal(struct {
		Prompt string `json:"prompt"`
	}{req.Prompt})
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	for k, vs := range req.Header {
		hreq.Header[k] = append([]string(nil), vs...)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return clientError(CodeCancelled, "the request was cancelled before the server answered", false), nil
		}
		return clientError(CodeConnectionLost, "no answer from the server: "+err.Error(), true), nil
	}
	return c.ReadResponse(ctx, resp, sink), nil
}

// ReadResponse reads a generate response into sink and closes its body.
//
// A status other than 200 is an error answer (SPEC 10.3): nothing is
// written, sink is not ended, and the outcome is the body's error, or
// server_error (retryable when the status is 500 or above) when the body
// isn't {"error": {"code": …}}.
//
// A 200 is read as an event stream until its terminal event, its end, a
// failed read, the idle timeout or ctx's end; sink is then ended.
// Cancelling ctx closes the body, so a read waiting for the server returns.
func (c *Client) ReadResponse(ctx context.Context, resp *http.Response, sink Sink) Outcome {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorAnswer(resp)
	}
	return c.readStream(ctx, resp.Body, sink)
}

// errorAnswer is the outcome of an answer with an error status.
func errorAnswer(resp *http.Response) Outcome {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	var o Outcome
	code, ok := "", false
	if json.Unmarshal(data, &env) == nil {
		code, ok = stringField(env.Error, "code")
	}
	if ok && code != "" {
		o = Outcome{Status: StatusError, Code: code, Fields: env.Error}
		o.Message, _ = stringField(env.Error, "message")
		var okRetry bool
		if o.Retryable, okRetry = boolField(env.Error, "retryable"); !okRetry {
			o.Retryable = resp.StatusCode >= 500
		}
	} else {
		o = clientError(CodeServerError, fmt.Sprintf("the server answered %s without an error object", resp.Status), resp.StatusCode >= 500)
	}
	o.HTTPStatus = resp.StatusCode
	o.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return o
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s > int64(24*time.Hour/time.Second) {
			s = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// stream applies SPEC 10.7–10.8 to the events of one response.
type stream struct {
	sink    Sink
	outcome *Outcome // the terminal event's outcome, once it came
	live    string
	werr    error
}

// event handles one event; it returns false once the stream is decided.
func (s *stream) event(ev Event) bool {
	switch ev.Name {
	case "chunk":
		fields, ok := objectData(ev.Data)
		if !ok {
			return true
		}
		text, ok := stringField(fields, "text")
		if !ok {
			return true
		}
		if text != "" {
			if _, err := s.sink.Write([]byte(text)); err != nil {
				s.werr = err
				return false
			}
		}
	case "done", "error":
		fields, ok := objectData(ev.Data)
		if !ok {
			return true
		}
		var o Outcome
		if ev.Name == "done" {
			o = doneOutcome(fields)
		} else {
			o = errorOutcome(fields)
		}
		s.outcome = &o
		return false
	case "live":
		if fields, ok := objectData(ev.Data); ok {
			if id, ok := stringField(fields, "screen"); ok {
				s.live = id
			}
		}
	}
	return true
}

// readStream reads an event stream into sink and ends sink.
func (c *Client) readStream(ctx context.Context, body io.ReadCloser, sink Sink) (o Outcome) {
	defer sink.End()
	s := &stream{sink: sink}
	dec := NewDecoder(c.MaxEventSize)
	defer func() { o.Live = s.live }()

	// Cancelling ctx, or the idle timer firing, closes the body so that a
	// read waiting for the server returns.
	stop := context.AfterFunc(ctx, func() { body.Close() })
	defer stop()
	idle := c.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	var timedOut atomic.Bool
	var timer *time.Timer
	if idle > 0 {
		timer = time.AfterFunc(idle, func() {
			timedOut.Store(true)
			body.Close()
		})
		defer timer.Stop()
	}

	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if timer != nil && n > 0 && !timedOut.Load() {
			timer.Reset(idle)
		}
		if ctx.Err() != nil {
			return clientError(CodeCancelled, "the app cancelled the stream", false)
		}
		if n > 0 {
			ferr := dec.Feed(buf[:n], s.event)
			switch {
			case s.werr != nil:
				return clientError(CodeWriteFailed, "writing the stream: "+s.werr.Error(), false)
			case s.outcome != nil:
				return *s.outcome
			case ferr != nil:
				return clientError(CodeEventTooLarge, fmt.Sprintf("an event passed the client's limit of %d bytes", dec.max), false)
			}
		}
		if err != nil {
			msg := "the response ended before a done or error event"
			switch {
			case timedOut.Load():
				msg = fmt.Sprintf("no bytes from the server for %v", idle)
			case err != io.EOF:
				msg = "the response broke off before a done or error event: " + err.Error()
			}
			return clientError(CodeConnectionLost, msg, true)
		}
	}
}

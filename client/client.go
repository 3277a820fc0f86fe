// Package client is a typed Go client of assent's HTTP API.
//
// A [Client] holds a server's base URL and a bearer token (an agent's,
// a person's, a service's or a Run's ASSENT_RUN_TOKEN). Each method sends
// one request and returns the answer as the type the server writes: a
// control snapshot is a [control.Snapshot], a Run a [run.Run], the
// principal an [api.Whoami]. These are the server's own types, so a field
// the server adds reaches Go callers without a copy to update.
//
// Every error answer of the server is returned as an [*Error], which is
// the server's [wire.Error] itself: its Code is stable and
// machine-readable (compare it with the wire package's constants), its
// Status is the HTTP status and Retryable says whether sending the same
// request again may succeed. A request that never got an answer returns a
// [*TransportError] instead. [AsError] and [errors.As] tell them apart.
//
// [Client.Do] reaches any route by method and path, for routes without a
// typed method and for callers that want the answer's raw JSON.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/assent-run/assent/wire"
)

// Error is an error answer of the server: the object under "error" in its
// body, with the answer's HTTP status. It is the server's own type.
type Error = wire.Error

// MaxAnswerBytes bounds the answer a Client reads.
const MaxAnswerBytes = 64 << 20

// Client calls the HTTP API of one server. Its methods may be called from
// several goroutines at once.
type Client struct {
	base    string
	token   string
	session *Session
	http    *http.Client
}

// Options configure a Client.
type Options struct {
	// HTTPClient sends the requests; nil is a client with a 60-second
	// timeout.
	HTTPClient *http.Client
	// Session, when set, makes the client a person signed in to the web
	// UI instead of a token's holder: the routes that only a person's
	// session reaches (the inbox's decisions) take it, and the token is
	// then not sent.
	Session *Session
}

// Session is a person's web session: the value of the assent_session
// cookie that signing in set, and the CSRF token of the person's pages
// (the content of their csrf-token meta element). Requests that change
// state send it in the X-CSRF-Token header with the server's own Origin,
// as the pages do.
type Session struct {
	Cookie string
	CSRF   string
}

// New returns a client of the server at baseURL (http or https, with an
// optional path prefix) that authenticates with token. An empty token
// reaches only the routes that need none (health, readiness, the OpenAPI
// document).
func New(baseURL, token string, opts *Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http or https URL", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: %q has a user, a query or a fragment; give the server's address only", baseURL)
	}
	c := &Client{base: u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), token: token}
	if opts != nil && opts.Session != nil {
		s := *opts.Session
		c.session = &s
	}
	if opts != nil && opts.HTTPClient != nil {
		c.http = opts.HTTPClient
	} else {
		c.http = &http.Client{Timeout: 60 * time.Second}
	}
	return c, nil
}

// BaseURL returns the server's address as the client sends to it.
func (c *Client) BaseURL() string { return c.base }

// Token returns the bearer token the client sends.
func (c *Client) Token() string { return c.token }

// Do sends a request to path (which starts with /, and may carry a query)
// and decodes a successful answer into out. in is sent as JSON unless it
// is nil (no body) or an io.Reader (sent as it is, as JSON). out may be
// nil to drop the answer, a *json.RawMessage or *[]byte to keep it as
// sent, or any value encoding/json decodes into.
//
// An answer with a status outside 2xx is returned as an *Error, its Status
// set; an answer that is not the error shape gets the code http_<status>.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	_, err := c.do(ctx, method, path, in, out)
	return err
}

// Send sends a request like Do and returns the status and body of the
// answer, whatever its status; only a request that got no answer is an
// error. Read an error answer with [ErrorOf].
func (c *Client) Send(ctx context.Context, method, path string, in any) (status int, body []byte, err error) {
	return c.send(ctx, method, path, in)
}

// ErrorOf returns the error of an answer with status and body, and false
// when status is 2xx.
func ErrorOf(status int, body []byte) (*Error, bool) {
	if status/100 == 2 {
		return nil, false
	}
	return answerError(status, body), true
}

// do is Do that also returns the status of a successful answer.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	status, data, err := c.send(ctx, method, path, in)
	if err != nil {
		return 0, err
	}
	if status/100 != 2 {
		return status, answerError(status, data)
	}
	return status, decode(data, out, method, path)
}

// send sends a request and returns the status and body of the answer,
// whatever the status.
func (c *Client) send(ctx context.Context, method, path string, in any) (int, []byte, error) {
	return c.sendAs(ctx, method, path, in, "application/json")
}

// sendAs is send with the media type of a request body.
func (c *Client) sendAs(ctx context.Context, method, path string, in any, contentType string) (int, []byte, error) {
	var rd io.Reader
	switch b := in.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return 0, nil, fmt.Errorf("client: encode the body of %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	switch {
	case c.session != nil:
		req.AddCookie(&http.Cookie{Name: "assent_session", Value: c.session.Cookie})
		if method != http.MethodGet && method != http.MethodHead {
			req.Header.Set("Origin", req.URL.Scheme+"://"+req.URL.Host)
			req.Header.Set("X-CSRF-Token", c.session.CSRF)
		}
	case c.token != "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, &TransportError{URL: c.base, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return 0, nil, &TransportError{URL: c.base, Err: err}
	}
	return resp.StatusCode, data, nil
}

// TransportError is a request that got no answer: the server could not be
// reached, or the connection failed while the answer was read.
type TransportError struct {
	// URL is the server's base URL.
	URL string
	Err error
}

func (e *TransportError) Error() string {
	return "cannot reach assent at " + e.URL + ": " + e.Err.Error()
}

func (e *TransportError) Unwrap() error { return e.Err }

// answerError returns the error of an answer with a status outside 2xx.
func answerError(status int, data []byte) *Error {
	if e, ok := wire.Decode(data); ok {
		e.Status = status
		return e
	}
	return &Error{Status: status, Code: wire.Code(fmt.Sprintf("http_%d", status)), Message: strings.TrimSpace(string(data)),
		Retryable: status == http.StatusTooManyRequests || status >= 500}
}

// decode decodes a successful answer into out.
func decode(data []byte, out any, method, path string) error {
	switch o := out.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*o = append((*o)[:0], data...)
		return nil
	case *[]byte:
		*o = append((*o)[:0], data...)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: the answer to %s %s does not decode as %T: %w", method, path, out, err)
	}
	return nil
}

// AsError returns err's *Error when err is, or wraps, an error answer of
// the server.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultURL is where a local assent serve listens by default.
const defaultURL = "http://127.0.0.1:7410"

// clientOpts are the flags of commands that talk to a running server.
type clientOpts struct {
	url   string
	token string
}

// addClientFlags adds --url and --token. Their defaults come from
// ASSENT_URL and ASSENT_TOKEN (or ASSENT_RUN_TOKEN inside a Run).
func addClientFlags(cmd *cobra.Command, o *clientOpts) {
	cmd.Flags().StringVar(&o.url, "url", "", "server URL (default $ASSENT_URL or "+defaultURL+")")
	cmd.Flags().StringVar(&o.token, "token", "", "bearer token (default $ASSENT_TOKEN, or $ASSENT_RUN_TOKEN inside a Run)")
}

// apiClient calls the HTTP API of a running server.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// newAPIClient resolves the flags and environment into a client.
func newAPIClient(o clientOpts) (*apiClient, error) {
	u, err := serverURL(firstNonEmpty(o.url, os.Getenv("ASSENT_URL"), defaultURL))
	if err != nil {
		return nil, err
	}
	tok := firstNonEmpty(o.token, os.Getenv("ASSENT_TOKEN"), os.Getenv("ASSENT_RUN_TOKEN"))
	if tok == "" {
		return nil, usageErr("no token: pass --token or set ASSENT_TOKEN (assent serve prints one; assent token create makes more)")
	}
	return &apiClient{base: u, token: tok, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// serverURL reads a server address: an http or https URL, or HOST:PORT,
// which gets http://. Anything else is refused with bad_url.
func serverURL(s string) (string, error) {
	raw := strings.TrimSpace(s)
	full := raw
	if !strings.Contains(full, "://") {
		full = "http://" + full
	}
	u, err := url.Parse(full)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", usageErr("bad_url: %q is not a server address; write http://HOST:PORT or HOST:PORT, such as %s", raw, defaultURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", usageErr("bad_url: %q has port %q; a port is 1 to 65535", raw, p)
		}
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// apiErr is an error answer of the server.
type apiErr struct {
	Status    int
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Data      map[string]any `json:"data,omitempty"`
}

func (e *apiErr) Error() string { return e.Code + ": " + e.Message }

// send sends a request with body (JSON-encoded unless it is an io.Reader or
// nil) and returns the status and the raw answer.
func (c *apiClient) send(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, refused("unreachable: cannot reach assent at %s: %v (is assent serve running? pass --url or set ASSENT_URL to where it listens)", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, data, err
}

// asAPIError returns the error envelope of an answer, if it is one.
func asAPIError(status int, data []byte) *apiErr {
	var env struct {
		Error *apiErr `json:"error"`
	}
	if json.Unmarshal(data, &env) == nil && env.Error != nil {
		env.Error.Status = status
		return env.Error
	}
	return nil
}

// do sends a request and decodes a 2xx JSON answer into out (when not nil).
// An error answer is returned as *apiErr.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	status, data, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		if e := asAPIError(status, data); e != nil {
			return e
		}
		return &apiErr{Status: status, Code: fmt.Sprintf("http_%d", status), Message: strings.TrimSpace(string(data))}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], data...)
		return nil
	}
	return json.Unmarshal(data, out)
}

// failAPI turns an API error into the command's exit: code 1 with the
// server's code and message.
func failAPI(err error) error {
	if e, ok := err.(*apiErr); ok {
		return refused("%s: %s", e.Code, e.Message)
	}
	return err
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

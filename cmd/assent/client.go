package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/client"
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

// newAPIClient resolves the flags and environment into a client of the
// server's HTTP API.
func newAPIClient(o clientOpts) (*client.Client, error) {
	u, err := serverURL(firstNonEmpty(o.url, os.Getenv("ASSENT_URL"), defaultURL))
	if err != nil {
		return nil, err
	}
	tok := firstNonEmpty(o.token, os.Getenv("ASSENT_TOKEN"), os.Getenv("ASSENT_RUN_TOKEN"))
	if tok == "" {
		return nil, usageErr("no token: pass --token or set ASSENT_TOKEN (assent serve prints one; assent token create makes more)")
	}
	return client.New(u, tok, nil)
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

// failAPI turns an error of the client into the command's exit: code 1
// with the server's code and message, or unreachable when no answer came.
func failAPI(err error) error {
	if e, ok := client.AsError(err); ok {
		return refused("%s: %s", e.Code, e.Message)
	}
	var te *client.TransportError
	if errors.As(err, &te) {
		return refused("unreachable: cannot reach assent at %s: %v (is assent serve running? pass --url or set ASSENT_URL to where it listens)", te.URL, te.Err)
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

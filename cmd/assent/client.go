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
	url       string
	token     string // only to refuse it
	tokenFile string
}

// addClientFlags adds --url and --token-file. Their defaults come from
// ASSENT_URL and ASSENT_TOKEN (or ASSENT_RUN_TOKEN inside a Run). A hidden
// --token is there only to be refused: a token on the command line is
// readable by every process on the machine.
func addClientFlags(cmd *cobra.Command, o *clientOpts) {
	cmd.Flags().StringVar(&o.url, "url", "", "server URL (default $ASSENT_URL or "+defaultURL+")")
	addTokenFlags(cmd, &o.token, &o.tokenFile, "(default $ASSENT_TOKEN, or $ASSENT_RUN_TOKEN inside a Run)")
}

// addTokenFlags adds --token-file and the hidden, refused --token.
func addTokenFlags(cmd *cobra.Command, token, file *string, defaults string) {
	cmd.Flags().StringVar(file, "token-file", "", "file whose first line is the bearer token "+defaults)
	cmd.Flags().StringVar(token, "token", "", "refused: set $ASSENT_TOKEN or use --token-file")
	_ = cmd.Flags().MarkHidden("token")
}

// readToken returns the bearer token: from the file when one is named,
// otherwise from the first of env that is set. A token given on the
// command line is refused secret_on_command_line.
func readToken(flag, file string, env ...string) (string, error) {
	if flag != "" {
		return "", usageErr("%s: --token puts the token where any process on this machine can read it (/proc/PID/cmdline, ps); set ASSENT_TOKEN in the environment, or write it to a file readable only by you and pass --token-file FILE", codeSecretOnCommandLine)
	}
	if file == "" {
		vals := make([]string, len(env))
		for i, e := range env {
			vals[i] = os.Getenv(e)
		}
		return firstNonEmpty(vals...), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", refused("bad_token_file: cannot read --token-file %s: %v; write the token on its first line", file, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", refused("bad_token_file: --token-file %s is empty; write the token on its first line", file)
	}
	return line, nil
}

// bearer returns the token of o: --token-file, ASSENT_TOKEN, or
// ASSENT_RUN_TOKEN inside a Run.
func (o clientOpts) bearer() (string, error) {
	return readToken(o.token, o.tokenFile, "ASSENT_TOKEN", "ASSENT_RUN_TOKEN")
}

// newAPIClient resolves the flags and environment into a client of the
// server's HTTP API.
func newAPIClient(o clientOpts) (*client.Client, error) {
	u, err := serverURL(firstNonEmpty(o.url, os.Getenv("ASSENT_URL"), defaultURL))
	if err != nil {
		return nil, err
	}
	tok, err := o.bearer()
	if err != nil {
		return nil, err
	}
	if tok == "" {
		return nil, usageErr("no token: set ASSENT_TOKEN or pass --token-file FILE (assent serve prints one; assent token create makes more)")
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

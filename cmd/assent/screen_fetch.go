package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/sse"
)

// newScreenFetchCmd returns "screen fetch", which asks a generate endpoint
// for a screen and reads the stream the way every client must (SPEC
// 10.1–10.12).
func newScreenFetchCmd(c *cli) *cobra.Command {
	var version, prompt, token, tokenFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fetch [--version X.Y] [--json] URL",
		Short: "Ask a generate endpoint for a screen and read its stream",
		Long: `Fetch POSTs {"prompt": …} to URL, a generate endpoint such as
http://127.0.0.1:7410/api/generate, asking for Server-Sent Events, and feeds
the text of each chunk event into a screen parser until the done or error
event. With --version, the query parameter version=X.Y tells the server
which stream format to write.

The screen's text is printed as it arrives, and how the stream ended goes to
standard error. With --json, one object is printed at the end instead:

  {"written": <the text given to the parser>,
   "ended": <whether the parser was ended>,
   "outcome": {"status": "done" | "error", …the fields received}}

An error outcome has "code" and "retryable". When the server refuses before
streaming, nothing is written and the parser is not ended; otherwise it is
ended however the response ends, and a response that ends without done or
error is connection_lost.

The bearer token, if any, comes from --token-file or $ASSENT_TOKEN; a token
given on the command line (--token) is refused secret_on_command_line.
Exit status: 0 when the stream ended with done, 1 for an error outcome, 2 for
a malformed command line.`,
		Example: `  assent screen fetch --prompt "A payment screen" http://127.0.0.1:7410/api/generate
  assent screen fetch --prompt "A sign-up form" --version 0.8 --json http://127.0.0.1:7410/api/generate
  echo "Sign up for the newsletter" | assent screen fetch --prompt - --json URL`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if version != "" {
				if _, err := screen.ParseFormat(version); err != nil {
					return usageErr("--version: %v", err)
				}
			}
			if prompt == "-" {
				data, err := io.ReadAll(c.in)
				if err != nil {
					return refused("unreadable: reading the prompt: %v", err)
				}
				prompt = strings.TrimRight(string(data), "\r\n")
			}
			req := sse.Request{URL: args[0], Prompt: prompt, Version: version}
			token, err := readToken(token, tokenFile, "ASSENT_TOKEN")
			if err != nil {
				return err
			}
			if token != "" {
				req.Header = http.Header{"Authorization": {"Bearer " + token}}
			}
			sink := &fetchSink{p: screen.NewParser(screen.Options{})}
			if !asJSON {
				sink.echo = c.out
			}
			o, err := new(sse.Client).Generate(cmd.Context(), req, sink)
			if errors.Is(err, sse.ErrInvalidRequest) {
				return usageErr("%v", err)
			}
			if err != nil {
				return refused("%v", err)
			}
			if asJSON {
				if err := printJSON(c.out, fetchResult{Written: sink.written.String(), Ended: sink.ended, Outcome: o}); err != nil {
					return err
				}
				if !o.Done() {
					return silentExit(exitRefused)
				}
				return nil
			}
			if sink.written.Len() > 0 && !strings.HasSuffix(sink.written.String(), "\n") {
				fmt.Fprintln(c.out)
			}
			if !o.Done() {
				return refused("%s", describeOutcome(o))
			}
			fmt.Fprintln(c.err, "assent:", describeOutcome(o))
			return nil
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "the stream format to ask for, MAJOR.MINOR (default: none, the server's own)")
	cmd.Flags().StringVar(&prompt, "prompt", "", "the prompt to send; - reads it from standard input")
	addTokenFlags(cmd, &token, &tokenFile, "(default $ASSENT_TOKEN; none when both are empty)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"written", "ended", "outcome"} as JSON at the end`)
	return cmd
}

// fetchResult is what screen fetch --json prints.
type fetchResult struct {
	Written string      `json:"written"`
	Ended   bool        `json:"ended"`
	Outcome sse.Outcome `json:"outcome"`
}

// fetchSink feeds a parser, keeps the text it was given, and echoes it when
// the output is the screen itself.
type fetchSink struct {
	p       *screen.Parser
	written strings.Builder
	ended   bool
	echo    io.Writer
}

func (s *fetchSink) Write(b []byte) (int, error) {
	n, err := s.p.Write(b)
	s.written.Write(b[:n])
	if s.echo != nil && n > 0 {
		if _, werr := s.echo.Write(b[:n]); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}

func (s *fetchSink) End() *screen.Document {
	s.ended = true
	return s.p.End()
}

// describeOutcome says in one line how a stream ended.
func describeOutcome(o sse.Outcome) string {
	if o.Done() {
		var parts []string
		if o.StopReason != "" {
			parts = append(parts, o.StopReason)
		}
		if o.Model != "" {
			parts = append(parts, "model "+o.Model)
		}
		if _, ok := o.Fields["ms"]; ok {
			parts = append(parts, fmt.Sprintf("%d ms", o.Elapsed.Milliseconds()))
		}
		if len(parts) == 0 {
			return "done"
		}
		return "done (" + strings.Join(parts, ", ") + ")"
	}
	s := o.Code
	if o.Message != "" {
		s += ": " + o.Message
	}
	if o.Retryable {
		s += " (retryable"
		if o.RetryAfter > 0 {
			s += fmt.Sprintf(" after %v", o.RetryAfter)
		}
		s += ")"
	}
	return s
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command (see docs/cli.md).
const (
	exitOK      = 0 // success
	exitRefused = 1 // a refusal or invalid input
	exitUsage   = 2 // the command line itself is wrong
)

// cli carries the streams a command reads and writes, so tests can run the
// whole command tree in process.
type cli struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// exitError ends a command with a specific exit code. Its message, when not
// empty, is printed to stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// refused returns an error that exits with code 1 and prints msg.
func refused(format string, args ...any) error {
	return &exitError{code: exitRefused, msg: fmt.Sprintf(format, args...)}
}

// silentExit exits with code without printing anything more (the command has
// already written its answer).
func silentExit(code int) error { return &exitError{code: code} }

// usageErr returns an error that exits with code 2.
func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

func init() {
	// Help lists commands in the order they are added, which is the order
	// of use (spawn before kill), not alphabetically.
	cobra.EnableCommandSorting = false
}

func newRootCmd(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:   "assent",
		Short: "A runtime in which AI agents operate an application while people keep the final say",
		Long: `assent lets AI agents read and propose changes to an application's controls,
screens, long-running jobs and business processes, while a person assents.

Start a server on the embedded default store:

  assent serve --demo

Open the sign-in link it prints, then watch a scripted agent work:

  ASSENT_TOKEN=asnt_… assent demo agent --url http://127.0.0.1:7410

Connect your own MCP client with the same token.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(c.in)
	root.SetOut(c.out)
	root.SetErr(c.err)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErr("%v\nRun '%s --help' for usage.", err, cmd.CommandPath())
	})
	root.AddCommand(
		newServeCmd(c),
		newDemoCmd(c),
		newTokenCmd(c),
		newWebhookCmd(c),
		newPersonCmd(c),
		newMCPCmd(c),
		newControlsCmd(c),
		newScreenCmd(c),
		newRunCmd(c),
		newTraceCmd(c),
		newFlowCmd(c),
		newBenchCmd(c),
		newVersionCmd(c),
	)
	return root
}

// execute runs the command tree on args until it ends, SIGINT or SIGTERM,
// and returns the process exit code.
func execute(args []string, in io.Reader, out, errw io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return executeContext(ctx, args, in, out, errw)
}

// executeContext runs the command tree on args until it ends or ctx is
// done, and returns the process exit code.
func executeContext(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) int {
	c := &cli{in: in, out: out, err: errw}
	root := newRootCmd(c)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(errw, "assent:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(errw, "assent:", err)
	if strings.HasPrefix(err.Error(), "unknown command") {
		return exitUsage
	}
	return exitRefused
}

// usageArgs wraps a cobra positional-argument check so that its failure exits
// with the usage code.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageErr("%v\nRun '%s --help' for usage.", err, cmd.CommandPath())
		}
		return nil
	}
}

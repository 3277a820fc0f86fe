// Command assent is the one binary of the assent runtime: it serves the HTTP API,
// the MCP endpoint and the web UI, and it carries the offline tools for screens,
// flows and runs.
//
// Run "assent --help" for the list of commands.
package main

import (
	"os"

	"github.com/assent-run/assent/run"
)

func main() {
	// A Run's init is this binary started again; it never returns.
	run.Init()
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Package runs is the server's surface for Runs: the /v1/runs API, the
// actors_* tools, the Runs pages, and the tool and Recipe proposals a
// person approves before an agent may run them. The supervisor itself is
// package run.
package runs

// Package assent holds what belongs to the product as a whole rather than to
// one of its parts: the runtime version.
//
// The parts live in their own packages: control (the control registry),
// screen (the Omni IR stream format), run (long-running Runs), flow (Control
// Programs), tool (the tool registry), store (persistence) and server (HTTP,
// MCP and the web UI).
package assent

// Version is the runtime version. Control Programs compare their
// requires_runtime against it, and every surface reports it.
const Version = "0.1.0"

// Package controls is the server's surface for controls: the control
// registry, the forms assent hosts for applications not written in Go, the
// audit log's pages, the controls_* tools, and the proposals in a person's
// inbox. An agent stages a value; only a person applies it.
package controls

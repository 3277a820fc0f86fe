// Package host is what the parts of assent's server share: configuration,
// the store, the event bus, the tool registry, authentication (bearer
// tokens, web sessions, CSRF and Origin checks, rate limits, revocation),
// supervision (who may see what), the wire's error writer and the web
// page layout.
//
// A part (controls, screens, Runs, Flows) is built on a Deps of its own
// naming what it uses of the host — a small Gate interface of auth and
// page checks, its stores, the bus, the tool registry, the clock, the page
// layout and its share of the configuration — and offers its surface
// through the Part interface: a name and its routes, plus optionally an
// inbox section (Inboxer), a count of open items (Counter) and a Close
// method. Package server builds the host, the parts and the MCP endpoint,
// and mounts them. The package is internal to package server.
package host

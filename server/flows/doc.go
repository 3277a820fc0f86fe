// Package flows is the server's surface for Control Programs: the Flow
// kernel on the store, the effects that command controls and start Runs,
// the /v1/flows API, the flows_* tools, the Flow pages and the approvals in
// a person's inbox.
package flows

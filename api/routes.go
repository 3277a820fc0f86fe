package api

import (
	"net/http"
	"reflect"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store"
)

// A Route is one route of the HTTP API: its method and path as the
// server registers them (net/http patterns) and the Go types of its
// bodies.
type Route struct {
	Method string
	Path   string
	// Summary says what the route does, in one line.
	Summary string
	// Public routes need no token.
	Public bool
	// Request is the type of the JSON request body; nil when the route
	// takes none.
	Request reflect.Type
	// RequestText is the media type of a request body that is text, not
	// JSON (an Omni-IR stream).
	RequestText string
	// Status is the status of a successful answer; 204 has no body.
	Status int
	// Response is the type of a successful JSON answer; nil with
	// ContentType set for an answer that is not JSON, and nil without it
	// for a JSON object this table does not describe field by field.
	Response reflect.Type
	// Accepted is the type of the 202 answer of a request filed for a
	// person's decision instead of done; nil when there is none.
	Accepted reflect.Type
	// ContentType is the media type of a successful answer that is not
	// JSON (text/plain logs, the event stream).
	ContentType string
	// Query lists the query parameters the route reads, all optional.
	Query []QueryParam
}

// A QueryParam is one optional query parameter of a route.
type QueryParam struct {
	Name string
	// Type is the JSON Schema type of its value: "string" or "integer".
	Type string
	// Description says what it does, in one line.
	Description string
	// Min and Max bound an integer, when set.
	Min, Max *int64
	// MaxLength bounds a string's characters, when above 0.
	MaxLength int
	// Enum lists the values a string may take, when it is one of a few.
	Enum []string
	// Repeated parameters may be given several times.
	Repeated bool
}

func str(name, desc string) QueryParam {
	return QueryParam{Name: name, Type: "string", Description: desc}
}

func integer(name, desc string, lo, hi int64) QueryParam {
	q := QueryParam{Name: name, Type: "integer", Description: desc, Min: &lo}
	if hi > 0 {
		q.Max = &hi
	}
	return q
}

func oneOf(name, desc string, values ...string) QueryParam {
	q := str(name, desc)
	q.Enum = values
	return q
}

// Pattern returns r as the server registers it: "METHOD /path".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Routes returns every /v1 route the server mounts, in the order of
// docs/http.md. The server's tests compare it with the routes it
// registers.
func Routes() []Route {
	const get, post = http.MethodGet, http.MethodPost
	ok, created := http.StatusOK, http.StatusCreated
	return []Route{
		{Method: get, Path: "/v1/health", Summary: "The process is alive", Public: true, Status: ok, Response: typeOf[Health]()},
		{Method: get, Path: "/v1/ready", Summary: "Whether this node should receive requests (503 when not)", Public: true, Status: ok, Response: typeOf[Ready]()},
		{Method: get, Path: "/v1/openapi.json", Summary: "This document", Public: true, Status: ok},
		{Method: get, Path: "/v1/whoami", Summary: "The principal that asks", Status: ok, Response: typeOf[Whoami]()},
		{Method: get, Path: "/v1/events", Summary: "Server-sent events the principal may see", Status: ok, ContentType: "text/event-stream", Query: []QueryParam{integer("after", "resume after this sequence number (Last-Event-ID wins when both are sent)", 0, 0)}},
		{Method: get, Path: "/v1/inbox", Summary: "The decisions waiting for the signed-in person, of every kind (web session only)", Status: ok, Response: typeOf[Inbox]()},
		{Method: post, Path: "/v1/inbox/{id}/decision", Summary: "A person approves or declines one inbox item, bound to what its card showed (web session only)", Request: typeOf[InboxDecision](), Status: ok, Response: typeOf[InboxOutcome]()},
		{Method: post, Path: "/v1/inbox/decisions", Summary: "A person decides several inbox items at once, each on its own (web session only)", Request: typeOf[InboxBatch](), Status: ok, Response: typeOf[InboxBatchOutcome]()},
		{Method: get, Path: "/v1/rules", Summary: "The signed-in person's standing rules (every rule for the owner) (web session only)", Status: ok, Response: typeOf[RuleList]()},
		{Method: post, Path: "/v1/rules", Summary: "A person lets an agent's values for one control through until a time (web session only)", Request: typeOf[RuleRequest](), Status: created, Response: typeOf[RuleView]()},
		{Method: http.MethodDelete, Path: "/v1/rules/{id}", Summary: "A person revokes a standing rule (web session only)", Status: ok, Response: typeOf[RuleView]()},

		{Method: get, Path: "/v1/controls", Summary: "Snapshots of the controls you can see (?formId=)", Status: ok, Response: typeOf[ControlList](), Query: []QueryParam{str("formId", "only the controls of this form")}},
		{Method: get, Path: "/v1/controls/{formId}/{controlId}", Summary: "One control's snapshot (?subjectType=&subjectId=)", Status: ok, Response: typeOf[control.Snapshot](), Query: []QueryParam{str("subjectType", "the type of the subject the control is bound to"), str("subjectId", "the id of that subject"), str("subjectLabel", "the subject's label, as shown to people")}},
		{Method: post, Path: "/v1/controls/execute", Summary: "Run one control command", Request: typeOf[ExecuteRequest](), Status: ok, Response: typeOf[CommandAnswer]()},
		{Method: post, Path: "/v1/forms/{formId}/controls", Summary: "A service declares its form's hosted controls", Request: typeOf[FormDeclaration](), Status: ok, Response: typeOf[ControlList]()},
		{Method: http.MethodDelete, Path: "/v1/forms/{formId}/controls", Summary: "The form's service removes the form", Status: http.StatusNoContent},
		{Method: http.MethodPut, Path: "/v1/forms/{formId}/controls/{controlId}/value", Summary: "The form's service records the person's own edit", Request: typeOf[SetValueRequest](), Status: ok, Response: typeOf[control.Snapshot]()},
		{Method: get, Path: "/v1/audit", Summary: "The durable audit log, oldest first (?formId=&principalId=&after=&limit=)", Status: ok, Response: typeOf[AuditList](), Query: []QueryParam{str("formId", "only the records of this form"), str("principalId", "only the records of this principal"), integer("after", "only the records after this sequence number", 0, 0), integer("limit", "at most this many records", 1, 1000)}},

		{Method: post, Path: "/v1/runs", Summary: "Start a Run (201), or file an agent's template for a person (202)", Request: typeOf[SpawnRequest](), Status: created, Response: typeOf[run.Run](), Accepted: typeOf[run.PendingApproval]()},
		{Method: get, Path: "/v1/runs", Summary: "The Runs you own or oversee (?status=)", Status: ok, Response: typeOf[run.RunList](), Query: []QueryParam{str("status", "only the Runs with this status")}},
		{Method: post, Path: "/v1/runs/inspect", Summary: "One view of a Run, a Recipe or a tool", Request: typeOf[run.InspectRequest](), Status: ok},
		{Method: get, Path: "/v1/runs/{id}", Summary: "A Run's status view", Status: ok, Response: typeOf[run.Run]()},
		{Method: get, Path: "/v1/runs/{id}/views/{view}", Summary: "One view of a Run (status, trace, controls, …)", Status: ok, Query: []QueryParam{integer("lines", "how many log lines a view shows", 0, 0), str("source", "only the trace events of this source")}},
		{Method: get, Path: "/v1/runs/{id}/logs", Summary: "A Run's output (?stream=stdout|stderr&lines=)", Status: ok, ContentType: "text/plain", Query: []QueryParam{oneOf("stream", "which output (stdout when absent)", "stdout", "stderr"), integer("lines", "only the last lines", 0, 0)}},
		{Method: post, Path: "/v1/runs/{id}/controls", Summary: "Send a Run a Control", Request: typeOf[RunControlRequest](), Status: ok, Response: typeOf[run.ControlResult]()},
		{Method: post, Path: "/v1/runs/{id}/controls/claim", Summary: "A Run's service claims a Control of its generation", Request: typeOf[ClaimRequest](), Status: ok, Response: typeOf[store.Control]()},
		{Method: post, Path: "/v1/runs/{id}/controls/{cid}/handled", Summary: "A Run's service settles a Control as handled", Request: typeOf[SettleRequest](), Status: ok, Response: typeOf[store.Control]()},
		{Method: post, Path: "/v1/runs/{id}/controls/{cid}/failed", Summary: "A Run's service settles a Control as failed", Request: typeOf[SettleRequest](), Status: ok, Response: typeOf[store.Control]()},
		{Method: post, Path: "/v1/runs/{id}/trace", Summary: "Append a Trace event", Request: typeOf[run.TraceInput](), Status: created, Response: typeOf[store.TraceEvent]()},
		{Method: post, Path: "/v1/runs/{id}/kill", Summary: "Kill a Run's process", Status: ok, Response: typeOf[run.KillResult]()},
		{Method: post, Path: "/v1/runs/{id}/archive", Summary: "Archive an ended Run", Status: ok, Response: typeOf[run.ArchiveResult]()},
		{Method: post, Path: "/v1/runs/{id}/prune", Summary: "Delete an ended Run's state", Request: typeOf[RetainRequest](), Status: ok, Response: typeOf[run.PruneResult]()},

		{Method: get, Path: "/v1/proposals", Summary: "Command and tool proposals (?status=)", Status: ok, Response: typeOf[ProposalList](), Query: []QueryParam{oneOf("status", "only the proposals with this status", "pending", "approved", "declined")}},
		{Method: get, Path: "/v1/proposals/{id}", Summary: "One proposal", Status: ok, Response: typeOf[run.Proposal]()},
		{Method: post, Path: "/v1/proposals/{id}/approve", Summary: "A person approves a proposal", Status: ok, Response: typeOf[run.Proposal]()},
		{Method: post, Path: "/v1/proposals/{id}/decline", Summary: "A person declines a proposal", Request: typeOf[DecisionRequest](), Status: ok, Response: typeOf[run.Proposal]()},
		{Method: post, Path: "/v1/tools/{name}/publish", Summary: "A person publishes a registered tool", Status: ok},

		{Method: post, Path: "/v1/flows/programs", Summary: "Load a Flow program (201, or 202 when it waits for a person)", Status: created, Response: typeOf[ProgramView](), Accepted: typeOf[ProgramProposal](), Query: []QueryParam{{Name: "reason", Type: "string", MaxLength: 500, Description: "why the program is proposed, shown to the person who decides (plain text)"}, integer("deadline_seconds", "seconds a person has to decide a proposal before it is declined (the server's default when absent)", 1, 2592000)}},
		{Method: get, Path: "/v1/flows/programs", Summary: "Loaded Flow programs", Status: ok, Response: typeOf[ProgramList]()},
		{Method: get, Path: "/v1/flows/programs/{fingerprint}", Summary: "One program and its canonical form", Status: ok, Response: typeOf[ProgramDocument]()},
		{Method: post, Path: "/v1/flows/programs/{fingerprint}/{decision}", Summary: "A person activates or refuses a program", Request: typeOf[DecisionRequest](), Status: ok, Response: typeOf[flow.ProgramLoad]()},
		{Method: post, Path: "/v1/flows/instances", Summary: "Start a Flow instance", Request: typeOf[StartRequest](), Status: created, Response: typeOf[flow.Instance]()},
		{Method: get, Path: "/v1/flows/instances", Summary: "The Flow instances you may see", Status: ok, Response: typeOf[InstanceList]()},
		{Method: get, Path: "/v1/flows/instances/{id}", Summary: "An instance with its journal, receipts and pending approvals", Status: ok, Response: typeOf[InstanceView](), Query: []QueryParam{str("approval", "an approval id to report on, whatever its status")}},
		{Method: post, Path: "/v1/flows/instances/{id}/prescribe", Summary: "Ask the kernel for a prescription", Request: typeOf[flow.Request](), Status: ok, Response: typeOf[Prescription]()},
		{Method: post, Path: "/v1/flows/prescriptions/{id}/apply", Summary: "Apply a prescription", Request: typeOf[ApplyRequest](), Status: ok, Response: typeOf[flow.Receipt]()},
		{Method: get, Path: "/v1/flows/approvals", Summary: "Flow approvals (?instance=)", Status: ok, Response: typeOf[ApprovalList](), Query: []QueryParam{str("instance", "only the approvals of this instance")}},
		{Method: get, Path: "/v1/flows/approvals/{id}", Summary: "One approval", Status: ok, Response: typeOf[flow.Approval]()},
		{Method: post, Path: "/v1/flows/approvals/{id}/{decision}", Summary: "A person decides an approval, changing its parameters first when approving with values (web UI only)", Request: typeOf[ApprovalDecisionRequest](), Status: ok},

		{Method: post, Path: "/v1/screens", Summary: "Show a screen from an Omni-IR stream (the body)", RequestText: "text/plain", Status: created, Response: typeOf[ScreenSummary](), Query: []QueryParam{{Name: "secret", Type: "string", Repeated: true, Description: "a $key whose values are secret (the $ may be left out); repeat it for several"}}},
		{Method: get, Path: "/v1/screens", Summary: "Your screens", Status: ok, Response: typeOf[ScreenList]()},
		{Method: get, Path: "/v1/screens/{id}", Summary: "One screen's summary", Status: ok, Response: typeOf[ScreenSummary]()},
		{Method: http.MethodDelete, Path: "/v1/screens/{id}", Summary: "Delete a screen", Status: http.StatusNoContent},
		{Method: post, Path: "/v1/screens/{id}/updates", Summary: "Apply an update to a screen (Omni-IR lines in the body)", RequestText: "text/plain", Status: ok, Response: typeOf[ScreenUpdate]()},
	}
}

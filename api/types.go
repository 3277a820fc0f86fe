// Package api describes assent's HTTP API under /v1: the bodies that no
// domain package owns (health, readiness, the principal, list envelopes,
// request bodies, the views the server's parts compose) and the table of
// every route, from which the OpenAPI 3.1 document served at
// /v1/openapi.json is built.
//
// The bodies owned by a part keep their home: a control snapshot is a
// [control.Snapshot], a Run a [run.Run], a Flow instance a [flow.Instance].
// The route table names those types, so the server, the typed client in
// package client and the OpenAPI document read and write one set of
// types. Errors are [wire.Error] values under "error".
package api

import (
	"encoding/json"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// Health is the answer of GET /v1/health: the process is alive.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	// Store is the store's kind, "sqlite" or "postgres".
	Store string `json:"store"`
}

// Ready is the answer of GET /v1/ready. Status is "ready" with 200, or
// "not_ready" with 503 and Error set; Store ("ok" or "unreachable") and
// Leases ("ok" or "behind") say which check failed.
type Ready struct {
	Status  string      `json:"status"`
	Store   string      `json:"store"`
	Leases  string      `json:"leases"`
	Version string      `json:"version"`
	Node    string      `json:"node"`
	Error   *wire.Error `json:"error,omitempty"`
}

// Whoami is the answer of GET /v1/whoami: the principal that asks, with
// its supervisors named.
type Whoami struct {
	ID          string       `json:"id"`
	Kind        string       `json:"kind"`
	Name        string       `json:"name"`
	Grants      []string     `json:"grants"`
	Supervisors []Supervisor `json:"supervisors"`
	CreatedAt   time.Time    `json:"created_at"`
	Revoked     bool         `json:"revoked,omitempty"`
}

// Supervisor is a person who supervises a principal.
type Supervisor struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ControlList is the answer of GET /v1/controls.
type ControlList struct {
	Controls []control.Snapshot `json:"controls"`
}

// CommandAnswer is the answer of POST /v1/controls/execute: the registry's
// result and, when the command was refused, the error object beside its
// fields (docs/http.md, "Exceptions fixed by a contract").
type CommandAnswer struct {
	control.Result
	Error *wire.Error `json:"error,omitempty"`
	// AppliedUnderRule names the standing rule under which a value the
	// agent staged was applied at once, in the name of the person who
	// made the rule, without asking anyone.
	AppliedUnderRule string `json:"applied_under_rule,omitempty"`
	// Deadline is, for a staged value, when it is discarded if no person
	// decides it (RFC 3339); empty when it has none.
	Deadline string `json:"deadline,omitempty"`
}

// ExecuteRequest is the body of POST /v1/controls/execute. Value is sent
// only when set (a nil Value is no value; send json.RawMessage("null") to
// stage null).
type ExecuteRequest struct {
	Action     control.Action   `json:"action"`
	Identity   control.Identity `json:"identity"`
	Value      json.RawMessage  `json:"value,omitempty"`
	DurationMs int              `json:"durationMs,omitempty"`
	Revision   int64            `json:"revision,omitempty"`
	// Source is a service token's declared source (voice, tutorial, test
	// or user).
	Source string `json:"source,omitempty"`
	// DeadlineSeconds is, for stage, how long the value waits for a
	// person before it is discarded (1 to 2592000; default the server's
	// --decision-deadline for proposal).
	DeadlineSeconds int64 `json:"deadline_seconds,omitempty"`
	// EscalateTo is, for stage, the group (with members) the value is
	// routed to at its deadline, which then has as long again to decide;
	// it needs a deadline.
	EscalateTo string `json:"escalate_to,omitempty"`
}

// AuditList is the answer of GET /v1/audit, oldest record first.
type AuditList struct {
	Records []store.AuditRecord `json:"records"`
}

// ProposalList is the answer of GET /v1/proposals.
type ProposalList struct {
	Proposals []*run.Proposal `json:"proposals"`
}

// SpawnRequest is the body of POST /v1/runs: a Recipe by name, or an
// inline command template, and the Run's values.
type SpawnRequest struct {
	Recipe   string                     `json:"recipe,omitempty"`
	Template json.RawMessage            `json:"template,omitempty"`
	Values   map[string]json.RawMessage `json:"values,omitempty"`
	RunID    string                     `json:"run_id,omitempty"`
	// As is the Run's target, run:<id>, instead of RunID.
	As        string                  `json:"as,omitempty"`
	Artifacts map[string]run.Artifact `json:"artifacts,omitempty"`
	// Reason is why the caller asks, shown to the person who decides
	// when the spawn waits for approval (at most 500 characters).
	Reason string `json:"reason,omitempty"`
	// DeadlineSeconds is, when the spawn waits for approval, how long it
	// waits before it is declined with the reason "no decision before the
	// deadline" (1 to 2592000; default the server's --decision-deadline
	// for command).
	DeadlineSeconds int64 `json:"deadline_seconds,omitempty"`
	// EscalateTo is, when the spawn waits for approval, the group (with
	// members) it is routed to at its deadline, which then has as long
	// again to decide; it needs a deadline.
	EscalateTo string `json:"escalate_to,omitempty"`
}

// RunControlRequest is the body of POST /v1/runs/{id}/controls.
type RunControlRequest struct {
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// ClaimRequest is the body of POST /v1/runs/{id}/controls/claim: a Run's
// service claims the oldest pending Control of its generation, or the one
// with ID.
type ClaimRequest struct {
	ID         string `json:"id,omitempty"`
	InstanceID string `json:"run_instance_id,omitempty"`
}

// SettleRequest is the body of POST /v1/runs/{id}/controls/{cid}/handled
// and …/failed.
type SettleRequest struct {
	Error      string `json:"error,omitempty"`
	InstanceID string `json:"run_instance_id,omitempty"`
}

// RetainRequest is the body of POST /v1/runs/{id}/prune (and, empty, of
// kill and archive).
type RetainRequest struct {
	PreserveArtifacts bool `json:"preserve_artifacts,omitempty"`
}

// StartRequest is the body of POST /v1/flows/instances.
type StartRequest struct {
	// Program is a fingerprint or a program id.
	Program   string               `json:"program" minLength:"1" maxLength:"200" jsonschema:"The program id (its active version) or a fingerprint (sha256:…)."`
	Phase     string               `json:"phase" minLength:"1" maxLength:"128" jsonschema:"The phase to start in; for an agent, one of the program's entry phases."`
	ID        string               `json:"id,omitempty" maxLength:"128" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$" jsonschema:"The instance id to use; one is made up when left out."`
	Facts     map[string]flow.Fact `json:"facts,omitempty" jsonschema:"What the starter knows, by facet."`
	Objective string               `json:"objective,omitempty" maxLength:"128" jsonschema:"The objective the instance pursues."`
}

// DecisionRequest is the body of a person's decline of a proposal or of a
// Flow approval: the reason they give.
type DecisionRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ApprovalDecisionRequest is the body of a person's decision on a Flow
// approval: the reason of a decline, or, with approve, the parameter
// values the person changes before approving and the edition of the
// approval they read (its number of earlier changes; a decision on an
// older edition is refused APPROVAL_CHANGED).
type ApprovalDecisionRequest struct {
	Reason  string                     `json:"reason,omitempty"`
	Values  map[string]json.RawMessage `json:"values,omitempty"`
	Edition int                        `json:"edition,omitempty" minimum:"0"`
}

// ProgramView summarizes a stored Flow program. Status is active (it
// starts instances), proposed (it waits for a person's approval) or
// declined; LoadedBy is who loaded or proposed it ("operator" for the
// application or command line).
type ProgramView struct {
	ProgramID       string   `json:"program_id"`
	ProgramVersion  string   `json:"program_version"`
	RequiresRuntime string   `json:"requires_runtime"`
	Fingerprint     string   `json:"fingerprint"`
	Transitions     int      `json:"transitions"`
	Objectives      []string `json:"objectives"`
	Status          string   `json:"status,omitempty"`
	LoadedBy        string   `json:"loaded_by,omitempty"`
}

// ProgramList is the answer of GET /v1/flows/programs.
type ProgramList struct {
	Programs []ProgramView `json:"programs"`
}

// InstanceView is everything about a Flow instance its viewer may see:
// the answer of GET /v1/flows/instances/{id}.
type InstanceView struct {
	Instance  flow.Instance       `json:"instance"`
	Program   ProgramView         `json:"program"`
	Journal   []flow.JournalEntry `json:"journal"`
	Receipts  []flow.Receipt      `json:"receipts"`
	Approvals []flow.Approval     `json:"approvals"`
	// Closed are the approvals already decided or gone stale, with the
	// reason of a decline and what changed for a stale one.
	Closed []flow.Approval `json:"closed_approvals"`
	// Approval is the approval asked about, whatever its status.
	Approval *flow.Approval `json:"approval,omitempty"`
	// ApprovalNotes are what people wrote to the requester on that
	// approval in the inbox, oldest first.
	ApprovalNotes []DecisionNote `json:"approval_notes,omitempty"`
}

// DecisionNote is a text a person wrote to an agent on an item it filed:
// a note with an approval, a decline's reason or an answer without
// deciding.
type DecisionNote struct {
	// By is the person's principal id.
	By string `json:"by"`
	// Decision is approve, decline or respond.
	Decision string    `json:"decision"`
	Text     string    `json:"text"`
	At       time.Time `json:"at"`
}

// Prescription is the answer to a prescribe request: the kernel's
// decision and, when it waits for a person, the approval request filed
// for them.
type Prescription struct {
	Decision flow.Decision  `json:"decision"`
	Approval *flow.Approval `json:"approval,omitempty"`
	// Next says in words what the caller can do now.
	Next string `json:"next"`
}

// InstanceRow is a Flow instance in a list, with the name of the
// principal that owns it, so a supervisor sees which agent started it.
type InstanceRow struct {
	flow.Instance
	OwnerName string `json:"owner_name,omitempty"`
}

// InstanceList is the answer of GET /v1/flows/instances.
type InstanceList struct {
	Instances []InstanceRow `json:"instances"`
}

// ApprovalList is the answer of GET /v1/flows/approvals.
type ApprovalList struct {
	Approvals []flow.Approval `json:"approvals"`
}

// ProgramProposal is the 202 answer of POST /v1/flows/programs when the
// program waits for a person's approval: Status is "pending_approval",
// URL the inbox where a person decides and Next says what to do.
type ProgramProposal struct {
	Status  string      `json:"status"`
	Program ProgramView `json:"program"`
	URL     string      `json:"url"`
	Next    string      `json:"next"`
	// Deadline is when the proposal is declined with the reason "no
	// decision before the deadline" if no person decides it; absent when
	// it has none.
	Deadline time.Time `json:"deadline,omitzero"`
}

// ScreenSummary is the outcome of reading a screen's stream (SPEC 10.27's
// result): the answer of POST /v1/screens and GET /v1/screens/{id}.
type ScreenSummary struct {
	ID         string         `json:"id"`
	Components int            `json:"components"`
	Rejected   []screen.Issue `json:"rejected"`
	Outline    string         `json:"outline"`
	Ended      bool           `json:"ended"`
	URL        string         `json:"url,omitempty"`
}

// ScreenRow is a screen in the answer of GET /v1/screens.
type ScreenRow struct {
	ID         string    `json:"id"`
	Owner      string    `json:"owner"`
	Created    time.Time `json:"created"`
	Components int       `json:"components"`
	Ended      bool      `json:"ended"`
	URL        string    `json:"url"`
}

// ScreenList is the answer of GET /v1/screens.
type ScreenList struct {
	Screens []ScreenRow `json:"screens"`
}

// ScreenUpdate is the answer of POST /v1/screens/{id}/updates: 200 with
// Applied true once the update is saved, or 422 with Applied false, the
// Issues that refused it and the update_rejected error beside them.
type ScreenUpdate struct {
	Applied bool           `json:"applied"`
	Issues  []screen.Issue `json:"issues"`
	// Seq is the screen's sequence number after the update.
	Seq   int64       `json:"seq"`
	Error *wire.Error `json:"error,omitempty"`
}

// HostedControl is one control in a service's form declaration.
type HostedControl struct {
	ControlID string           `json:"controlId"`
	Subject   *control.Subject `json:"subject,omitempty"`
	Metadata  control.Metadata `json:"metadata"`
	Value     any              `json:"value"`
	State     *control.State   `json:"state,omitempty"`
}

// FormDeclaration is the body of POST /v1/forms/{formId}/controls: the
// controls a service hosts on the form, 1 to 1,000.
type FormDeclaration struct {
	Controls []HostedControl `json:"controls"`
}

// SetValueRequest is the body of PUT
// /v1/forms/{formId}/controls/{controlId}/value: the value the person set
// in the service's own application.
type SetValueRequest struct {
	Value   any              `json:"value"`
	Subject *control.Subject `json:"subject,omitempty"`
}

// ApplyRequest is the body of POST /v1/flows/prescriptions/{id}/apply:
// the values of the prescription's parameters.
type ApplyRequest struct {
	Parameters map[string]string `json:"parameters,omitempty"`
}

// ProgramDocument is the answer of GET /v1/flows/programs/{fingerprint}:
// the program's summary and its canonical JSON.
type ProgramDocument struct {
	Program   ProgramView     `json:"program"`
	Canonical json.RawMessage `json:"canonical"`
}

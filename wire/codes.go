package wire

import (
	"net/http"
	"slices"
)

//go:generate go test -run TestGeneratedFilesAreCurrent -update

// A CodeInfo is one row of the table of codes: the one place a code, its
// Go constant, its HTTP status and its documentation are written. The
// constants (codes_gen.go) and the error table of docs/http.md are
// generated from it; TestGeneratedFilesAreCurrent fails when either is
// stale and rewrites both with -update.
type CodeInfo struct {
	// Name is the name of the Go constant.
	Name string
	Code Code
	// Status is the HTTP status every route sends the code with.
	Status int
	// Retryable says whether the same request sent again may succeed.
	Retryable bool
	// Group is the heading the code is listed under.
	Group string
	// When says when the code is sent.
	When string
}

// Groups of codes, in the order they are listed.
const (
	groupRequest = "Requests that are malformed or refused for their content"
	groupWho     = "Who is asking and what they may do"
	groupState   = "State that changed or is in the way"
	groupLoad    = "Load and failures inside the server"
	groupControl = "Refusals of the control registry (docs/controls.md)"
	groupRuns    = "Runs (docs/runs.md)"
	groupFlows   = "The Flow kernel (docs/flows.md), spelled as the kernel spells them"
)

// Codes returns the table of every code, in the order docs/http.md lists
// them. A code missing from it is sent with 400 and is not retryable.
func Codes() []CodeInfo { return slices.Clone(codeTable) }

var codeTable = []CodeInfo{
	{"InvalidRequest", "invalid_request", http.StatusBadRequest, false, groupRequest, "malformed JSON, unknown fields, a value out of range"},
	{"InvalidParams", "invalid_params", http.StatusUnprocessableEntity, false, groupRequest, "the params break the rules; `data.issues` lists how"},
	{"UnsupportedVersion", "unsupported_version", http.StatusBadRequest, false, groupRequest, "a screen stream format newer than the server writes"},
	{"UnsupportedMediaType", "unsupported_media_type", http.StatusUnsupportedMediaType, false, groupRequest, "`/mcp` without `Content-Type: application/json`"},
	{"MethodNotAllowed", "method_not_allowed", http.StatusMethodNotAllowed, false, groupRequest, "the path exists for other methods, listed in `Allow`"},
	{"NotFound", "not_found", http.StatusNotFound, false, groupRequest, "it does not exist — or it belongs to someone else (the answers are the same)"},
	{"TooLarge", "too_large", http.StatusRequestEntityTooLarge, false, groupRequest, "a body over its limit"},
	{"LimitExceeded", "limit_exceeded", http.StatusRequestEntityTooLarge, false, groupRequest, "a field or a count over its limit"},
	{"UnknownTool", "unknown_tool", http.StatusForbidden, false, groupRequest, "no tool of that name, or one the caller may not see"},
	{"MutationBlocked", "mutation_blocked", http.StatusUnprocessableEntity, false, groupRequest, "a field a screen press reads has a problem, so nothing was checked further or sent"},
	{"UpdateRejected", "update_rejected", http.StatusUnprocessableEntity, false, groupRequest, "a screen update breaks the rules; `issues` lists how"},

	{"SignInRequired", "sign_in_required", http.StatusUnauthorized, false, groupWho, "no token, or an unknown, expired or revoked one"},
	{"Forbidden", "forbidden", http.StatusForbidden, false, groupWho, "the principal may not do this"},
	{"BadOrigin", "bad_origin", http.StatusForbidden, false, groupWho, "a cookie request that changes state without a same-origin `Origin` or the CSRF token"},
	{"HumanConfirmationRequired", "human_confirmation_required", http.StatusForbidden, false, groupWho, "only a person, in the web UI, may do this"},
	{"NotRouted", "not_routed", http.StatusForbidden, false, groupWho, "the decision is routed to other people (the agent's supervisors or a named group): only they and the workspace's owner may decide it"},
	{"SignInRequiredHuman", "sign_in_required_human", http.StatusForbidden, false, groupWho, "reserved: not sent by this release"},
	{"ConfirmationRequired", "confirmation_required", http.StatusConflict, false, groupWho, "a screen view's press needs a person's confirmation first"},

	{"Conflict", "conflict", http.StatusConflict, false, groupState, "the thing changed since you looked"},
	{"AlreadyAnswered", "already_answered", http.StatusConflict, false, groupState, "the person already answered this question; one person counts once towards its quorum"},
	{"AlreadyExists", "already_exists", http.StatusConflict, false, groupState, "something of that id exists (a Flow instance)"},
	{"IdempotencyConflict", "idempotency_conflict", http.StatusConflict, false, groupState, "the idempotency key was used for other params"},
	{"IdempotencyInProgress", "idempotency_in_progress", http.StatusConflict, true, groupState, "the request with that idempotency key is still being answered"},
	{"ToolChanged", "tool_changed", http.StatusConflict, false, groupState, "the tool of a screen press was replaced or removed after the press was prepared"},
	{"AlreadyDecided", "already_decided", http.StatusConflict, false, groupState, "someone else decided first; `data` says who and how (status, decided_by, decided_at, and the receipt or reason)"},
	{"Stale", "stale", http.StatusConflict, false, groupState, "an inbox item changed since its card was read, so the decision was not carried out; read the inbox again"},

	{"RateLimited", "rate_limited", http.StatusTooManyRequests, true, groupLoad, "over the per-principal rate, or too many sign-in attempts from one address; wait for `Retry-After` seconds"},
	{"TooManySessions", "too_many_sessions", http.StatusTooManyRequests, true, groupLoad, "the token already holds its cap of MCP sessions and every one is busy"},
	{"Internal", "internal", http.StatusInternalServerError, true, groupLoad, "the server failed (a bug)"},
	{"ServerError", "server_error", http.StatusInternalServerError, true, groupLoad, "an `error` event of a screen stream (SPEC 10.5)"},
	{"ToolFailed", "tool_failed", http.StatusInternalServerError, true, groupLoad, "a tool failed"},
	{"Unavailable", "unavailable", http.StatusServiceUnavailable, true, groupLoad, "the server cannot answer now"},
	{"ModelUnverified", "model_unverified", http.StatusServiceUnavailable, true, groupLoad, "reserved: not sent by this release"},
	{"StoreUnavailable", "store_unavailable", http.StatusServiceUnavailable, true, groupLoad, "the store could not be reached or could not write (a full disk, a lost or refused database connection, a database shutting down); nothing changed unless `data.committed` says so"},

	{"StaleRevision", "stale_revision", http.StatusConflict, false, groupControl, "the proposal's revision is not the one staged now"},
	{"StagedValueStale", "staged_value_stale", http.StatusConflict, false, groupControl, "the live value changed since the proposal was staged"},
	{"NoStagedValue", "no_staged_value", http.StatusConflict, false, groupControl, "nothing is staged to apply or discard"},
	{"NothingToUndo", "nothing_to_undo", http.StatusConflict, false, groupControl, "the control has no change to undo"},
	{"SensitiveControl", "sensitive_control", http.StatusForbidden, false, groupControl, "the control is sensitive and refuses this command"},
	{"ControlNotWritable", "control_not_writable", http.StatusForbidden, false, groupControl, "the control refuses every change"},
	{"ControlNotEditable", "control_not_editable", http.StatusForbidden, false, groupControl, "the control cannot be edited now"},
	{"ConsentRequired", "consent_required", http.StatusForbidden, false, groupControl, "the person has not consented to this"},
	{"Denied", "denied", http.StatusForbidden, false, groupControl, "the application's policy refused the command"},
	{"Unsupported", "unsupported", http.StatusForbidden, false, groupControl, "the control does not support the command"},
	{"InvalidValue", "invalid_value", http.StatusForbidden, false, groupControl, "the value breaks the control's constraints"},
	{"CommandFailed", "command_failed", http.StatusBadGateway, true, groupControl, "the application failed to carry out the command"},
	{"ControlBackpressure", "control_backpressure", http.StatusTooManyRequests, true, groupControl, "too many commands wait; `data` carries the figures"},

	{"RunActive", "run_active", http.StatusConflict, false, groupRuns, "a Run of that id is active"},
	{"RunArchived", "run_archived", http.StatusConflict, false, groupRuns, "the Run is archived"},
	{"NotRunning", "not_running", http.StatusConflict, false, groupRuns, "the Run is not running"},
	{"NotTerminal", "not_terminal", http.StatusConflict, false, groupRuns, "the Run has not ended"},
	{"TerminalState", "terminal_state", http.StatusConflict, false, groupRuns, "the Run has ended"},
	{"GenerationMismatch", "generation_mismatch", http.StatusConflict, false, groupRuns, "the request names another generation of the Run"},
	{"JournalIntegrity", "control_journal_integrity", http.StatusConflict, false, groupRuns, "the Run's Control journal does not add up"},
	{"ToolExists", "tool_exists", http.StatusConflict, false, groupRuns, "a tool of that name is registered"},
	{"ToolNameCollision", "tool_name_collision", http.StatusConflict, false, groupRuns, "the tool's name collides with another tool's"},
	{"PreserveFailed", "preserve_failed", http.StatusConflict, false, groupRuns, "the Run's artifacts could not be kept, so nothing was deleted"},
	{"StartFailed", "start_failed", http.StatusInternalServerError, false, groupRuns, "the Run's process could not start"},
	{"EndpointNotReady", "endpoint_not_ready", http.StatusServiceUnavailable, true, groupRuns, "the Run's service is not listening yet"},
	{"NodeUnavailable", "node_unavailable", http.StatusServiceUnavailable, true, groupRuns, "the node that supervises the Run cannot be reached"},
	{"DeliveryFailed", "delivery_failed", http.StatusServiceUnavailable, false, groupRuns, "the Control could not be delivered to the Run"},
	{"ProposalDecided", "proposal_decided", http.StatusConflict, false, groupRuns, "the proposal was decided already"},
	{"StaleProposal", "stale_proposal", http.StatusConflict, false, groupRuns, "what the proposal would run changed since it was filed"},
	{"InvalidRecipe", "invalid_recipe", http.StatusBadRequest, false, groupRuns, "the Recipe does not validate"},
	{"InvalidControl", "invalid_control", http.StatusBadRequest, false, groupRuns, "the Control's input does not validate"},
	{"InvalidTraceEvent", "invalid_trace_event", http.StatusBadRequest, false, groupRuns, "the Trace event does not validate"},
	{"UndeclaredAction", "undeclared_action", http.StatusBadRequest, false, groupRuns, "the Run declares no Control of that action"},
	{"ProcessIdentity", "process_identity", http.StatusBadRequest, false, groupRuns, "the Run's process is no longer the one recorded"},
	{"ReservedToolName", "reserved_tool_name", http.StatusBadRequest, false, groupRuns, "the tool name is a built-in tool's"},
	{"SandboxUnavailable", "sandbox_unavailable", http.StatusBadRequest, false, groupRuns, "the Run needs a sandbox this host cannot give"},
	{"ApprovalRequired", "approval_required", http.StatusBadRequest, false, groupRuns, "the command needs a person's approval, and this server keeps no proposals"},

	{"CapabilityDenied", "CAPABILITY_DENIED", http.StatusForbidden, false, groupFlows, "the program may not use the capability"},
	{"CapabilityNotDeclared", "CAPABILITY_NOT_DECLARED", http.StatusForbidden, false, groupFlows, "the program does not declare the capability"},
	{"ProgramNotActive", "PROGRAM_NOT_ACTIVE", http.StatusForbidden, false, groupFlows, "the program waits for a person or was refused"},
	{"StalePrescription", "STALE_PRESCRIPTION", http.StatusConflict, false, groupFlows, "the instance moved since the prescription"},
	{"PrescriptionExpired", "PRESCRIPTION_EXPIRED", http.StatusConflict, false, groupFlows, "the prescription expired"},
	{"RevisionConflict", "REVISION_CONFLICT", http.StatusConflict, true, groupFlows, "another step committed first; send it again"},
	{"ApprovalClosed", "APPROVAL_CLOSED", http.StatusConflict, false, groupFlows, "the approval was decided or withdrawn"},
	{"AlreadyApproved", "ALREADY_APPROVED", http.StatusConflict, false, groupFlows, "the person already approved this approval; one person counts once towards its quorum"},
	{"MorePeopleNeeded", "MORE_PEOPLE_NEEDED", http.StatusConflict, false, groupFlows, "the person's approval is recorded; more people must approve before anything is applied"},
	{"ApprovalChanged", "APPROVAL_CHANGED", http.StatusConflict, false, groupFlows, "a person changed the approval's values since the card was read; read it again"},
	{"EditRefused", "EDIT_REFUSED", http.StatusBadRequest, false, groupFlows, "the changed values break a rule the requester's own request must follow; nothing changed"},
	{"ParameterInvalid", "PARAMETER_INVALID", http.StatusBadRequest, false, groupFlows, "a parameter value breaks the rule the application set on it"},
	{"ParameterNotEditable", "PARAMETER_NOT_EDITABLE", http.StatusBadRequest, false, groupFlows, "the parameter cannot be changed before approving (a secret one)"},
	{"NotInGroup", "NOT_IN_GROUP", http.StatusForbidden, false, groupFlows, "the approval asks for people of a group the person is not a member of"},
	{"RecoveryRequired", "RECOVERY_REQUIRED", http.StatusConflict, false, groupFlows, "the instance needs recovery first"},
	{"NotPrescribed", "NOT_PRESCRIBED", http.StatusConflict, false, groupFlows, "no prescription of that id waits"},
	{"EffectFailed", "EFFECT_FAILED", http.StatusUnprocessableEntity, false, groupFlows, "the effect ran and failed"},
	{"EffectUnavailable", "EFFECT_UNAVAILABLE", http.StatusUnprocessableEntity, false, groupFlows, "no handler of the effect is registered"},
	{"EffectCapabilityDenied", "EFFECT_CAPABILITY_DENIED", http.StatusUnprocessableEntity, false, groupFlows, "the effect's capability is denied"},
	{"ProgramInvalid", "PROGRAM_INVALID", http.StatusBadRequest, false, groupFlows, "the program document is malformed or breaks a rule of the manifest; `data.errors` lists each"},
	{"ProgramSchemaUnsupported", "PROGRAM_SCHEMA_UNSUPPORTED", http.StatusBadRequest, false, groupFlows, "the program's `schema_version` is one this runtime does not implement"},
	{"RuntimeTooOld", "RUNTIME_TOO_OLD", http.StatusBadRequest, false, groupFlows, "the program's `requires_runtime` is above this runtime's version"},
	{"StateInvalid", "STATE_INVALID", http.StatusBadRequest, false, groupFlows, "an instance's state or principal is malformed"},
	{"ObservationInvalid", "OBSERVATION_INVALID", http.StatusBadRequest, false, groupFlows, "the observation names a transition that is not observed-external, does not apply, or fails its verifier"},
	{"ProgramDrift", "PROGRAM_DRIFT", http.StatusBadRequest, false, groupFlows, "the instance's program is not the one the request was resolved against"},
	{"ObjectiveUnknown", "OBJECTIVE_UNKNOWN", http.StatusBadRequest, false, groupFlows, "the program has no objective of that name"},
	{"ObjectiveConflict", "OBJECTIVE_CONFLICT", http.StatusBadRequest, false, groupFlows, "the request names an objective other than the instance's"},
	{"TransitionUnknown", "TRANSITION_UNKNOWN", http.StatusBadRequest, false, groupFlows, "the program has no transition of that id"},
	{"TransitionObservedOnly", "TRANSITION_OBSERVED_ONLY", http.StatusBadRequest, false, groupFlows, "the transition is only observed, never prescribed"},
	{"TransitionNotApplicable", "TRANSITION_NOT_APPLICABLE", http.StatusBadRequest, false, groupFlows, "the transition does not apply in the instance's phase and facts"},
	{"ParameterUnknown", "PARAMETER_UNKNOWN", http.StatusBadRequest, false, groupFlows, "the request passes a parameter the transition does not declare"},
}

// codeIndex finds a code's row.
var codeIndex = func() map[Code]CodeInfo {
	m := make(map[Code]CodeInfo, len(codeTable))
	for _, c := range codeTable {
		m[c.Code] = c
	}
	return m
}()

package run

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/assent-run/assent/tool"
)

// Status is the derived status of a Run generation.
type Status string

// Statuses of a Run. Only StatusRunning is not terminal.
const (
	StatusRunning   Status = "running"
	StatusDone      Status = "done"
	StatusFailed    Status = "failed"
	StatusExited    Status = "exited"
	StatusCancelled Status = "cancelled"
	StatusKilled    Status = "killed"
	// StatusLost is the status of a Run whose supervising node stopped
	// renewing its lease (it died, or lost the store): another node
	// marked it lost, and the Run's view says which node and when (Lost).
	// Whatever its process still does is no longer supervised.
	StatusLost Status = "lost"
)

// Terminal reports whether s is a terminal status.
func (s Status) Terminal() bool { return s != StatusRunning }

// Terminal reports whether status is a terminal Run status.
func Terminal(status Status) bool { return status.Terminal() }

// Timestamps in views are strings in the canonical journal form of
// store.FormatTime: UTC with milliseconds, as in 2026-01-01T00:00:00.000Z.

// Run is the derived status view of a Run: what Status, Spawn and List
// answer, and inspect run:<id> view=status.
type Run struct {
	ID         string `json:"run"`
	InstanceID string `json:"run_instance_id"`
	Generation int    `json:"generation"`
	Status     Status `json:"status"`
	OwnerID    string `json:"owner_id"`
	// PID is the process group leader; ProcessIdentity tells whether the
	// live process is still the one recorded (valid, dead_pid,
	// owner_mismatch or unsupported_proof), other_node when another
	// node supervises the Run and its process cannot be checked here, or
	// starting while this node starts its process (pid 0).
	PID             int    `json:"pid"`
	ProcessIdentity string `json:"process_identity_status"`
	StateSchema     string `json:"state_schema"`
	StateDir        string `json:"state_dir"`
	StdoutLog       string `json:"stdout_log"`
	StderrLog       string `json:"stderr_log"`
	CreatedAt       string `json:"created_at"`
	StartedAt       string `json:"started_at"`
	EndedAt         string `json:"ended_at,omitempty"`
	// LaunchKind is "spawn" or "tool"; Recipe and Tool name what started
	// the Run, when anything did.
	LaunchKind string `json:"launch_kind"`
	Recipe     string `json:"recipe,omitempty"`
	Tool       string `json:"tool,omitempty"`
	// Control lists the Control actions the Run's Recipe declares.
	Control   []string                 `json:"control"`
	ExitCode  *int                     `json:"exit_code,omitempty"`
	Artifacts map[string]ArtifactState `json:"artifacts,omitempty"`
	// StderrHead is the redacted start of stderr of a failed or exited Run.
	StderrHead string `json:"stderr_head,omitempty"`
	Archived   bool   `json:"archived,omitempty"`
	ArchiveDir string `json:"archive_dir,omitempty"`
	// Node names the node that started the current generation and
	// supervises it, when the Manager has a node name.
	Node string `json:"node,omitempty"`
	// Lost says which node lost the Run and when; set when Status is
	// StatusLost.
	Lost *Lost `json:"lost,omitempty"`
	// Reused is set when Spawn answered with a live singleton generation
	// instead of starting a new one.
	Reused bool `json:"reused,omitempty"`
}

// Compact implements View.
func (v *Run) Compact() string { return "run=" + v.ID + " view=status" }

// ArtifactState is a declared artifact as a view shows it.
type ArtifactState struct {
	Path      string `json:"path"`
	Exists    bool   `json:"exists"`
	Kind      string `json:"kind,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Required  bool   `json:"required,omitempty"`
	// Size is set when the artifact exists.
	Size *int64 `json:"size,omitempty"`
}

// KillResult is the outcome of Kill. A Run that is not running is not
// killed: Killed is false and Reason says why.
type KillResult struct {
	Killed          bool   `json:"killed"`
	Stopped         bool   `json:"stopped"`
	Reason          string `json:"reason,omitempty"`
	Status          Status `json:"status,omitempty"`
	ProcessIdentity string `json:"process_identity_status,omitempty"`
	PID             int    `json:"pid,omitempty"`
	Signal          string `json:"signal,omitempty"`
	// SignalTarget is "processGroup", or "process" when the group was
	// already gone.
	SignalTarget string `json:"signal_target,omitempty"`
	StateDir     string `json:"state_dir,omitempty"`
	// Node names the node that supervises the Run, when the kill was
	// passed to it.
	Node string `json:"node,omitempty"`
}

// ArchiveResult is the outcome of Archive; it is also the content of the
// tombstone left at the Run's address.
type ArchiveResult struct {
	Archived         bool   `json:"archived"`
	ArchiveDir       string `json:"archive_dir"`
	OriginalStateDir string `json:"original_state_dir"`
	Run              string `json:"run"`
	Status           Status `json:"status"`
	TS               string `json:"ts"`
}

// PruneResult is the outcome of Prune.
type PruneResult struct {
	Pruned bool `json:"pruned"`
	// PreservedArtifacts maps an artifact name to the path of its copy.
	PreservedArtifacts map[string]string `json:"preserved_artifacts"`
	Run                string            `json:"run"`
	StateDir           string            `json:"state_dir"`
	TS                 string            `json:"ts"`
}

// ControlDelivery is the outcome of a declared Control action: admitted to
// the journal and written to the generation's endpoint.
type ControlDelivery struct {
	Action       string      `json:"action"`
	Bytes        int         `json:"bytes"`
	ControlID    string      `json:"control_id"`
	Delivery     string      `json:"delivery"`
	EndpointType string      `json:"endpoint_type"`
	NextActions  []tool.Next `json:"next_actions"`
	Run          string      `json:"run"`
	InstanceID   string      `json:"run_instance_id"`
	// Node names the node that supervises the Run, when it is not the
	// node that answered: that node delivers the Control.
	Node string `json:"node,omitempty"`
	// Message, when set, says what the delivery state means and what to
	// do next (Delivery "queued": the supervising node has not delivered
	// it yet).
	Message string `json:"message,omitempty"`
}

// ControlResult is the outcome of Apply: exactly one field is set, the
// delivery of a declared action or the result of the runtime action kill,
// archive or prune. It encodes as that one result.
type ControlResult struct {
	Delivery *ControlDelivery
	Kill     *KillResult
	Archive  *ArchiveResult
	Prune    *PruneResult
}

// MarshalJSON encodes the one result r holds.
func (r ControlResult) MarshalJSON() ([]byte, error) {
	switch {
	case r.Delivery != nil:
		return json.Marshal(r.Delivery)
	case r.Kill != nil:
		return json.Marshal(r.Kill)
	case r.Archive != nil:
		return json.Marshal(r.Archive)
	case r.Prune != nil:
		return json.Marshal(r.Prune)
	}
	return []byte("{}"), nil
}

// View is one inspection view. Its JSON encoding is the view; Compact is
// its one-line text summary.
//
// Manager.Inspect answers with *RuntimeStatus, *RunList, *Triage,
// *RecipesSummary, *Run, *RecipeView, *TraceView or *ControlView;
// ToolSet.Inspect adds the views of tools and proposals.
type View interface {
	Compact() string
}

// RuntimeStatus is inspect runtime view=status.
type RuntimeStatus struct {
	AutomaticReview bool   `json:"automatic_review"`
	RunRoot         string `json:"run_root"`
	StateSchema     string `json:"state_schema"`
	Version         string `json:"version"`
}

// Compact implements View.
func (v *RuntimeStatus) Compact() string {
	return "runtime version=" + v.Version + " state_schema=" + StateSchema + " automatic_review=false"
}

// RunList is inspect runtime view=runs: the caller's Runs.
type RunList struct {
	OwnerSession string `json:"owner_session"`
	Runs         []Run  `json:"runs"`
}

// Compact implements View.
func (v *RunList) Compact() string { return "runtime runs=" + strconv.Itoa(len(v.Runs)) }

// Triage is inspect runtime view=triage: what needs attention across the
// caller's Runs. Every list holds at most 40 entries; the counts are
// exact.
type Triage struct {
	FailedRuns             []string            `json:"failed_runs"`
	FailedRunCount         int                 `json:"failed_run_count"`
	FailedRunDetails       []FailedRun         `json:"failed_run_details"`
	PendingControlCount    int                 `json:"pending_control_count"`
	PendingControls        []PendingControl    `json:"pending_controls"`
	StaleControlCount      int                 `json:"stale_control_count"`
	StaleControls          []PendingControl    `json:"stale_controls"`
	BackpressuredRunCount  int                 `json:"backpressured_run_count"`
	BackpressuredRuns      []BackpressuredRun  `json:"backpressured_runs"`
	ControlDiagnosticCount int                 `json:"control_diagnostic_count"`
	ControlDiagnostics     []ControlDiagnostic `json:"control_diagnostics"`
	TraceDiagnosticCount   int                 `json:"trace_diagnostic_count"`
	TraceDiagnostics       []TraceDiagnostic   `json:"trace_diagnostics"`
	AttentionEvents        []AttentionEvent    `json:"attention_events"`
	NextActions            []tool.Next         `json:"next_actions"`
}

// Compact implements View.
func (v *Triage) Compact() string {
	return fmt.Sprintf("runtime failed=%d pending_controls=%d stale_controls=%d backpressured=%d incomplete_trace=%d attention=%d",
		len(v.FailedRuns), v.PendingControlCount, v.StaleControlCount, v.BackpressuredRunCount, v.TraceDiagnosticCount, len(v.AttentionEvents))
}

// FailedRun is a failed Run in the triage.
type FailedRun struct {
	Run        string `json:"run"`
	ExitCode   *int   `json:"exit_code"`
	StderrHead string `json:"stderr_head,omitempty"`
}

// PendingControl is a pending Control in the triage, with the reason it
// is (or is not yet) stale.
type PendingControl struct {
	Run    string `json:"run"`
	ID     string `json:"id"`
	Action string `json:"action"`
	Status string `json:"status"`
	// Reason is within_age_threshold, age_threshold_reached,
	// run_terminal, run_generation_replaced or
	// run_generation_unavailable.
	Reason string `json:"reason"`
	AgeMS  int64  `json:"age_ms"`
	Stale  bool   `json:"stale,omitempty"`
}

// BackpressuredRun is a Run whose journal holds the most pending Controls
// it may.
type BackpressuredRun struct {
	Run          string `json:"run"`
	Pending      int    `json:"pending"`
	PendingLimit int    `json:"pending_limit"`
	JournalBytes int    `json:"journal_bytes"`
}

// ControlDiagnostic is a structurally invalid journal record: its line
// (from 1) and the reason.
type ControlDiagnostic struct {
	Run    string `json:"run,omitempty"`
	Reason string `json:"reason"`
	Line   int    `json:"line"`
}

// TraceSummary describes a retained Trace and what compaction dropped.
type TraceSummary struct {
	HistoryComplete        bool  `json:"history_complete"`
	Compacted              bool  `json:"compacted"`
	CompactionsTotal       int64 `json:"compactions_total"`
	DroppedEvents          int64 `json:"dropped_events"`
	DroppedBytes           int64 `json:"dropped_bytes"`
	DroppedEventCountExact bool  `json:"dropped_event_count_exact"`
	RetainedEvents         int   `json:"retained_events"`
	RetainedBytes          int   `json:"retained_bytes"`
}

// TraceDiagnostic is a Run whose Trace was compacted, in the triage.
type TraceDiagnostic struct {
	Run string `json:"run"`
	TraceSummary
}

// AttentionEvent is a Trace event that asks for attention (notify,
// followup or steer).
type AttentionEvent struct {
	Run       string `json:"run"`
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Attention string `json:"attention"`
	Summary   string `json:"summary"`
	TS        string `json:"ts"`
}

// RecipesSummary is inspect recipes view=summary: the Recipe files under
// <data>/recipes.
type RecipesSummary struct {
	Active      []RecipeInfo  `json:"active"`
	Invalid     []RecipeIssue `json:"invalid"`
	Disabled    []RecipeIssue `json:"disabled"`
	Shadowed    []string      `json:"shadowed"`
	Diagnostics []string      `json:"diagnostics"`
	Root        string        `json:"root"`
	Counts      RecipeCounts  `json:"counts"`
	NextActions []tool.Next   `json:"next_actions"`
}

// Compact implements View.
func (v *RecipesSummary) Compact() string {
	return fmt.Sprintf("recipes active=%d invalid=%d disabled=%d", v.Counts.Active, v.Counts.Invalid, v.Counts.Disabled)
}

// RecipeInfo is an active Recipe file.
type RecipeInfo struct {
	ID          string   `json:"id"`
	Path        string   `json:"path"`
	Description string   `json:"description"`
	Args        []string `json:"args"`
	Control     []string `json:"control"`
	Async       bool     `json:"async"`
	Singleton   bool     `json:"singleton"`
	Disabled    bool     `json:"disabled"`
	Invalid     bool     `json:"invalid"`
	SourceKind  string   `json:"source_kind"`
}

// RecipeIssue is a Recipe file that is disabled or cannot be used.
type RecipeIssue struct {
	ID      string `json:"id"`
	Path    string `json:"path"`
	Invalid bool   `json:"invalid,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// RecipeCounts counts the Recipe files by state.
type RecipeCounts struct {
	Active   int `json:"active"`
	Invalid  int `json:"invalid"`
	Disabled int `json:"disabled"`
}

// RecipeView is inspect run:<id> view=recipe: how the Run was launched,
// with secrets masked.
type RecipeView struct {
	Identity RecipeIdentity `json:"identity"`
	Launch   LaunchView     `json:"launch"`
	// Definition is the redacted Recipe (or template) as given.
	Definition  any      `json:"definition"`
	Diagnostics []string `json:"diagnostics"`
}

// Compact implements View.
func (v *RecipeView) Compact() string { return "run=" + v.Identity.Run + " view=recipe" }

// RecipeIdentity names what launched a Run.
type RecipeIdentity struct {
	Run          string `json:"run"`
	LaunchKind   string `json:"launch_kind"`
	LaunchSource string `json:"launch_source"`
	Recipe       string `json:"recipe,omitempty"`
	RecipeStem   string `json:"recipe_stem,omitempty"`
	// SourceKind is user_registry_capability for a Recipe file,
	// inline_template otherwise.
	SourceKind string `json:"source_kind"`
	Tool       string `json:"tool,omitempty"`
	Singleton  bool   `json:"singleton,omitempty"`
}

// LaunchView is the resolved launch of a Run.
type LaunchView struct {
	Cwd       string                   `json:"cwd"`
	Template  string                   `json:"template"`
	Values    map[string]string        `json:"values"`
	Control   []string                 `json:"control"`
	Artifacts map[string]ArtifactState `json:"artifacts"`
}

// TraceView is inspect run:<id> view=trace: the newest items of the Trace,
// the Control journal, the logs and the artifacts, newest first.
type TraceView struct {
	Run     string       `json:"run"`
	Source  string       `json:"source"`
	Summary TraceSummary `json:"summary"`
	Items   []TraceItem  `json:"items"`
}

// Compact implements View.
func (v *TraceView) Compact() string { return "run=" + v.Run + " view=trace" }

// TraceItem is one item of a TraceView. Source is lifecycle, runtime,
// control, process or artifact.
type TraceItem struct {
	ID      string      `json:"id"`
	TS      string      `json:"ts"`
	Source  string      `json:"source"`
	Kind    string      `json:"kind"`
	Summary string      `json:"summary"`
	Level   string      `json:"level,omitempty"`
	Detail  TraceDetail `json:"detail"`
}

// TraceDetail is the detail of a TraceItem; which fields are set depends
// on its source: Attention and Data for Trace events, the Control record
// for control items, Tail for process logs, Name and Path for artifacts.
type TraceDetail struct {
	Attention string `json:"attention,omitempty"`
	// Data is the event's redacted data, or {preview, truncated} when
	// it is too long to show.
	Data any    `json:"data,omitempty"`
	Tail string `json:"tail,omitempty"`
	Name string `json:"name,omitempty"`
	Path string `json:"path,omitempty"`
	*ControlRecord
}

// ControlView is inspect run:<id> view=control: the state of the Control
// journal of the Run's current generation.
type ControlView struct {
	Run             string              `json:"run"`
	InstanceID      string              `json:"run_instance_id"`
	Status          Status              `json:"status"`
	Pending         int                 `json:"pending"`
	PendingLimit    int                 `json:"pending_limit"`
	Available       int                 `json:"available"`
	Backpressured   bool                `json:"backpressured"`
	JournalBytes    int                 `json:"journal_bytes"`
	JournalLimit    int                 `json:"journal_limit"`
	StalePending    int                 `json:"stale_pending"`
	OldestPendingAt string              `json:"oldest_pending_at,omitempty"`
	Diagnostics     []ControlDiagnostic `json:"diagnostics"`
	// ActorActions are the declared actions; RuntimeActions those the
	// runtime offers in the Run's status (kill, or archive and prune).
	ActorActions   []string        `json:"actor_actions"`
	RuntimeActions []string        `json:"runtime_actions"`
	RecentControls []ControlRecord `json:"recent_controls"`
	Endpoint       *Endpoint       `json:"endpoint,omitempty"`
}

// Compact implements View.
func (v *ControlView) Compact() string { return "run=" + v.Run + " view=control" }

// Endpoint is where a running generation reads its Controls.
type Endpoint struct {
	Path string `json:"path"`
	Type string `json:"type"`
}

// ControlRecord is a journal record as views show it: strings cut to 160
// characters, the error to 320, the input redacted and bounded.
type ControlRecord struct {
	ID          string `json:"id"`
	InstanceID  string `json:"run_instance_id"`
	Action      string `json:"action"`
	Status      string `json:"status"`
	QueuedAt    string `json:"queued_at,omitempty"`
	DeliveredAt string `json:"delivered_at,omitempty"`
	ClaimedAt   string `json:"claimed_at,omitempty"`
	HandledAt   string `json:"handled_at,omitempty"`
	FailedAt    string `json:"failed_at,omitempty"`
	Input       any    `json:"input,omitempty"`
	Error       string `json:"error,omitempty"`
	SenderID    string `json:"sender_id,omitempty"`
}

// PendingApproval is the answer to a spawn or registration filed for a
// person's approval (Status is StatusPendingApproval). Run or Tool names
// what the proposal would create.
type PendingApproval struct {
	Status   string `json:"status"`
	Proposal string `json:"proposal"`
	Kind     string `json:"kind"`
	Run      string `json:"run,omitempty"`
	Tool     string `json:"tool,omitempty"`
	URL      string `json:"url"`
	Message  string `json:"message"`
	Script   string `json:"script"`
	WorkDir  string `json:"work_dir"`
	// Deadline is when the proposal is declined if no person decides it
	// (RFC 3339), empty when it has none.
	Deadline    string      `json:"deadline,omitempty"`
	NextActions []tool.Next `json:"next_actions"`
}

// Proposal is the view of a proposal: what a person approves or
// declines, with secret values masked.
type Proposal struct {
	ID       string `json:"proposal"`
	Kind     string `json:"kind"`
	Status   string `json:"status"`
	Target   string `json:"target"`
	Proposer string `json:"proposer"`
	// Recipe is the proposed definition as filed.
	Recipe   any                        `json:"recipe"`
	Script   string                     `json:"script"`
	WorkDir  string                     `json:"work_dir"`
	EnvNames []string                   `json:"env_names"`
	Controls []string                   `json:"controls"`
	Values   map[string]json.RawMessage `json:"values"`
	// CreatedAt and DecidedAt are in the canonical journal form.
	CreatedAt string `json:"created_at"`
	URL       string `json:"url"`
	// DecidedBy is set once the proposal is decided.
	DecidedBy *string `json:"decided_by,omitempty"`
	DecidedAt string  `json:"decided_at,omitempty"`
	// Reason is the deciding person's reason for a decline (or why an
	// approval could not be carried out).
	Reason string `json:"reason,omitempty"`
	// Why is the proposer's own reason for asking, as the person saw it.
	Why string `json:"why,omitempty"`
	// Notes are what people wrote to the proposer on it, oldest first.
	Notes []ProposalNote `json:"notes,omitempty"`
	// Result is what carrying out an approved proposal answered.
	Result      any         `json:"result,omitempty"`
	NextActions []tool.Next `json:"next_actions,omitempty"`
}

// Compact implements View.
func (v *Proposal) Compact() string {
	return "proposal=" + v.ID + " kind=" + v.Kind + " status=" + v.Status
}

// Publication is the outcome of ToolSet.Publish.
type Publication struct {
	Tool        string `json:"tool"`
	Owner       string `json:"owner"`
	Published   bool   `json:"published"`
	PublishedBy string `json:"published_by"`
	PublishedAt string `json:"published_at"`
}

// ProposalNote is a text a person wrote to the proposer on a proposal.
type ProposalNote struct {
	// By is the person's principal id.
	By string `json:"by"`
	// Decision is approve (a note with the approval), decline (the
	// decline's reason) or respond (an answer without deciding).
	Decision string `json:"decision"`
	Text     string `json:"text"`
	// At is in the canonical journal form.
	At string `json:"at"`
}

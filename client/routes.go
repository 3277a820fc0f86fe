package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// Health reads GET /v1/health: whether the process is alive.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.Do(ctx, http.MethodGet, "/v1/health", nil, &h)
	return h, err
}

// Ready reads GET /v1/ready. A node that is not ready answers 503: Ready
// returns its body, which says which check failed, with the *Error.
func (c *Client) Ready(ctx context.Context) (api.Ready, error) {
	var r api.Ready
	status, data, err := c.send(ctx, http.MethodGet, "/v1/ready", nil)
	if err != nil {
		return r, err
	}
	if status/100 == 2 {
		return r, decode(data, &r, http.MethodGet, "/v1/ready")
	}
	_ = json.Unmarshal(data, &r) // a 503 still says which check failed
	return r, answerError(status, data)
}

// OpenAPI returns the server's OpenAPI 3.1 document as it sends it.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.Do(ctx, http.MethodGet, api.OpenAPIPath, nil, &doc)
	return doc, err
}

// Whoami returns the principal the client's token stands for.
func (c *Client) Whoami(ctx context.Context) (api.Whoami, error) {
	var w api.Whoami
	err := c.Do(ctx, http.MethodGet, "/v1/whoami", nil, &w)
	return w, err
}

// Controls lists the snapshots of the controls the principal can see,
// only those of formID when it is not empty.
func (c *Client) Controls(ctx context.Context, formID string) ([]control.Snapshot, error) {
	path := "/v1/controls"
	if formID != "" {
		path += "?formId=" + url.QueryEscape(formID)
	}
	var l api.ControlList
	err := c.Do(ctx, http.MethodGet, path, nil, &l)
	return l.Controls, err
}

// Control returns one control's snapshot.
func (c *Client) Control(ctx context.Context, id control.Identity) (control.Snapshot, error) {
	var snap control.Snapshot
	err := c.Do(ctx, http.MethodGet, ControlPath(id), nil, &snap)
	return snap, err
}

// ControlPath returns the path of GET /v1/controls/{formId}/{controlId}
// for id, its subject in the query.
func ControlPath(id control.Identity) string {
	path := "/v1/controls/" + url.PathEscape(id.FormID) + "/" + url.PathEscape(id.ControlID)
	if id.Subject != nil {
		path += "?subjectType=" + url.QueryEscape(id.Subject.Type) + "&subjectId=" + url.QueryEscape(id.Subject.ID)
	}
	return path
}

// Execute runs one control command. A refused command returns its answer
// (OK false, the reason, the snapshot) together with the *Error the server
// sent beside it; any other failure returns the zero answer.
func (c *Client) Execute(ctx context.Context, req api.ExecuteRequest) (api.CommandAnswer, error) {
	var a api.CommandAnswer
	status, data, err := c.send(ctx, http.MethodPost, "/v1/controls/execute", req)
	if err != nil {
		return a, err
	}
	if status/100 == 2 {
		return a, decode(data, &a, http.MethodPost, "/v1/controls/execute")
	}
	e := answerError(status, data)
	var refused api.CommandAnswer
	if json.Unmarshal(data, &refused) == nil && refused.Action != "" {
		return refused, e
	}
	return a, e
}

// AuditQuery selects audit records. Zero fields select everything the
// principal may read.
type AuditQuery struct {
	FormID      string
	PrincipalID string
	// After is the sequence number to read after.
	After int64
	// Limit is 1 to 1000; 0 is the server's default.
	Limit int
}

// Values returns q as the query of GET /v1/audit.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	if q.FormID != "" {
		v.Set("formId", q.FormID)
	}
	if q.PrincipalID != "" {
		v.Set("principalId", q.PrincipalID)
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Audit reads the durable audit log, oldest record first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]store.AuditRecord, error) {
	var l api.AuditList
	err := c.Do(ctx, http.MethodGet, "/v1/audit?"+q.Values().Encode(), nil, &l)
	return l.Records, err
}

// Spawn starts a Run. An agent's inline template, unless its token may
// execute commands, is filed for a person instead: Spawn then returns a
// nil Run and the proposal.
func (c *Client) Spawn(ctx context.Context, req api.SpawnRequest) (*run.Run, *run.PendingApproval, error) {
	var raw json.RawMessage
	status, err := c.do(ctx, http.MethodPost, "/v1/runs", req, &raw)
	if err != nil {
		return nil, nil, err
	}
	if status == http.StatusAccepted {
		p := new(run.PendingApproval)
		return nil, p, decode(raw, p, http.MethodPost, "/v1/runs")
	}
	r := new(run.Run)
	return r, nil, decode(raw, r, http.MethodPost, "/v1/runs")
}

// Runs lists the Runs the principal owns or oversees, only those with
// status when it is not empty.
func (c *Client) Runs(ctx context.Context, status string) (run.RunList, error) {
	path := "/v1/runs"
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	var l run.RunList
	err := c.Do(ctx, http.MethodGet, path, nil, &l)
	return l, err
}

// Run returns a Run's status view.
func (c *Client) Run(ctx context.Context, id string) (run.Run, error) {
	var r run.Run
	err := c.Do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &r)
	return r, err
}

// Logs returns the last lines of a Run's stream ("stdout" or "stderr";
// lines 0 is the server's default).
func (c *Client) Logs(ctx context.Context, id, stream string, lines int) (string, error) {
	q := url.Values{}
	if stream != "" {
		q.Set("stream", stream)
	}
	if lines > 0 {
		q.Set("lines", strconv.Itoa(lines))
	}
	var b []byte
	err := c.Do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil, &b)
	return string(b), err
}

// RunControl sends a Run one Control action with its input (nil for
// none). The answer holds the one result of the action.
func (c *Client) RunControl(ctx context.Context, id, action string, input json.RawMessage) (run.ControlResult, error) {
	var res run.ControlResult
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/controls", api.RunControlRequest{Action: action, Input: input}, &res)
	return res, err
}

// Claim claims, for a Run's service, the oldest pending Control of its
// generation (or the one with cid when it is not empty).
func (c *Client) Claim(ctx context.Context, id, instanceID, cid string) (store.Control, error) {
	var ctl store.Control
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/controls/claim", api.ClaimRequest{ID: cid, InstanceID: instanceID}, &ctl)
	return ctl, err
}

// Settle settles a claimed Control as handled, or as failed with failure
// when failure is not empty.
func (c *Client) Settle(ctx context.Context, id, instanceID, cid, failure string) (store.Control, error) {
	outcome := "handled"
	if failure != "" {
		outcome = "failed"
	}
	var ctl store.Control
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/controls/"+url.PathEscape(cid)+"/"+outcome, api.SettleRequest{Error: failure, InstanceID: instanceID}, &ctl)
	return ctl, err
}

// Trace appends one Trace event to a Run.
func (c *Client) Trace(ctx context.Context, id string, in run.TraceInput) (store.TraceEvent, error) {
	var ev store.TraceEvent
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/trace", in, &ev)
	return ev, err
}

// Kill kills a Run's process.
func (c *Client) Kill(ctx context.Context, id string) (run.KillResult, error) {
	var res run.KillResult
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/kill", nil, &res)
	return res, err
}

// Archive archives an ended Run.
func (c *Client) Archive(ctx context.Context, id string) (run.ArchiveResult, error) {
	var res run.ArchiveResult
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/archive", nil, &res)
	return res, err
}

// Prune deletes an ended Run's state, keeping its declared artifacts when
// preserveArtifacts is true.
func (c *Client) Prune(ctx context.Context, id string, preserveArtifacts bool) (run.PruneResult, error) {
	var res run.PruneResult
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/prune", api.RetainRequest{PreserveArtifacts: preserveArtifacts}, &res)
	return res, err
}

// Proposals lists the command and tool proposals the principal may see,
// only those with status when it is not empty.
func (c *Client) Proposals(ctx context.Context, status string) ([]*run.Proposal, error) {
	path := "/v1/proposals"
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	var l api.ProposalList
	err := c.Do(ctx, http.MethodGet, path, nil, &l)
	return l.Proposals, err
}

// Proposal returns one proposal.
func (c *Client) Proposal(ctx context.Context, id string) (*run.Proposal, error) {
	p := new(run.Proposal)
	if err := c.Do(ctx, http.MethodGet, "/v1/proposals/"+url.PathEscape(id), nil, p); err != nil {
		return nil, err
	}
	return p, nil
}

// StartInstance starts a Flow instance of a program (its fingerprint or
// id) in phase.
func (c *Client) StartInstance(ctx context.Context, req api.StartRequest) (flow.Instance, error) {
	var inst flow.Instance
	err := c.Do(ctx, http.MethodPost, "/v1/flows/instances", req, &inst)
	return inst, err
}

// LoadProgram loads a Flow program. With a person's token (or a service
// token granted flow.load) it is active at once and LoadProgram returns
// it; with an agent's it only waits for a person, and LoadProgram returns
// the proposal instead. It is LoadProgramWith without a reason or a
// deadline.
func (c *Client) LoadProgram(ctx context.Context, program []byte) (*api.ProgramView, *api.ProgramProposal, error) {
	return c.LoadProgramWith(ctx, program, ProgramOptions{})
}

// ProgramOptions are what a proposal of a Flow program tells the person
// who decides it. The zero value sends neither.
type ProgramOptions struct {
	// Reason says why the program is proposed, in a sentence or two the
	// person reads on the card (at most 500 characters).
	Reason string
	// Deadline is how long a person has to decide before the proposal is
	// declined with the reason "no decision before the deadline"; it is
	// sent in whole seconds, a part of a second counting as one. Zero
	// leaves the server's default; the server takes 1s to 30 days.
	Deadline time.Duration
}

// query returns o as the query of POST /v1/flows/programs, "" when empty.
func (o ProgramOptions) query() string {
	q := url.Values{}
	if o.Reason != "" {
		q.Set("reason", o.Reason)
	}
	if o.Deadline != 0 {
		secs := int64(o.Deadline / time.Second)
		if o.Deadline%time.Second > 0 {
			secs++
		}
		q.Set("deadline_seconds", strconv.FormatInt(secs, 10))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// LoadProgramWith is LoadProgram with what the proposal tells a person:
// a reason and a deadline (see ProgramOptions). A person's load, or a
// service's granted flow.load, is active at once and waits for no one, so
// the server keeps no deadline for it. A reason or deadline the server
// refuses is an *Error with code invalid_value or invalid_request.
func (c *Client) LoadProgramWith(ctx context.Context, program []byte, opts ProgramOptions) (*api.ProgramView, *api.ProgramProposal, error) {
	var raw json.RawMessage
	path := "/v1/flows/programs" + opts.query()
	status, err := c.do(ctx, http.MethodPost, path, bytes.NewReader(program), &raw)
	if err != nil {
		return nil, nil, err
	}
	if status == http.StatusAccepted {
		p := new(api.ProgramProposal)
		return nil, p, decode(raw, p, http.MethodPost, "/v1/flows/programs")
	}
	v := new(api.ProgramView)
	return v, nil, decode(raw, v, http.MethodPost, "/v1/flows/programs")
}

// Programs lists the loaded Flow programs.
func (c *Client) Programs(ctx context.Context) ([]api.ProgramView, error) {
	var l api.ProgramList
	err := c.Do(ctx, http.MethodGet, "/v1/flows/programs", nil, &l)
	return l.Programs, err
}

// Instances lists the Flow instances the principal may see.
func (c *Client) Instances(ctx context.Context) ([]api.InstanceRow, error) {
	var l api.InstanceList
	err := c.Do(ctx, http.MethodGet, "/v1/flows/instances", nil, &l)
	return l.Instances, err
}

// Instance returns a Flow instance with its journal, receipts and
// approvals.
func (c *Client) Instance(ctx context.Context, id string) (api.InstanceView, error) {
	var v api.InstanceView
	err := c.Do(ctx, http.MethodGet, "/v1/flows/instances/"+url.PathEscape(id), nil, &v)
	return v, err
}

// Prescribe asks the kernel for the next step of a Flow instance.
func (c *Client) Prescribe(ctx context.Context, id string, req flow.Request) (api.Prescription, error) {
	var p api.Prescription
	err := c.Do(ctx, http.MethodPost, "/v1/flows/instances/"+url.PathEscape(id)+"/prescribe", req, &p)
	return p, err
}

// Program returns a loaded Flow program (by fingerprint) and its
// canonical JSON.
func (c *Client) Program(ctx context.Context, fingerprint string) (api.ProgramDocument, error) {
	var d api.ProgramDocument
	err := c.Do(ctx, http.MethodGet, "/v1/flows/programs/"+url.PathEscape(fingerprint), nil, &d)
	return d, err
}

// Approvals lists the Flow approvals the principal may see, only those of
// instance when it is not empty.
func (c *Client) Approvals(ctx context.Context, instance string) ([]flow.Approval, error) {
	path := "/v1/flows/approvals"
	if instance != "" {
		path += "?instance=" + url.QueryEscape(instance)
	}
	var l api.ApprovalList
	err := c.Do(ctx, http.MethodGet, path, nil, &l)
	return l.Approvals, err
}

// Approval returns one Flow approval.
func (c *Client) Approval(ctx context.Context, id string) (flow.Approval, error) {
	var a flow.Approval
	err := c.Do(ctx, http.MethodGet, "/v1/flows/approvals/"+url.PathEscape(id), nil, &a)
	return a, err
}

// ApplyPrescription applies a Flow prescription with its parameters.
func (c *Client) ApplyPrescription(ctx context.Context, id string, params map[string]string) (flow.Receipt, error) {
	var rc flow.Receipt
	err := c.Do(ctx, http.MethodPost, "/v1/flows/prescriptions/"+url.PathEscape(id)+"/apply", api.ApplyRequest{Parameters: params}, &rc)
	return rc, err
}

// screenType is the media type of an Omni-IR stream or update.
const screenType = "text/plain; charset=utf-8"

// ShowScreen shows a screen written in Omni-IR (docs/screens.md) and
// returns its summary: its id, the components read and the lines
// rejected.
func (c *Client) ShowScreen(ctx context.Context, stream string) (api.ScreenSummary, error) {
	var sum api.ScreenSummary
	status, data, err := c.sendAs(ctx, http.MethodPost, "/v1/screens", strings.NewReader(stream), screenType)
	if err != nil {
		return sum, err
	}
	if status/100 != 2 {
		return sum, answerError(status, data)
	}
	return sum, decode(data, &sum, http.MethodPost, "/v1/screens")
}

// Screens lists the screens the principal may see.
func (c *Client) Screens(ctx context.Context) ([]api.ScreenRow, error) {
	var l api.ScreenList
	err := c.Do(ctx, http.MethodGet, "/v1/screens", nil, &l)
	return l.Screens, err
}

// Screen returns one screen's summary.
func (c *Client) Screen(ctx context.Context, id string) (api.ScreenSummary, error) {
	var sum api.ScreenSummary
	err := c.Do(ctx, http.MethodGet, "/v1/screens/"+url.PathEscape(id), nil, &sum)
	return sum, err
}

// DeleteScreen deletes a screen.
func (c *Client) DeleteScreen(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/screens/"+url.PathEscape(id), nil, nil)
}

// UpdateScreen applies an update (Omni-IR lines) to a screen, with a
// service's token. A rejected update returns its answer, whose Issues say
// why, together with the update_rejected *Error.
func (c *Client) UpdateScreen(ctx context.Context, id, update string) (api.ScreenUpdate, error) {
	var u api.ScreenUpdate
	path := "/v1/screens/" + url.PathEscape(id) + "/updates"
	status, data, err := c.sendAs(ctx, http.MethodPost, path, strings.NewReader(update), screenType)
	if err != nil {
		return u, err
	}
	if status/100 == 2 {
		return u, decode(data, &u, http.MethodPost, path)
	}
	e := answerError(status, data)
	if e.Code == wire.UpdateRejected {
		_ = json.Unmarshal(data, &u)
	}
	return u, e
}

// DecideProposal approves or declines (with reason) a command or tool
// proposal, with a person's token.
func (c *Client) DecideProposal(ctx context.Context, id string, approve bool, reason string) (*run.Proposal, error) {
	decision, body := "decline", any(api.DecisionRequest{Reason: reason})
	if approve {
		decision, body = "approve", nil
	}
	p := new(run.Proposal)
	if err := c.Do(ctx, http.MethodPost, "/v1/proposals/"+url.PathEscape(id)+"/"+decision, body, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Inspect returns one view of a Run, a Recipe or a tool (run.InspectRequest
// names which) as the server sends it; its shape depends on the view.
func (c *Client) Inspect(ctx context.Context, req run.InspectRequest) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.Do(ctx, http.MethodPost, "/v1/runs/inspect", req, &raw)
	return raw, err
}

// DeclareForm hosts, with a service's token, the controls of formID (1 to
// 1,000), replacing an earlier declaration, and returns their snapshots.
func (c *Client) DeclareForm(ctx context.Context, formID string, controls []api.HostedControl) ([]control.Snapshot, error) {
	var l api.ControlList
	err := c.Do(ctx, http.MethodPost, "/v1/forms/"+url.PathEscape(formID)+"/controls", api.FormDeclaration{Controls: controls}, &l)
	return l.Controls, err
}

// SetValue records, for the service that hosts the control, the value the
// person set in the service's own application. A proposal staged before
// it becomes stale.
func (c *Client) SetValue(ctx context.Context, id control.Identity, value any) (control.Snapshot, error) {
	var snap control.Snapshot
	path := "/v1/forms/" + url.PathEscape(id.FormID) + "/controls/" + url.PathEscape(id.ControlID) + "/value"
	err := c.Do(ctx, http.MethodPut, path, api.SetValueRequest{Value: value, Subject: id.Subject}, &snap)
	return snap, err
}

// RemoveForm removes a form the service declared.
func (c *Client) RemoveForm(ctx context.Context, formID string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/forms/"+url.PathEscape(formID)+"/controls", nil, nil)
}

// Inbox reads GET /v1/inbox: the decisions waiting for the person whose
// session the client holds (see [Options.Session]).
func (c *Client) Inbox(ctx context.Context) (api.Inbox, error) {
	var in api.Inbox
	err := c.Do(ctx, http.MethodGet, "/v1/inbox", nil, &in)
	return in, err
}

// Decide sends POST /v1/inbox/{id}/decision: the person's decision on the
// inbox item id, as its card showed it. A refusal (stale, not_found, the
// part's own) is returned as an *Error.
func (c *Client) Decide(ctx context.Context, id string, d api.InboxDecision) (api.InboxOutcome, error) {
	var out api.InboxOutcome
	err := c.Do(ctx, http.MethodPost, "/v1/inbox/"+url.PathEscape(id)+"/decision", d, &out)
	return out, err
}

// DecideAll sends POST /v1/inbox/decisions: several decisions at once.
// Each item's outcome is in the answer, in the order sent; a refused item
// does not stop the others.
func (c *Client) DecideAll(ctx context.Context, b api.InboxBatch) (api.InboxBatchOutcome, error) {
	var out api.InboxBatchOutcome
	err := c.Do(ctx, http.MethodPost, "/v1/inbox/decisions", b, &out)
	return out, err
}

// Rules reads GET /v1/rules: the standing rules of the person whose
// session the client holds (every rule for the workspace's owner).
func (c *Client) Rules(ctx context.Context) (api.RuleList, error) {
	var out api.RuleList
	err := c.Do(ctx, http.MethodGet, "/v1/rules", nil, &out)
	return out, err
}

// CreateRule sends POST /v1/rules: the person lets the agent's values for
// one control through, within r's bounds, until r.Until.
func (c *Client) CreateRule(ctx context.Context, r api.RuleRequest) (api.RuleView, error) {
	var out api.RuleView
	err := c.Do(ctx, http.MethodPost, "/v1/rules", r, &out)
	return out, err
}

// RevokeRule sends DELETE /v1/rules/{id}: the rule lets nothing through
// from now on.
func (c *Client) RevokeRule(ctx context.Context, id string) (api.RuleView, error) {
	var out api.RuleView
	err := c.Do(ctx, http.MethodDelete, "/v1/rules/"+url.PathEscape(id), nil, &out)
	return out, err
}

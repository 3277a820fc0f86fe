package controls

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/assent-run/assent/api"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/keylock"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// grantSpeakForUser lets a service token send commands with source "user"
// (for example an application relaying a person's own edit).
const grantSpeakForUser = "control.speak_for_user"

// Part is the controls part of the server: the control registry, the
// forms hosted for applications that are not written in Go, and who may
// see which form. It serves /v1/controls, /v1/forms, /v1/audit, the
// controls_* tools, the control and audit pages and the inbox's proposals.
type Part struct {
	Deps
	controls *control.Registry

	// formsMu guards forms and declaring. It is held only to read or
	// change them, never across a store write or a call into the
	// registry, since every command reads the forms under it.
	formsMu sync.Mutex
	// forms maps a form id to its declaration. Forms that are not listed
	// (for example those registered in process by a Go application) are
	// visible to every principal.
	forms map[string]*formDecl
	// declaring holds the form ids whose declaration passed its checks
	// and is being saved, so a screen cannot take them meanwhile.
	declaring map[string]bool
	// formLocks runs the declarations and removals of one form, and the
	// reading of it again after another node changed it, one at a time,
	// so that each can check the form, write to or read from the store
	// and record the outcome without formsMu held meanwhile.
	formLocks keylock.Map

	// stopFollowing ends following other nodes' changes (see nodes.go).
	stopFollowing func()

	// standing, when set, applies the staged values a standing rule
	// covers (see UseStanding).
	standing Standing

	// stopSweep ends the sweeper of staged values past their deadline
	// and waits for it.
	stopSweep func()
}

// formDecl is a form whose controls assent holds.
type formDecl struct {
	// owner declared the form; only it may redeclare or remove it.
	owner string
	// private forms (a screen's fields) are visible only to their owner and
	// to the people who oversee it; others get not_found.
	private bool
	// hosted forms keep their values in the registry, which saves them
	// with the form; the others (a screen's fields) are registered
	// controls whose values live elsewhere, removed by calling remove.
	hosted bool
	remove []func()
}

// lockForm waits until no other declaration, removal or reading again of
// formID runs and returns the function that lets them run again. It fails
// with the code unavailable when ctx ends first.
func (s *Part) lockForm(ctx context.Context, formID string) (unlock func(), err error) {
	unlock, err = s.formLocks.Lock(ctx, formID)
	if err != nil {
		return nil, tool.Errorf("unavailable", "form %q is being declared or removed by another request, and this one ended while it waited (%v); send it again", formID, err)
	}
	return unlock, nil
}

// New builds the controls part on d and registers its tools. The registry
// writes through to the store and starts with what the store kept: open
// proposals, undo histories and hosted forms with their values.
func New(ctx context.Context, d Deps) (*Part, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	s := &Part{
		Deps:      d,
		forms:     map[string]*formDecl{},
		declaring: map[string]bool{},
	}
	s.controls = control.New(control.Config{Now: d.Now, Store: auditedControls{d.Store.ControlRegistry, s}})
	restored, err := s.controls.Restore(ctx)
	if err != nil {
		return nil, fmt.Errorf("controls: %w", err)
	}
	for _, f := range restored {
		s.forms[f.FormID] = &formDecl{owner: f.Owner, private: f.Private, hosted: true}
	}
	for _, t := range s.controlTools() {
		if err := s.Tools.Register(t); err != nil {
			return nil, err
		}
	}
	if err := s.Web.AddPages(templateFS, "templates/*.html"); err != nil {
		return nil, err
	}
	if s.SharedBus {
		s.followOtherNodes()
	}
	s.sweepDeadlines()
	return s, nil
}

// Close stops following other nodes and stops the registry from writing
// to the store. Controls unregistered afterwards, as screens are while the
// server shuts down, keep what the store holds for them, so the next start
// restores it.
func (s *Part) Close() {
	if s.stopSweep != nil {
		s.stopSweep()
	}
	if s.stopFollowing != nil {
		s.stopFollowing()
	}
	s.controls.Close()
}

//go:embed templates/*.html
var templateFS embed.FS

// Name names the part.
func (s *Part) Name() string { return "controls" }

// CountOpen counts the proposals waiting for p's decision (the inbox
// cards routed to p), or, for an agent or service, the proposals it
// staged that wait for a person.
func (s *Part) CountOpen(ctx context.Context, p store.Principal) map[string]int {
	if p.Kind == store.KindHuman {
		var filed []host.Filed
		for _, snap := range s.VisibleProposals(ctx, p) {
			filed = append(filed, host.Filed{By: snap.State.Staged.Provenance.PrincipalID, Group: s.EscalatedTo(ctx, snap.Identity, snap.State.Staged.Revision)})
		}
		return map[string]int{"proposals": s.CountRouted(ctx, p, filed)}
	}
	n := 0
	for _, snap := range s.controls.Proposals(ctx, "") {
		if st := snap.State.Staged; st != nil && st.Provenance.PrincipalID == p.ID {
			n++
		}
	}
	return map[string]int{"proposals": n}
}

// Registry returns the control registry, so an embedding Go application can
// register its own controls.
func (s *Part) Registry() *control.Registry { return s.controls }

// FormVisible reports whether p may see the controls of formID.
func (s *Part) FormVisible(ctx context.Context, p store.Principal, formID string) bool {
	s.formsMu.Lock()
	f, ok := s.forms[formID]
	s.formsMu.Unlock()
	if !ok || !f.private || f.owner == p.ID {
		return true
	}
	return s.Oversees(ctx, p, f.owner)
}

// pendingAudit is the audit record of a command under way in Exec, which
// the registry's store writes together with the command's change.
type pendingAudit struct {
	principalID string
	cmd         control.Command
	cc          control.CommandContext
	// rule is the standing rule the command runs under, if any.
	rule string
	// note, when set, is the record's reason (why a deadline discarded
	// a value).
	note string
	// deadline, when not nil, is what the command asks of the deadline of
	// a value it stages; due is that deadline once it is saved with the
	// stage.
	deadline *stageDeadline
	due      time.Time
	// written is set once the record is saved with the change.
	written bool
}

// pendingAuditKey is the context key of the *pendingAudit of Exec.
type pendingAuditKey struct{}

// auditedControls is the registry's store: it saves the change of a
// command run by Exec in the same transaction as its audit record.
type auditedControls struct {
	store.Controls
	part *Part
}

// SaveCommand implements control.CommandSaver.
func (a auditedControls) SaveCommand(ctx context.Context, u control.Update, c control.SavedCommand) error {
	pa, _ := ctx.Value(pendingAuditKey{}).(*pendingAudit)
	if pa == nil || pa.written || c.Command.Action != pa.cmd.Action || c.Command.Identity.Key() != pa.cmd.Identity.Key() {
		// Not the command of an Exec (an application's own Execute, or a
		// command run by a handle): Exec is not there to record it.
		return a.SaveControl(ctx, u)
	}
	rec := a.part.auditRecord(pa.principalID, pa.cmd, pa.cc, control.Result{OK: true})
	rec.Detail = a.part.commandDetail(pa.cmd, !c.ValueRedacted, pa.rule)
	if pa.note != "" {
		rec.Reason = pa.note
	}
	var dl *store.DecisionDeadline
	if pa.deadline != nil && u.Stage != nil {
		if d, ok := a.part.stagedDeadline(pa.cmd.Identity, u.Stage.Provenance.Source, u.Stage.Revision, u.Stage.StagedAt, *pa.deadline); ok {
			dl = &d
		}
	}
	if _, err := a.SaveControlAudited(ctx, u, rec, dl); err != nil {
		return err
	}
	pa.written = true
	if dl != nil {
		pa.due = dl.Due
	}
	return nil
}

// auditRecord is the audit record of cmd with result res, without Detail.
func (s *Part) auditRecord(principalID string, cmd control.Command, cc control.CommandContext, res control.Result) store.AuditRecord {
	return store.AuditRecord{
		Time: s.Now(), PrincipalID: principalID, Source: string(cc.Source),
		FormID: cmd.Identity.FormID, ControlID: cmd.Identity.ControlID, Subject: subjectString(cmd.Identity),
		Action: string(cmd.Action), OK: res.OK, Reason: string(res.Reason),
	}
}

// Exec runs a command for principal p with the source the transport
// decided, records it in the audit log and publishes it as an event. A
// command that changes a control has its audit record written with the
// change, in one transaction, when the store allows it; any other command
// that is a command event (one refused by a policy, a store failure) has
// its record appended after it runs.
func (s *Part) Exec(ctx context.Context, p store.Principal, cmd control.Command, cc control.CommandContext) control.Result {
	res, _ := s.exec(ctx, p, cmd, cc, nil)
	return res
}

// execDeadline is Exec for a command that may stage a value with a
// deadline (seconds, or the server's default for agents) and a group to
// escalate to. The deadline is saved in the stage's own transaction, so
// that no reader, the notifications the command sets off included, finds
// the value without it. It returns the deadline, or the zero time.
func (s *Part) execDeadline(ctx context.Context, p store.Principal, cmd control.Command, cc control.CommandContext, seconds int64, escalateTo string) (control.Result, time.Time) {
	return s.exec(ctx, p, cmd, cc, &stageDeadline{seconds: seconds, escalateTo: escalateTo})
}

// exec is Exec. A value the command stages gets the deadline sd asks for,
// when sd is not nil; exec returns that deadline, or the zero time.
func (s *Part) exec(ctx context.Context, p store.Principal, cmd control.Command, cc control.CommandContext, sd *stageDeadline) (control.Result, time.Time) {
	// Malformed identities are refused before any lookup, on every surface.
	if err := cmd.Identity.Validate(); err != nil {
		var ce *control.Error
		if errors.As(err, &ce) {
			return control.Result{Action: cmd.Action, Identity: cmd.Identity, Reason: ce.Reason, Message: ce.Message}, time.Time{}
		}
	}
	if !s.FormVisible(ctx, p, cmd.Identity.FormID) {
		return control.Result{Action: cmd.Action, Identity: cmd.Identity, Reason: control.ReasonNotFound,
			Message: fmt.Sprintf("no control %s is registered; list the controls to see what exists", cmd.Identity)}, time.Time{}
	}
	cc.PrincipalID = p.ID
	rule, _ := ctx.Value(underRuleKey{}).(string)
	pa := &pendingAudit{principalID: p.ID, cmd: cmd, cc: cc, rule: rule, deadline: sd}
	res := s.controls.Execute(context.WithValue(ctx, pendingAuditKey{}, pa), cmd, cc)
	switch res.Reason {
	case control.ReasonNotFound, control.ReasonInvalidRequest, control.ReasonLimitExceeded:
		// Not command events: nothing is recorded or published.
		return res, time.Time{}
	}
	if !pa.written {
		rec := s.auditRecord(p.ID, cmd, cc, res)
		rec.Detail = s.auditDetail(cmd, res, rule)
		if _, err := s.Store.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
			s.Log.Error("audit append failed", "form", rec.FormID, "control", rec.ControlID, "action", rec.Action, "err", err)
		}
	}
	if sd != nil && !pa.written {
		// A store that saved the stage without its record kept no
		// deadline either: it is kept now, still before the event.
		pa.due = s.keepDeadline(ctx, res, *sd)
	}
	s.publishControl(cmd.Identity.FormID, "control.command", &commandData{
		Action: cmd.Action, Identity: cmd.Identity, OK: res.OK, Reason: res.Reason,
		Source: cc.Source, PrincipalID: p.ID, Snapshot: &res.Snapshot, Origin: s.Origin, Rule: rule,
	})
	return res, pa.due
}

// commandData is the data of a control.command event. Its fields are in
// the order of their names, so the keys come sorted as a map's would.
type commandData struct {
	Action      control.Action    `json:"action"`
	Identity    control.Identity  `json:"identity"`
	OK          bool              `json:"ok"`
	Origin      string            `json:"origin"`
	PrincipalID string            `json:"principalId"`
	Reason      control.Reason    `json:"reason"`
	Rule        string            `json:"rule,omitempty"`
	Snapshot    *control.Snapshot `json:"snapshot"`
	Source      control.Source    `json:"source"`
}

// publishControl publishes an event about a form to those who may see it.
func (s *Part) publishControl(formID, typ string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	s.formsMu.Lock()
	f := s.forms[formID]
	private, owner := f != nil && f.private, ""
	if f != nil {
		owner = f.owner
	}
	s.formsMu.Unlock()
	if private {
		// Visible to the owner and to the people who oversee it.
		s.Bus.Publish(s.OwnedEvent(typ, owner, b))
		return
	}
	s.Bus.Publish(event.Event{Type: typ, Data: b})
}

func subjectString(id control.Identity) string {
	if id.Subject == nil {
		return ""
	}
	return id.Subject.Type + ":" + id.Subject.ID
}

// sourceFor decides the source and confirmation of a command from the
// transport and the principal, never from the request body. A service may
// declare voice, tutorial or test, and user only with the speak-for-user
// grant.
func sourceFor(r *http.Request, p store.Principal, declared string) (control.CommandContext, *wire.Error) {
	if host.FromWeb(r) {
		if declared != "" {
			return control.CommandContext{}, wire.New(wire.InvalidRequest, "the web UI decides the source of a command; remove \"source\"")
		}
		return control.CommandContext{Source: control.SourceUser, Confirmed: true}, nil
	}
	switch p.Kind {
	case store.KindService:
		switch control.Source(declared) {
		case "":
			return control.CommandContext{Source: control.SourceAgent}, nil
		case control.SourceVoice, control.SourceTutorial, control.SourceTest:
			return control.CommandContext{Source: control.Source(declared)}, nil
		case control.SourceUser:
			if p.Has(grantSpeakForUser) {
				return control.CommandContext{Source: control.SourceUser}, nil
			}
			return control.CommandContext{}, wire.New(wire.Forbidden, "this service may not speak for the user; it needs the grant "+grantSpeakForUser)
		}
		return control.CommandContext{}, wire.New(wire.InvalidRequest, "source must be voice, tutorial, test or user")
	case store.KindHuman:
		if declared != "" {
			return control.CommandContext{}, wire.New(wire.InvalidRequest, "the transport decides the source of a command; remove \"source\"")
		}
		// A person's token is not a confirmation: only the web UI gives one.
		return control.CommandContext{Source: control.SourceUser}, nil
	default:
		if declared != "" {
			return control.CommandContext{}, wire.New(wire.InvalidRequest, "an agent's commands always have source agent; remove \"source\"")
		}
		return control.CommandContext{Source: control.SourceAgent}, nil
	}
}

// executeRequest is the body of POST /v1/controls/execute and the arguments
// of controls_execute. Source and Confirmed exist only to be refused.
type executeRequest struct {
	executeArgs
	Source    *string `json:"source,omitempty"`
	Confirmed *bool   `json:"confirmed,omitempty"`
}

// executeArgs are controls_execute's arguments: a command as an agent
// gives it.
type executeArgs struct {
	Action     control.Action   `json:"action" enum:"focus,reveal,highlight,explain,validate,stage,apply,clear,undo,discard"`
	Identity   control.Identity `json:"identity" jsonschema:"The control's stable identity."`
	Value      givenValue       `json:"value,omitzero" jsonschema:"The value to stage."`
	DurationMs int              `json:"durationMs,omitempty" minimum:"0" maximum:"60000"`
	Revision   int64            `json:"revision,omitempty" minimum:"1" jsonschema:"The proposal revision you saw."`
	Reason     string           `json:"reason,omitempty" jsonschema:"For stage: why you propose the value, in a sentence the person reads on the card (at most 500 characters)."`
	// DeadlineSeconds is, for stage, how long the value waits for a
	// person before it is discarded.
	DeadlineSeconds int64 `json:"deadline_seconds,omitempty" minimum:"1" maximum:"2592000" jsonschema:"For stage: seconds until the value is discarded with the reason 'no decision before the deadline' if no person decides (default: the server's --decision-deadline for proposal)."`
	// EscalateTo is, for stage, the group the value is routed to at its
	// deadline.
	EscalateTo string `json:"escalate_to,omitempty" maxLength:"256" jsonschema:"For stage: the group (with members) the value is routed to at its deadline, which then has as long again to decide before it is discarded; needs deadline_seconds or the server's default."`
}

// givenValue is a command value that remembers whether the request gave
// one at all, so a stage that forgot its value is not taken as a proposal
// of null.
type givenValue struct {
	v     any
	given bool
}

func (g *givenValue) UnmarshalJSON(b []byte) error {
	g.given = true
	return json.Unmarshal(b, &g.v)
}

func (g givenValue) MarshalJSON() ([]byte, error) { return json.Marshal(g.v) }

// IsZero reports whether no value was given, so an example leaves it out.
func (g givenValue) IsZero() bool { return !g.given }

// JSONSchema states that a value is any JSON value.
func (givenValue) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{} }

// command returns the registry command, or an invalid_request refusal for
// a stage without a value.
func (r executeArgs) command() (control.Command, *control.Error) {
	if r.Action == control.Stage && !r.Value.given {
		return control.Command{}, &control.Error{Reason: control.ReasonInvalidRequest,
			Message: `stage needs the proposed value in "value" (null proposes an empty value)`}
	}
	why, terr := tool.CheckReason(r.Reason)
	if terr != nil {
		return control.Command{}, &control.Error{Reason: control.ReasonInvalidValue, Message: terr.Message}
	}
	if cerr := checkDeadlineSeconds(r); cerr != nil {
		return control.Command{}, cerr
	}
	if why != "" && r.Action != control.Stage {
		return control.Command{}, &control.Error{Reason: control.ReasonInvalidRequest,
			Message: `"reason" goes with stage only: it tells the person why you propose the value`}
	}
	return control.Command{Action: r.Action, Identity: r.Identity, Value: r.Value.v, DurationMs: r.DurationMs, Revision: r.Revision, Why: why}, nil
}

func (s *Part) Routes(mux *host.Mux) {
	mux.Handle("GET /v1/controls", s.Authed(http.HandlerFunc(s.handleControlsList)))
	mux.Handle("GET /v1/controls/{formId}/{controlId}", s.Authed(http.HandlerFunc(s.handleControlInspect)))
	mux.Handle("POST /v1/controls/execute", s.Authed(http.HandlerFunc(s.handleControlExecute)))
	mux.Handle("POST /v1/forms/{formId}/controls", s.Authed(http.HandlerFunc(s.handleFormDeclare)))
	mux.Handle("DELETE /v1/forms/{formId}/controls", s.Authed(http.HandlerFunc(s.handleFormRemove)))
	mux.Handle("PUT /v1/forms/{formId}/controls/{controlId}/value", s.Authed(http.HandlerFunc(s.handleFormSetValue)))
	mux.Handle("GET /v1/audit", s.Authed(http.HandlerFunc(s.handleAudit)))
	mux.Handle("GET /audit", s.WebPage(s.handleAuditPage))
	mux.Handle("POST /web/controls/{action}", s.WebPage(s.handleWebControl))
}

func (s *Part) List(ctx context.Context, p store.Principal, formID string) []control.Snapshot {
	all := s.controls.List(ctx, formID)
	out := all[:0:0]
	for _, snap := range all {
		if s.FormVisible(ctx, p, snap.Identity.FormID) {
			out = append(out, snap)
		}
	}
	if out == nil {
		out = []control.Snapshot{}
	}
	return out
}

func (s *Part) handleControlsList(w http.ResponseWriter, r *http.Request) {
	host.WriteJSON(w, http.StatusOK, api.ControlList{Controls: s.List(r.Context(), host.PrincipalOf(r), r.URL.Query().Get("formId"))})
}

// identityFromRequest reads the control identity from the path and the
// subjectType/subjectId/subjectLabel query parameters.
func identityFromRequest(r *http.Request) control.Identity {
	id := control.Identity{FormID: r.PathValue("formId"), ControlID: r.PathValue("controlId")}
	q := r.URL.Query()
	if t, sid := q.Get("subjectType"), q.Get("subjectId"); t != "" || sid != "" {
		id.Subject = &control.Subject{Type: t, ID: sid, Label: q.Get("subjectLabel")}
	}
	return id
}

func (s *Part) Inspect(ctx context.Context, p store.Principal, id control.Identity) (control.Snapshot, *tool.Error) {
	if err := id.Validate(); err != nil {
		var ce *control.Error
		if errors.As(err, &ce) {
			return control.Snapshot{}, &tool.Error{Code: string(ce.Reason), Message: ce.Message}
		}
		return control.Snapshot{}, tool.Errorf("invalid_request", "%v", err)
	}
	snap, ok := s.controls.Get(ctx, id)
	if !ok || !s.FormVisible(ctx, p, id.FormID) {
		return control.Snapshot{}, tool.Errorf("not_found", "no control %s is registered; list the controls to see what exists", id)
	}
	return snap, nil
}

func (s *Part) handleControlInspect(w http.ResponseWriter, r *http.Request) {
	snap, terr := s.Inspect(r.Context(), host.PrincipalOf(r), identityFromRequest(r))
	if terr != nil {
		host.WriteToolError(w, terr)
		return
	}
	host.WriteJSON(w, http.StatusOK, snap)
}

func (s *Part) handleControlExecute(w http.ResponseWriter, r *http.Request) {
	var req executeRequest
	if !host.DecodeJSON(w, r, 256<<10, &req) {
		return
	}
	p := host.PrincipalOf(r)
	declared := ""
	if req.Source != nil {
		declared = *req.Source
	}
	if req.Confirmed != nil {
		host.WriteError(w, wire.InvalidRequest, "only a person's gesture in the web UI confirms a command; remove \"confirmed\"")
		return
	}
	cc, aerr := sourceFor(r, p, declared)
	if aerr != nil {
		host.WriteAPIError(w, aerr)
		return
	}
	cmd, cerr := req.command()
	if cerr == nil {
		cerr = s.checkEscalation(r.Context(), req.executeArgs, cc.Source)
	}
	if cerr != nil {
		writeCommandResult(w, control.Result{Reason: cerr.Reason, Message: cerr.Message})
		return
	}
	// A person applies or discards an agent's staged value here only if
	// the decision was routed to them, as on the inbox and the buttons.
	if p.Kind == store.KindHuman {
		if err := s.routedProposal(r.Context(), p, cmd); err != nil {
			host.WriteToolError(w, err)
			return
		}
	}
	res, due := s.execDeadline(r.Context(), p, cmd, cc, req.DeadlineSeconds, req.EscalateTo)
	if applied, rule, ok := s.applyUnderRule(r.Context(), p, res); ok {
		a := answerOf(applied)
		a.AppliedUnderRule = rule
		a.Message = "Applied at once under standing rule " + rule + ", in the name of the person who made it; no one was asked."
		host.WriteJSON(w, http.StatusOK, a)
		return
	}
	if !due.IsZero() {
		a := answerOf(res)
		a.Deadline = store.FormatTime(due)
		host.WriteJSON(w, resultStatus(res), a)
		return
	}
	writeCommandResult(w, res)
}

// resultStatus maps a registry result to an HTTP status: the wire table's
// status of its reason, and 403 for a reason of the application's own
// policy. Refusals are answers, not transport failures, so they keep the
// result body.
func resultStatus(res control.Result) int {
	if res.OK {
		return http.StatusOK
	}
	if st, ok := wire.StatusOf(wire.Code(res.Reason)); ok {
		return st
	}
	return http.StatusForbidden
}

// commandAnswer is a registry result as the API and the controls_execute
// tool send it. A refused command keeps the result's own fields (ok false,
// reason, message; docs/controls.md) and carries the one error object
// beside them, whose code is the reason.
type commandAnswer = api.CommandAnswer

// answerOf returns res as it is sent.
func answerOf(res control.Result) commandAnswer {
	a := commandAnswer{Result: res}
	if !res.OK {
		code := wire.Code(res.Reason)
		msg := res.Message
		if msg == "" {
			msg = "the command was refused (" + string(res.Reason) + "); see docs/controls.md for what to do"
		}
		a.Error = &wire.Error{Status: resultStatus(res), Code: code, Message: msg,
			Retryable: wire.Retryable(code), Data: map[string]any{"reason": res.Reason}}
	}
	return a
}

// writeCommandResult answers with a registry result and its status.
func writeCommandResult(w http.ResponseWriter, res control.Result) {
	host.WriteJSON(w, resultStatus(res), answerOf(res))
}

// HostedControl is one control in a form declaration (see DeclareForm):
// its id, an optional subject, what it is, and its first value.
type HostedControl = api.HostedControl

// DeclareForm hosts the controls of formID for owner, as controls_declare
// does for an agent, or replaces those it hosted before; owner "" is the
// application itself. The store keeps the form and its values, so an
// application declares its forms at start only when Hosts says the store
// did not keep them. It refuses a form another owner declared, or one that
// holds a screen's fields.
func (s *Part) DeclareForm(ctx context.Context, owner, formID string, ctrls []HostedControl) error {
	return s.declareForm(ctx, owner, formID, false, ctrls)
}

// Hosts reports whether formID is a hosted form: one declared with
// DeclareForm or controls_declare, here or at an earlier start.
func (s *Part) Hosts(formID string) bool {
	s.formsMu.Lock()
	defer s.formsMu.Unlock()
	f, ok := s.forms[formID]
	return ok && f.hosted
}

// declareForm hosts (or replaces) the controls of formID for owner. The
// declaration is saved before it takes effect: when the store refuses it,
// nothing changes and the error's code is store_unavailable.
//
// Declarations and removals of one form run one at a time (see lockForm),
// so of two owners declaring the same form the second is refused; the
// store write runs without formsMu held, so commands go on meanwhile.
func (s *Part) declareForm(ctx context.Context, owner, formID string, private bool, ctrls []HostedControl) error {
	unlock, err := s.lockForm(ctx, formID)
	if err != nil {
		return err
	}
	defer unlock()
	s.formsMu.Lock()
	old, ok := s.forms[formID]
	switch {
	case ok && old.owner != owner:
		err = tool.Errorf("forbidden", "form %q was declared by another principal; choose another form id", formID)
	case ok && !old.hosted:
		err = tool.Errorf("forbidden", "form %q holds the fields of a screen; choose another form id", formID)
	case len(ctrls) == 0 || len(ctrls) > 1000:
		err = tool.Errorf("invalid_request", "declare 1 to 1,000 controls")
	default:
		s.declaring[formID] = true
	}
	s.formsMu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		s.formsMu.Lock()
		delete(s.declaring, formID)
		s.formsMu.Unlock()
	}()
	hf := control.HostedForm{FormID: formID, Owner: owner, Private: private, Controls: make([]control.HostedControl, len(ctrls))}
	for i, c := range ctrls {
		hf.Controls[i] = control.HostedControl{
			Identity: control.Identity{FormID: formID, ControlID: c.ControlID, Subject: c.Subject},
			Metadata: c.Metadata, Value: c.Value, State: c.State,
		}
	}
	if err := s.controls.Host(ctx, hf); err != nil {
		return toolError(err)
	}
	s.formsMu.Lock()
	s.forms[formID] = &formDecl{owner: owner, private: private, hosted: true}
	s.formsMu.Unlock()
	return nil
}

// toolError returns err, a registry error, with its reason as the code.
func toolError(err error) error {
	var ce *control.Error
	if errors.As(err, &ce) {
		return &tool.Error{Code: string(ce.Reason), Message: ce.Message}
	}
	return tool.Errorf("invalid_request", "%v", err)
}

// removeForm unregisters the form formID. A hosted form is erased from
// the store first; when the store refuses, the form stays. Like
// declareForm, it runs alone among the declarations and removals of the
// form and writes to the store without formsMu held.
func (s *Part) removeForm(ctx context.Context, owner, formID string) error {
	unlock, err := s.lockForm(ctx, formID)
	if err != nil {
		return err
	}
	defer unlock()
	s.formsMu.Lock()
	f, ok := s.forms[formID]
	if !ok || f.owner != owner {
		s.formsMu.Unlock()
		return tool.Errorf("not_found", "you have declared no form %q", formID)
	}
	if !f.hosted {
		// A screen's fields: nothing is saved for them.
		delete(s.forms, formID)
		s.formsMu.Unlock()
		for _, u := range f.remove {
			u()
		}
		return nil
	}
	s.formsMu.Unlock()
	if _, err := s.controls.Unhost(ctx, formID); err != nil {
		return toolError(err)
	}
	s.formsMu.Lock()
	delete(s.forms, formID)
	s.formsMu.Unlock()
	return nil
}

func (s *Part) handleFormDeclare(w http.ResponseWriter, r *http.Request) {
	p := host.PrincipalOf(r)
	if p.Kind != store.KindService {
		host.WriteError(w, wire.Forbidden, "only a service principal declares hosted forms (assent token create --kind service)")
		return
	}
	var req api.FormDeclaration
	if !host.DecodeJSON(w, r, 1<<20, &req) {
		return
	}
	formID := r.PathValue("formId")
	if err := s.declareForm(r.Context(), p.ID, formID, false, req.Controls); err != nil {
		host.WriteToolError(w, err)
		return
	}
	s.publishControl(formID, "control.form", map[string]any{"formId": formID, "declared": len(req.Controls), "origin": s.Origin})
	host.WriteJSON(w, http.StatusOK, api.ControlList{Controls: s.List(r.Context(), p, formID)})
}

func (s *Part) handleFormRemove(w http.ResponseWriter, r *http.Request) {
	formID := r.PathValue("formId")
	if err := s.removeForm(r.Context(), host.PrincipalOf(r).ID, formID); err != nil {
		host.WriteToolError(w, err)
		return
	}
	s.publishControl(formID, "control.form", map[string]any{"formId": formID, "removed": true, "origin": s.Origin})
	w.WriteHeader(http.StatusNoContent)
}

// handleFormSetValue records an edit the person made in the application
// itself. It is not a registry command: it changes the live value, so a
// proposal staged before it becomes stale.
func (s *Part) handleFormSetValue(w http.ResponseWriter, r *http.Request) {
	var req api.SetValueRequest
	if !host.DecodeJSON(w, r, 256<<10, &req) {
		return
	}
	id := control.Identity{FormID: r.PathValue("formId"), ControlID: r.PathValue("controlId"), Subject: req.Subject}
	p := host.PrincipalOf(r)
	s.formsMu.Lock()
	f, ok := s.forms[id.FormID]
	mine := ok && f.hosted && f.owner == p.ID
	s.formsMu.Unlock()
	if !mine {
		host.WriteError(w, wire.NotFound, fmt.Sprintf("you host no control %s", id))
		return
	}
	if err := s.controls.SetHostedValue(r.Context(), id, req.Value); err != nil {
		var ce *control.Error
		if errors.As(err, &ce) && ce.Reason == control.ReasonNotFound {
			host.WriteError(w, wire.NotFound, fmt.Sprintf("you host no control %s", id))
			return
		}
		host.WriteToolError(w, toolError(err))
		return
	}
	snap, _ := s.controls.Get(r.Context(), id)
	s.publishControl(id.FormID, "control.value", map[string]any{"identity": id, "snapshot": snap, "origin": s.Origin})
	host.WriteJSON(w, http.StatusOK, snap)
}

// handleAudit serves GET /v1/audit: the audit records the principal may
// see (see auditVisible), oldest first, after a sequence number.
func (s *Part) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.AuditFilter{FormID: q.Get("formId"), PrincipalID: q.Get("principalId")}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			host.WriteError(w, wire.InvalidRequest, "after must be a non-negative sequence number")
			return
		}
		f.AfterSeq = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			host.WriteError(w, wire.InvalidRequest, "limit must be 1 to 1000")
			return
		}
		f.Limit = n
	}
	p := host.PrincipalOf(r)
	seen, _, err := s.OverseenBy(r.Context(), p)
	var recs []store.AuditRecord
	if err == nil {
		recs, err = s.Store.ListAudit(r.Context(), f)
	}
	if err != nil {
		s.Log.Error("audit list failed", "err", err)
		host.WriteError(w, wire.Unavailable, "the audit log could not be read; try again")
		return
	}
	out := []store.AuditRecord{}
	for _, rec := range recs {
		if s.auditVisible(r.Context(), p, rec, seen) {
			out = append(out, rec)
		}
	}
	host.WriteJSON(w, http.StatusOK, api.AuditList{Records: out})
}

// handleWebControl is a person's Apply, Discard or Undo in the inbox or on
// a screen: source user, confirmed.
func (s *Part) handleWebControl(w http.ResponseWriter, r *http.Request, pg host.Page) {
	action := control.Action(r.PathValue("action"))
	switch action {
	case control.Apply, control.Discard, control.Undo:
	default:
		host.WriteError(w, wire.NotFound, "the inbox offers apply, discard and undo")
		return
	}
	id := control.Identity{FormID: r.PostFormValue("formId"), ControlID: r.PostFormValue("controlId")}
	if t := r.PostFormValue("subjectType"); t != "" {
		id.Subject = &control.Subject{Type: t, ID: r.PostFormValue("subjectId")}
	}
	cmd := control.Command{Action: action, Identity: id}
	if v := r.PostFormValue("revision"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			host.WriteError(w, wire.InvalidRequest, "revision must be a number")
			return
		}
		cmd.Revision = n
	}
	if err := s.routedProposal(r.Context(), *pg.Principal, cmd); err != nil {
		host.WriteToolError(w, err)
		return
	}
	res := s.Exec(r.Context(), *pg.Principal, cmd, control.CommandContext{Source: control.SourceUser, Confirmed: true})
	if r.Header.Get("Accept") == "application/json" {
		writeCommandResult(w, res)
		return
	}
	if !res.OK {
		s.SetNotice(w, r, fmt.Sprintf("%s refused: %s", action, res.Message))
	}
	http.Redirect(w, r, host.SafeBack(r.PostFormValue("back"), "/inbox"), http.StatusSeeOther)
}

// routedProposal refuses (not_routed) a person's apply or discard of a
// value an agent staged when the decision was not routed to them, as the
// inbox refuses it. Other commands, and controls with nothing staged,
// pass: the registry answers them.
func (s *Part) routedProposal(ctx context.Context, p store.Principal, cmd control.Command) error {
	if cmd.Action != control.Apply && cmd.Action != control.Discard {
		return nil
	}
	snap, ok := s.controls.Get(ctx, cmd.Identity)
	if !ok || snap.State.Staged == nil || !s.FormVisible(ctx, p, cmd.Identity.FormID) {
		return nil
	}
	return s.Routed(ctx, p, snap.State.Staged.Provenance.PrincipalID, s.EscalatedTo(ctx, cmd.Identity, snap.State.Staged.Revision))
}

// visibleProposals lists the open proposals p may act on.
func (s *Part) VisibleProposals(ctx context.Context, p store.Principal) []control.Snapshot {
	var out []control.Snapshot
	for _, snap := range s.controls.Proposals(ctx, "") {
		if s.FormVisible(ctx, p, snap.Identity.FormID) {
			out = append(out, snap)
		}
	}
	return out
}

// inboxControls lists open proposals with Apply and Discard, and recent
// changes with Undo.
func (s *Part) Inbox(ctx context.Context, p store.Principal) ([]host.InboxSection, error) {
	props := s.VisibleProposals(ctx, p)
	var changes []control.Change
	for _, c := range s.controls.Changes(ctx, "") {
		if s.FormVisible(ctx, p, c.Identity.FormID) {
			changes = append(changes, c)
		}
	}
	if len(props) == 0 && len(changes) == 0 {
		return nil, nil
	}
	names := s.PrincipalNames(ctx)
	var secs []host.InboxSection
	sec := host.InboxSection{ID: "proposals", Title: "Proposed changes", Empty: "No open proposals."}
	for _, snap := range props {
		st := snap.State
		idv := identityValues(snap.Identity)
		idv["revision"] = strconv.FormatInt(st.Staged.Revision, 10)
		item := host.InboxItem{
			Title: labelOf(snap.Metadata.Label, snap.Identity.ControlID),
			Fields: withSubject(snap.Identity,
				host.InboxField{Label: "Now", Value: valueText(snap.Metadata, st.Value, st.ValueRedacted)},
				host.InboxField{Label: "Proposed", Value: valueText(snap.Metadata, st.StagedValue, st.StagedValueRedacted || st.ValueRedacted)},
				host.InboxField{Label: "Proposed by", Value: host.NameOr(names, st.Staged.Provenance.PrincipalID)},
				host.InboxTime("When", st.Staged.StagedAt),
			),
			Why: st.Staged.Why,
			Details: []host.InboxField{
				{Label: "Form", Value: snap.Identity.FormID},
				{Label: "Control", Value: snap.Identity.ControlID},
				{Label: "Source", Value: string(st.Staged.Provenance.Source)},
				{Label: "Proposal revision", Value: strconv.FormatInt(st.Staged.Revision, 10)},
			},
			Note: "Applying sets the value shown. You can undo it afterwards.",
			Actions: []host.InboxAction{
				{Label: "Apply", URL: "/web/controls/apply", Values: idv, Primary: true, Undo: true},
				{Label: "Discard", URL: "/web/controls/discard", Values: identityValues(snap.Identity)},
			},
		}
		group := ""
		if dl, ok := s.deadlineOf(ctx, snap.Identity, st.Staged.Revision); ok {
			item.Fields = append(item.Fields, host.InboxTime("Decide by", dl.Due))
			then := "discarded: " + NoDecision
			switch {
			case dl.Escalated():
				group = dl.EscalateTo
				item.Fields = append(item.Fields, host.InboxField{Label: "Escalated", Value: "Escalated to " + group + ": nobody decided before the first deadline"})
			case dl.EscalateTo != "":
				then = "escalated to group " + dl.EscalateTo + ", which has as long again to decide; then discarded: " + NoDecision
			}
			item.Details = append(item.Details, host.InboxField{Label: "Without a decision by then", Value: then})
		}
		if st.Staged.Stale {
			item.Warn = "Stale: the value changed after this was proposed. It cannot be applied; discard it or ask for a new proposal."
		}
		item.Decision = s.proposalDecision(snap)
		item.Decision.Group = group
		sec.Items = append(sec.Items, item)
	}
	if len(sec.Items) > 0 {
		secs = append(secs, sec)
	}
	sec = host.InboxSection{ID: "changes", Title: "Recent changes", Empty: "No recent changes."}
	const recent = 20
	for i, c := range changes {
		if i == recent {
			break
		}
		var meta control.Metadata
		if snap, ok := s.controls.Get(ctx, c.Identity); ok {
			meta = snap.Metadata
		}
		item := host.InboxItem{
			Title: "Changed: " + labelOf(c.Label, c.Identity.ControlID),
			Fields: withSubject(c.Identity,
				host.InboxField{Label: "Was", Value: valueText(meta, c.Previous, c.ValueRedacted)},
				host.InboxField{Label: "Now", Value: valueText(meta, c.Applied, c.ValueRedacted)},
				host.InboxField{Label: "By", Value: byText(names, c.Provenance)},
				host.InboxTime("When", c.At),
			),
			Details: []host.InboxField{
				{Label: "Form", Value: c.Identity.FormID},
				{Label: "Control", Value: c.Identity.ControlID},
				{Label: "Source", Value: string(c.Provenance.Source)},
			},
			Actions: []host.InboxAction{{Label: "Undo", URL: "/web/controls/undo", Values: identityValues(c.Identity)}},
		}
		if c.Stale {
			item.Warn = "Edited since: undo would overwrite a newer edit, so it is refused."
		}
		sec.Items = append(sec.Items, item)
	}
	if len(sec.Items) > 0 {
		secs = append(secs, sec)
	}
	return secs, nil
}

// proposalDecision makes a proposal's card decidable: approving applies
// exactly the revision the card shows, declining discards it.
func (s *Part) proposalDecision(snap control.Snapshot) *host.Decision {
	st := snap.State
	id, rev := snap.Identity, st.Staged.Revision
	bound := map[string]string{"control": id.String(), "revision": strconv.FormatInt(rev, 10),
		"value": host.DisplayValue(st.StagedValue, st.StagedValueRedacted || st.ValueRedacted)}
	if u := snap.Metadata.Unit; u != "" {
		bound["unit"] = u // the value's currency or unit, so no reader takes 1250 for another 1250
	}
	var rule *host.RuleTarget
	if !st.StagedValueRedacted && !st.ValueRedacted && st.Staged.Provenance.Source == control.SourceAgent {
		if v, err := json.Marshal(st.StagedValue); err == nil {
			rule = &host.RuleTarget{FormID: id.FormID, ControlID: id.ControlID, Value: v}
			if id.Subject != nil {
				rule.SubjectType, rule.SubjectID = id.Subject.Type, id.Subject.ID
			}
		}
	}
	return &host.Decision{
		Key: "control_proposal:" + id.String(), Binding: strconv.FormatInt(rev, 10), Kind: "control_proposal",
		Bound: bound, ProposedBy: st.Staged.Provenance.PrincipalID, Edits: editFields(snap), Rule: rule,
		Decide: func(ctx context.Context, p store.Principal, d host.DecideArgs) (string, error) {
			cc := control.CommandContext{Source: control.SourceUser, Confirmed: true}
			at := rev
			if raw, ok := d.Values["value"]; ok && d.Approve {
				// The person's edit is staged in their name, checked by the
				// rules that checked the agent's value, then applied: the
				// agent's proposal is replaced by it.
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					return "", wire.New(wire.InvalidRequest, "values.value is not JSON; send the value as the control takes it")
				}
				res := s.Exec(ctx, p, control.Command{Action: control.Stage, Identity: id, Value: v}, cc)
				if !res.OK {
					return "", wire.New(wire.Code(res.Reason), res.Message)
				}
				if res.Snapshot.State.Staged == nil {
					return "", wire.New(wire.Conflict, "the edited value could not be staged; read the inbox again")
				}
				at = res.Snapshot.State.Staged.Revision
			}
			action := control.Discard
			if d.Approve {
				action = control.Apply
			}
			res := s.Exec(ctx, p, control.Command{Action: action, Identity: id, Revision: at}, cc)
			if !res.OK {
				return "", wire.New(wire.Code(res.Reason), res.Message)
			}
			if d.Approve && at != rev {
				return "Applied with your changes: " + id.String() + ".", nil
			}
			if d.Approve {
				return "Applied: " + id.String() + " is now the proposed value.", nil
			}
			return "Discarded the proposal for " + id.String() + ".", nil
		},
	}
}

// editFields is the value of a proposal a person may change before
// approving: one of the kinds a form field asks for as text, and only when
// the value shows (a hidden value cannot be edited from the card).
func editFields(snap control.Snapshot) []host.EditField {
	st, md := snap.State, snap.Metadata
	if st.StagedValueRedacted || st.ValueRedacted || md.IsSecret() || !md.IsWritable() {
		return nil
	}
	f := host.EditField{Name: "value", Label: labelOf(md.Label, snap.Identity.ControlID), Unit: md.Unit}
	switch md.Kind {
	case control.KindText, control.KindEmail, control.KindTextarea, control.KindDate, control.KindTime, control.KindDatetime, control.KindCombobox:
		f.Kind = "text"
	case control.KindNumber, control.KindSlider:
		f.Kind = "number"
	case control.KindCheckbox, control.KindSwitch:
		f.Kind = "boolean"
	case control.KindSelect:
		f.Kind = "select"
		for _, o := range md.Options {
			v, ok := o.Value.(string)
			if !ok {
				return nil
			}
			f.Options = append(f.Options, host.EditOption{Value: v, Label: labelOf(o.Label, v)})
		}
	default:
		return nil
	}
	switch v := st.StagedValue.(type) {
	case string:
		f.Value = v
	case nil:
	default:
		b, _ := json.Marshal(v)
		f.Value = string(b)
	}
	return []host.EditField{f}
}

// withSubject returns fields with, after the first (the form), the
// record the control is about, when it is about one: two controls of one
// form differ only by it, so a person must see whose value changes.
func withSubject(id control.Identity, fields ...host.InboxField) []host.InboxField {
	if id.Subject == nil {
		return fields
	}
	what := id.Subject.Type + " " + id.Subject.ID
	if id.Subject.Label != "" {
		what = id.Subject.Label + " (" + what + ")"
	}
	return slices.Insert(fields, 1, host.InboxField{Label: "For", Value: what})
}

func identityValues(id control.Identity) map[string]string {
	v := map[string]string{"formId": id.FormID, "controlId": id.ControlID}
	if id.Subject != nil {
		v["subjectType"], v["subjectId"] = id.Subject.Type, id.Subject.ID
	}
	return v
}

// valueText shows a control's value as a person reads it: a choice by its
// option's label, a number or text with the control's unit ("1250 EUR"),
// a hidden value as hidden.
func valueText(meta control.Metadata, v any, redacted bool) string {
	shown := host.DisplayValue(v, redacted)
	if redacted || v == nil || v == "" {
		return shown
	}
	for _, o := range meta.Options {
		if fmt.Sprint(o.Value) == fmt.Sprint(v) && o.Label != "" {
			return o.Label
		}
	}
	if meta.Unit != "" {
		return shown + " " + meta.Unit
	}
	return shown
}

func labelOf(label, fallback string) string {
	if label != "" {
		return label
	}
	return fallback
}

// registerPrivateForm registers controls whose values live elsewhere (for
// example a screen's fields, over the screen's state) as the form formID,
// visible only to owner and to the people who oversee it. It replaces an earlier registration
// of the same form by the same owner. The returned function unregisters
// them.
func (s *Part) RegisterPrivateForm(owner, formID string, regs []control.Registration) (remove func(), err error) {
	s.formsMu.Lock()
	prev, ok := s.forms[formID]
	declaring := s.declaring[formID]
	s.formsMu.Unlock()
	if (ok && (prev.owner != owner || prev.hosted)) || declaring {
		return nil, tool.Errorf("forbidden", "form %q belongs to another principal or is a hosted form", formID)
	}
	var undos []func()
	for _, reg := range regs {
		if reg.Identity.FormID != formID {
			err = tool.Errorf("invalid_request", "control %s is not in form %q", reg.Identity, formID)
		} else {
			var undo func()
			if undo, err = s.controls.Register(reg); err == nil {
				undos = append(undos, undo)
			}
		}
		if err != nil {
			for _, u := range undos {
				u()
			}
			return nil, err
		}
	}
	s.formsMu.Lock()
	old := s.forms[formID]
	s.forms[formID] = &formDecl{owner: owner, private: true, remove: undos}
	// Unlike a hosted form, a private form is not saved: its controls
	// come back with the screen that registers them.
	s.formsMu.Unlock()
	if old != nil {
		for _, u := range old.remove {
			u()
		}
	}
	return func() { _ = s.removeForm(context.Background(), owner, formID) }, nil
}

// byText names who made a change: the person, and the standing rule when
// one applied it in their name.
func byText(names map[string]string, p control.Provenance) string {
	by := host.NameOr(names, p.PrincipalID)
	if rule, ok := strings.CutPrefix(p.SessionID, RuleSession); ok {
		by += ", applied under rule " + rule
	}
	return by
}

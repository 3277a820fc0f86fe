package run

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"

	"github.com/assent-run/assent/wire"
)

// GrantCommandExecute lets an agent run commands of its own making: spawn
// inline command templates and register tools without a person's approval.
// An agent holding it can run any command as the Run user, so it is given
// only to agents trusted like the operator.
const GrantCommandExecute = "command.execute"

// Codes of proposal refusals.
const (
	CodeForbidden        = string(wire.Forbidden)
	CodeProposalDecided  = string(wire.ProposalDecided)
	CodeStaleProposal    = string(wire.StaleProposal)
	CodeApprovalRequired = string(wire.ApprovalRequired)
)

// StatusPendingApproval is the status of a spawn or registration that
// waits for a person.
const StatusPendingApproval = "pending_approval"

// maxPendingProposals bounds the proposals one principal may have waiting.
const maxPendingProposals = 32

// maxReasonBytes bounds a decline reason.
const maxReasonBytes = 1000

// runEnvNames are the environment variables the runtime gives a Run.
var runEnvNames = []string{"ASSENT_URL", "ASSENT_RUN_TOKEN", "ASSENT_RUN_ID", "ASSENT_RUN_INSTANCE_ID", "ASSENT_CONTROL_FIFO", "ASSENT_STATE_DIR"}

// processEnvNames lists the environment variable names a process of rec
// gets: the sandbox's base (see sandboxEnv), the Recipe's own env, and for
// a Run the ASSENT_* variables.
func processEnvNames(rec *Recipe, isRun bool) []string {
	names := []string{"PATH", "HOME", "LANG", "TZ"}
	names = append(names, slices.Sorted(maps.Keys(rec.Env))...)
	if isRun {
		names = append(names, runEnvNames...)
	}
	return names
}

// MayExecute reports whether p may run commands of its own making without
// a person's approval: people, services (the operator's programs) and
// agents that hold GrantCommandExecute. Any other principal's inline
// template or tool registration becomes a proposal.
//
// A run-scoped token (a service principal confined to one Run) never may.
func MayExecute(p store.Principal) bool {
	for _, g := range p.Grants {
		if strings.HasPrefix(g, runScopeGrantPrefix) {
			return false
		}
	}
	return p.Kind == store.KindHuman || p.Kind == store.KindService || p.Has(GrantCommandExecute)
}

// runScopeGrantPrefix starts the grant that confines a run-scoped token to
// its Run (see TokenIssuer).
const runScopeGrantPrefix = "run.scope:"

// spawnRequestDoc is the part of a spawn proposal's request that is not
// the Recipe or its values.
type spawnRequestDoc struct {
	Artifacts map[string]Artifact `json:"artifacts,omitempty"`
}

// toolRequestDoc is the part of a tool proposal's request that is not the
// tool's definition.
type toolRequestDoc struct {
	Expose bool `json:"expose"`
	Update bool `json:"update"`
}

// proposalPlan is what approving a proposal does, decoded from its record.
type proposalPlan struct {
	spawn  SpawnRequest
	doc    toolDoc
	recipe *Recipe
	expose bool
	update bool
}

// proposalWorkDir is the working directory a proposal records for Run id:
// relative to the Run root (runs/ in the data directory of whichever node
// runs it), so that the proposal names the same directory on every node
// and any node can carry it out.
func proposalWorkDir(id string) string { return "runs/" + id }

// DecodeProposal parses a proposal record in its JSON form and checks that
// it is one approval can carry out as recorded: a known kind, a valid
// Recipe and target, and a script that is exactly what the Recipe and
// values compile to. Tools made from a Recipe file are checked against the
// file when approved.
func DecodeProposal(b []byte) (store.Proposal, error) {
	var p store.Proposal
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, errorf(CodeInvalidRequest, "proposal must be a JSON object with the proposal fields: %v", err)
	}
	if dec.More() {
		return p, errorf(CodeInvalidRequest, "proposal has trailing data after the JSON object")
	}
	if _, err := checkProposal(p, nil); err != nil {
		return p, err
	}
	return p, nil
}

// checkProposal decodes p's recorded request into what approval does.
// load reads a Recipe file for tools made from one; nil skips that check.
func checkProposal(p store.Proposal, load func(stem string) (*Recipe, error)) (*proposalPlan, error) {
	stale := func(what string) error {
		return errorf(CodeStaleProposal, "Proposal %s no longer matches what was shown (%s); decline it and ask for a new one.", p.ID, what)
	}
	switch p.Kind {
	case store.ProposalSpawn:
		var keys map[string]json.RawMessage
		if json.Unmarshal(p.Recipe, &keys) != nil || len(keys) != 1 || keys["template"] == nil {
			return nil, stale("the recorded Recipe is not an inline template")
		}
		rec, err := DecodeRecipe(p.Recipe)
		if err != nil {
			return nil, stale("the recorded Recipe is invalid")
		}
		if err := ValidRunID(p.Target); err != nil {
			return nil, stale("the recorded Run id is invalid")
		}
		vals, err := rec.Resolve(p.Values)
		if err != nil {
			return nil, stale("the recorded values do not fit the Recipe")
		}
		vals["run_id"], vals["state_dir"] = p.Target, p.WorkDir
		script, err := rec.Script(vals)
		if err != nil || script != p.Script {
			return nil, stale("the script")
		}
		var req spawnRequestDoc
		if len(p.Request) > 0 {
			d := json.NewDecoder(bytes.NewReader(p.Request))
			d.DisallowUnknownFields()
			if d.Decode(&req) != nil {
				return nil, stale("the recorded request is invalid")
			}
		}
		return &proposalPlan{spawn: SpawnRequest{Template: keys["template"], Values: p.Values, RunID: p.Target, Artifacts: req.Artifacts}, recipe: rec}, nil
	case store.ProposalTool:
		if !toolNamePattern.MatchString(p.Target) || len(p.Target) > 64 || reservedToolNames[p.Target] {
			return nil, stale("the recorded tool name is invalid")
		}
		var plan proposalPlan
		d := json.NewDecoder(bytes.NewReader(p.Recipe))
		d.DisallowUnknownFields()
		if d.Decode(&plan.doc) != nil || plan.doc.Published {
			return nil, stale("the recorded tool definition is invalid")
		}
		var req toolRequestDoc
		if len(p.Request) > 0 {
			d := json.NewDecoder(bytes.NewReader(p.Request))
			d.DisallowUnknownFields()
			if d.Decode(&req) != nil {
				return nil, stale("the recorded request is invalid")
			}
		}
		plan.expose, plan.update = req.Expose, req.Update
		if plan.doc.From != "" && load == nil {
			if !recipeStemPattern.MatchString(plan.doc.From) {
				return nil, stale("the recorded Recipe reference is invalid")
			}
			return &plan, nil
		}
		r, err := toolRecipe(plan.doc, load)
		if err != nil {
			return nil, stale("the tool's Recipe: " + err.Error())
		}
		script, err := r.Script(nil)
		if err != nil || script != p.Script {
			return nil, stale("the script")
		}
		plan.recipe = r
		return &plan, nil
	}
	return nil, errorf(CodeInvalidRequest, "unknown proposal kind %q", p.Kind)
}

// toolRecipe is ToolSet.recipe with the Recipe file read by load.
func toolRecipe(d toolDoc, load func(string) (*Recipe, error)) (*Recipe, error) {
	var r *Recipe
	if d.From != "" {
		if load == nil {
			return nil, errorf(CodeInvalidRequest, "tool Recipe file %s cannot be read here", d.From)
		}
		base, err := load(d.From)
		if err != nil {
			return nil, err
		}
		r = base
	} else {
		def := map[string]any{"template": d.Template, "description": d.Description}
		if len(d.Args) > 0 {
			def["args"] = d.Args
		}
		if d.Async != nil {
			def["async"] = *d.Async
		}
		b, _ := json.Marshal(def)
		var err error
		if r, err = DecodeRecipe(b); err != nil {
			return nil, err
		}
	}
	if len(d.Defaults) > 0 {
		merged := maps.Clone(r.Defaults)
		if merged == nil {
			merged = map[string]json.RawMessage{}
		}
		for k, v := range d.Defaults {
			if RuntimeOwned(k) {
				return nil, errorf(CodeInvalidRequest, "Tool defaults cannot set runtime-owned input: %s.", k)
			}
			merged[k] = v
		}
		r.Defaults = merged
		if err := r.Validate(); err != nil {
			return nil, fromRecipe(err)
		}
	}
	if d.Description != "" {
		r.Description = d.Description
	}
	return r, nil
}

func (ts *ToolSet) loadRecipe(stem string) (*Recipe, error) {
	r, _, err := ts.m.LoadRecipe(stem)
	return r, err
}

// ProposalURL is the web page where a person decides proposal id.
func (ts *ToolSet) ProposalURL(id string) string {
	return strings.TrimRight(ts.m.cfg.URL, "/") + "/runs/proposals/" + id
}

// file stores a new pending proposal of p, within p's bound.
func (ts *ToolSet) file(ctx context.Context, p store.Principal, prop store.Proposal, dl deadlineReq) (*tool.Reply[any], error) {
	now := ts.m.now().UTC()
	if err := ts.checkEscalation(ctx, dl, now); err != nil {
		return nil, toolError(err)
	}
	pending, err := ts.props.ListProposals(ctx, store.ProposalPending, p.ID, maxPendingProposals)
	if err != nil {
		return nil, err
	}
	if len(pending) >= maxPendingProposals {
		return nil, &tool.Error{Code: CodeLimitExceeded, Message: fmt.Sprintf("%d of your proposals already wait for a person; wait for their decisions before proposing more.", maxPendingProposals)}
	}
	prop.ID = auth.NewID("prop_")
	prop.ProposerID = p.ID
	prop.CreatedAt = now
	prop.Status = store.ProposalPending
	if prop.EnvNames == nil {
		prop.EnvNames = []string{}
	}
	if prop.Controls == nil {
		prop.Controls = []string{}
	}
	// The deadline is stored before the proposal, so a proposal is never
	// kept without the deadline it was filed with; a deadline whose
	// proposal was not kept is removed when it comes due.
	due := ts.deadlineOf(dl.Seconds, prop.CreatedAt)
	if !due.IsZero() {
		if err := ts.deadlines.SetDeadline(ctx, store.DecisionDeadline{Kind: store.DeadlineCommandProposal, Item: prop.ID, Due: due, CreatedAt: prop.CreatedAt,
			EscalateTo: dl.EscalateTo}); err != nil {
			return nil, err
		}
	}
	if err := ts.props.CreateProposal(ctx, prop); err != nil {
		return nil, err
	}
	url := ts.ProposalURL(prop.ID)
	msg := "A person must approve this command in the web inbox: " + url
	switch {
	case !due.IsZero() && dl.EscalateTo != "":
		msg += " (escalated to group " + dl.EscalateTo + " unless decided by " + store.FormatTime(due) + ", then declined with the reason \"" + NoDecision + "\" after as long again)"
	case !due.IsZero():
		msg += " (declined with the reason \"" + NoDecision + "\" unless decided by " + store.FormatTime(due) + ")"
	}
	script, _ := ShownProposal(prop)
	v := &PendingApproval{Status: StatusPendingApproval, Proposal: prop.ID, Kind: prop.Kind, URL: url, Message: msg,
		Script: script, WorkDir: prop.WorkDir, NextActions: proposalNext(prop.ID)}
	if !due.IsZero() {
		v.Deadline = store.FormatTime(due)
	}
	if prop.Kind == store.ProposalSpawn {
		v.Run = prop.Target
	} else {
		v.Tool = prop.Target
	}
	return &tool.Reply[any]{Text: msg + " (proposal=" + prop.ID + "; next=actors_inspect target=proposal:" + prop.ID + " view=status)", Out: v, Decision: url}, nil
}

// proposeSpawn files an inline-template spawn for a person's approval. The
// Run id, and so the exact script, is fixed now.
func (ts *ToolSet) proposeSpawn(ctx context.Context, p store.Principal, req SpawnRequest) (*tool.Reply[any], error) {
	if req.Recipe != "" {
		return nil, toolError(errorf(CodeInvalidRequest, "spawn takes recipe or template, not both."))
	}
	def, _ := json.Marshal(map[string]json.RawMessage{"template": req.Template})
	rec, err := DecodeRecipe(def)
	if err != nil {
		return nil, toolError(err)
	}
	id := req.RunID
	if id == "" {
		id = "run-" + strconv.FormatInt(ts.m.now().UnixMilli(), 10)
	}
	if err := ValidRunID(id); err != nil {
		return nil, toolError(err)
	}
	vals, err := rec.Resolve(req.Values)
	if err != nil {
		return nil, toolError(err)
	}
	dir := proposalWorkDir(id)
	vals["run_id"], vals["state_dir"] = id, dir
	script, err := rec.Script(vals)
	if err != nil {
		return nil, toolError(err)
	}
	var request json.RawMessage
	if len(req.Artifacts) > 0 {
		request, _ = json.Marshal(spawnRequestDoc{Artifacts: req.Artifacts})
	}
	return ts.file(ctx, p, store.Proposal{Kind: store.ProposalSpawn, Target: id, Recipe: def, Script: script, WorkDir: dir,
		EnvNames: processEnvNames(rec, true), Controls: rec.Control, Values: req.Values, Request: request, Why: req.Reason}, deadlineReq{req.DeadlineSeconds, req.EscalateTo})
}

// ProposeSpawn files req, an inline-template spawn that p may not run
// itself (see MayExecute), for a person's approval, and returns the answer
// for p: status pending_approval, the proposal id and the URL where a
// person decides.
func (ts *ToolSet) ProposeSpawn(ctx context.Context, p store.Principal, req SpawnRequest) (*PendingApproval, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if err := checkDeadlineSeconds(req.DeadlineSeconds); err != nil {
		return nil, err
	}
	res, err := ts.proposeSpawn(ctx, p, req)
	if err != nil {
		return nil, err
	}
	v, _ := res.Out.(*PendingApproval)
	return v, nil
}

// proposeTool files a tool registration for a person's approval.
func (ts *ToolSet) proposeTool(ctx context.Context, p store.Principal, name string, d toolDoc, r *Recipe, expose, update bool, why string, dl deadlineReq) (*tool.Reply[any], error) {
	script, err := r.Script(nil)
	if err != nil {
		return nil, toolError(err)
	}
	doc, _ := json.Marshal(d)
	request, _ := json.Marshal(toolRequestDoc{Expose: expose, Update: update})
	dir := "a new temporary directory, removed when the call ends"
	if r.Async {
		dir = proposalWorkDir("<run id>")
	}
	return ts.file(ctx, p, store.Proposal{Kind: store.ProposalTool, Target: name, Recipe: doc, Script: script, WorkDir: dir,
		EnvNames: processEnvNames(r, r.Async), Controls: r.Control, Values: d.Defaults, Request: request, Why: why}, dl)
}

// proposal returns the proposal id as viewer may see it: its proposer
// always; a person when no supervisor is named or they are it. Anyone else
// gets not_found.
func (ts *ToolSet) proposal(ctx context.Context, viewer store.Principal, id string) (store.Proposal, error) {
	notFound := errorf(CodeNotFound, "Proposal not found: %s.", id)
	if id == "" || len(id) > 128 {
		return store.Proposal{}, notFound
	}
	p, err := ts.props.Proposal(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return p, notFound
	}
	if err != nil {
		return p, err
	}
	if viewer.ID != "" && p.ProposerID == viewer.ID || canDecide(p, viewer) || ts.inEscalationGroup(ctx, p, viewer) {
		return p, nil
	}
	return store.Proposal{}, notFound
}

func canDecide(p store.Proposal, who store.Principal) bool {
	return who.Kind == store.KindHuman && (p.SupervisorID == "" || p.SupervisorID == who.ID)
}

// Proposal returns proposal id if viewer may see it.
func (ts *ToolSet) Proposal(ctx context.Context, viewer store.Principal, id string) (store.Proposal, error) {
	if err := checkContext(ctx); err != nil {
		return store.Proposal{}, err
	}
	return ts.proposal(ctx, viewer, id)
}

// Proposals lists the proposals with status (all when empty) that viewer
// may see, oldest first: a person sees those they may decide, anyone else
// their own.
func (ts *ToolSet) Proposals(ctx context.Context, viewer store.Principal, status string) ([]store.Proposal, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	proposer := viewer.ID
	if viewer.Kind == store.KindHuman {
		proposer = ""
	}
	all, err := ts.props.ListProposals(ctx, status, proposer, 0)
	if err != nil {
		return nil, err
	}
	var out []store.Proposal
	for _, p := range all {
		if p.ProposerID == viewer.ID || canDecide(p, viewer) {
			out = append(out, p)
		}
	}
	return out, nil
}

// ShownProposal returns what views show of p: its script, and its values
// as JSON with the values of secret arguments and secret-looking names
// masked. The record keeps them, since approval runs them.
func ShownProposal(p store.Proposal) (script string, values map[string]json.RawMessage) {
	values = make(map[string]json.RawMessage, len(p.Values))
	secret := map[string]bool{}
	script = p.Script
	if p.Kind == store.ProposalSpawn {
		if rec, err := DecodeRecipe(p.Recipe); err == nil {
			for _, n := range rec.SecretArgs() {
				secret[n] = true
			}
			if vals, err := rec.Resolve(p.Values); err == nil {
				vals = maskSecrets(vals, rec.SecretArgs(), nil)
				vals["run_id"], vals["state_dir"] = p.Target, p.WorkDir
				if s, err := rec.Script(vals); err == nil {
					script = s
				}
			}
		}
	}
	for k, raw := range p.Values {
		if secret[k] || SecretKey(k) {
			values[k] = json.RawMessage(strconv.Quote(redactedMarker))
			continue
		}
		values[k] = shownJSON(raw)
	}
	return script, values
}

// shownJSON returns raw in the form views show: compact, object keys
// sorted, not HTML-escaped; null when raw is not JSON.
func shownJSON(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return json.RawMessage("null")
	}
	b, err := store.EncodeLine(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return bytes.TrimSuffix(b, []byte("\n"))
}

// ProposalView is the inspection view of a proposal; url is where a
// person decides it.
func ProposalView(p store.Proposal, url string) *Proposal {
	var recipe any
	_ = json.Unmarshal(p.Recipe, &recipe)
	script, values := ShownProposal(p)
	v := &Proposal{ID: p.ID, Kind: p.Kind, Status: p.Status, Target: p.Target, Proposer: p.ProposerID,
		Recipe: recipe, Script: script, WorkDir: p.WorkDir, EnvNames: nonNilStrings(p.EnvNames),
		Controls: nonNilStrings(p.Controls), Values: values, CreatedAt: store.FormatTime(p.CreatedAt), URL: url, Reason: p.Reason, Why: p.Why}
	if p.Status != store.ProposalPending {
		v.DecidedBy = &p.DecidedBy
		if !p.DecidedAt.IsZero() {
			v.DecidedAt = store.FormatTime(p.DecidedAt)
		}
	}
	if len(p.Result) > 0 {
		_ = json.Unmarshal(p.Result, &v.Result)
	}
	switch {
	case p.Status == store.ProposalPending:
		v.NextActions = proposalNext(p.ID)
	case p.Status == store.ProposalApproved && p.Kind == store.ProposalSpawn:
		v.NextActions = []tool.Next{inspectNext("run:"+p.Target, "status"), inspectNext("run:"+p.Target, "trace")}
	case p.Status == store.ProposalApproved:
		v.NextActions = []tool.Next{inspectNext("tool:"+p.Target, "schema"), inspectNext("tool:"+p.Target, "status")}
	}
	return v
}

func (ts *ToolSet) proposalView(ctx context.Context, viewer store.Principal, id string) (*Proposal, error) {
	p, err := ts.proposal(ctx, viewer, id)
	if err != nil {
		return nil, err
	}
	v := ProposalView(p, ts.ProposalURL(p.ID))
	if ts.notes != nil {
		if v.Notes, err = ts.notes(ctx, p.ID); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Approve carries out proposal id for the person decider with exactly its
// recorded definition: the spawn starts the proposer's Run, the tool is
// registered as the proposer's. Only a person may approve; anyone else is
// refused with forbidden. A proposal already decided is refused with
// proposal_decided; one that no longer compiles to what was shown with
// stale_proposal. When the spawn or registration itself fails, the
// proposal stays pending with the reason recorded.
func (ts *ToolSet) Approve(ctx context.Context, decider store.Principal, id string) (store.Proposal, error) {
	if err := checkContext(ctx); err != nil {
		return store.Proposal{}, err
	}
	if decider.Kind != store.KindHuman {
		return store.Proposal{}, errorf(CodeForbidden, "Only a person can approve a proposal: in the web inbox, or with a person's token.")
	}
	p, err := ts.proposal(ctx, decider, id)
	if err != nil {
		return p, err
	}
	if p.Status != store.ProposalPending {
		return p, errorf(CodeProposalDecided, "Proposal %s was already %s.", id, p.Status)
	}
	plan, err := checkProposal(p, ts.loadRecipe)
	if err != nil {
		return p, err
	}
	if proposer, err := ts.principals.Principal(ctx, p.ProposerID); err != nil || proposer.Revoked {
		return p, errorf(CodeStaleProposal, "Proposal %s was filed by a principal that no longer exists or was revoked; decline it.", id)
	}
	// The working directory is recorded relative to the Run root, which
	// every node keeps under its own data directory, so any node carries
	// the proposal out. A record written with this node's absolute path
	// is accepted too.
	if p.Kind == store.ProposalSpawn && p.WorkDir != proposalWorkDir(p.Target) && p.WorkDir != ts.m.stateDir(p.Target) {
		return p, errorf(CodeStaleProposal, "Proposal %s names a working directory outside the Runs; decline it.", id)
	}
	now := ts.m.now().UTC()
	if err := ts.props.DecideProposal(ctx, store.ProposalDecision{ID: id, From: store.ProposalPending, To: store.ProposalApproved, DecidedBy: decider.ID, DecidedAt: now}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return p, errorf(CodeProposalDecided, "Proposal %s was decided meanwhile.", id)
		}
		return p, err
	}
	var res any
	switch p.Kind {
	case store.ProposalSpawn:
		res, err = ts.m.Spawn(ctx, p.ProposerID, plan.spawn)
	default:
		ts.mu.Lock()
		res, err = ts.install(ctx, p.ProposerID, p.Target, plan.doc, plan.recipe, plan.expose, plan.update)
		ts.mu.Unlock()
	}
	if err != nil {
		msg := err.Error()
		var te *tool.Error
		var re *Error
		switch {
		case errors.As(err, &te):
			msg = te.Message
		case errors.As(err, &re):
			msg = re.Message
		}
		reason := "Approval could not be carried out: " + msg
		_ = ts.props.DecideProposal(ctx, store.ProposalDecision{ID: id, From: store.ProposalApproved, To: store.ProposalPending, Reason: reason})
		return p, err
	}
	result, _ := json.Marshal(res)
	if err := ts.props.DecideProposal(ctx, store.ProposalDecision{ID: id, From: store.ProposalApproved, To: store.ProposalApproved, DecidedBy: decider.ID, DecidedAt: now, Result: result}); err != nil {
		ts.m.log.Error("record approved proposal", "proposal", id, "err", err)
	}
	return ts.props.Proposal(ctx, id)
}

// Decline records a person's decision not to run proposal id, with reason.
func (ts *ToolSet) Decline(ctx context.Context, decider store.Principal, id, reason string) (store.Proposal, error) {
	if err := checkContext(ctx); err != nil {
		return store.Proposal{}, err
	}
	if decider.Kind != store.KindHuman {
		return store.Proposal{}, errorf(CodeForbidden, "Only a person can decline a proposal: in the web inbox, or with a person's token.")
	}
	p, err := ts.proposal(ctx, decider, id)
	if err != nil {
		return p, err
	}
	if p.Status != store.ProposalPending {
		return p, errorf(CodeProposalDecided, "Proposal %s was already %s.", id, p.Status)
	}
	reason = strings.TrimSpace(reason)
	if len(reason) > maxReasonBytes {
		return p, errorf(CodeInvalidRequest, "A decline reason is at most %d bytes; shorten it.", maxReasonBytes)
	}
	if reason == "" {
		reason = "Declined by a person."
	}
	if err := ts.props.DecideProposal(ctx, store.ProposalDecision{ID: id, From: store.ProposalPending, To: store.ProposalDeclined, DecidedBy: decider.ID, DecidedAt: ts.m.now().UTC(), Reason: reason}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return p, errorf(CodeProposalDecided, "Proposal %s was decided meanwhile.", id)
		}
		return p, err
	}
	return ts.props.Proposal(ctx, id)
}

// ToolInfo describes a registered tool for the people who publish it.
type ToolInfo struct {
	Name, Owner, Description, Source, Script string
	Expose, Published                        bool
	PublishedBy, PublishedAt                 string
}

// RegisteredTools lists every registered tool with its command, for a
// person deciding what to publish. Anyone else gets only what they may
// see.
func (ts *ToolSet) RegisteredTools(ctx context.Context, viewer store.Principal) ([]ToolInfo, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	recs, err := ts.m.st.ListTools(ctx)
	if err != nil {
		return nil, err
	}
	out := []ToolInfo{}
	for _, rec := range recs {
		if viewer.Kind != store.KindHuman && !recordVisible(rec, viewer) {
			continue
		}
		var d toolDoc
		_ = json.Unmarshal(rec.Doc, &d)
		info := ToolInfo{Name: rec.Name, Owner: rec.OwnerID, Description: d.Description, Source: "template", Expose: rec.Expose,
			Published: d.Published, PublishedBy: d.PublishedBy, PublishedAt: d.PublishedAt}
		if d.From != "" {
			info.Source = "recipe " + d.From
		}
		if r, err := ts.recipe(d); err == nil {
			info.Script, _ = r.Script(nil)
			if info.Description == "" {
				info.Description = r.Description
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ToolInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Publish makes the registered tool name visible to every principal. Only
// a person publishes; a later change by the tool's owner makes it private
// again.
func (ts *ToolSet) Publish(ctx context.Context, person store.Principal, name string) (*Publication, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if person.Kind != store.KindHuman {
		return nil, errorf(CodeForbidden, "Only a person can publish a tool.")
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	rec, err := ts.m.st.Tool(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(CodeNotFound, "Registered tool not found: %s.", name)
	}
	if err != nil {
		return nil, err
	}
	var d toolDoc
	if err := json.Unmarshal(rec.Doc, &d); err != nil {
		return nil, errorf(CodeInvalidRecipe, "Registered tool %s is damaged; delete and register it again.", name)
	}
	if !d.Published {
		d.Published, d.PublishedBy, d.PublishedAt = true, person.ID, store.FormatTime(ts.m.now())
		rec.Doc, _ = json.Marshal(d)
		rec.UpdatedAt = ts.m.now()
		if err := ts.m.st.PutTool(ctx, rec, true); err != nil {
			return nil, err
		}
		if rec.Expose {
			t, err := ts.recipeTool(rec)
			if err == nil {
				err = ts.reg.Replace(t)
			}
			if err != nil {
				ts.m.log.Warn("published tool not exposed", "tool", name, "err", err)
			}
		}
	}
	return &Publication{Tool: name, Owner: rec.OwnerID, Published: true, PublishedBy: d.PublishedBy, PublishedAt: d.PublishedAt}, nil
}

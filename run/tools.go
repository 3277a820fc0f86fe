package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Public tool names, and the legacy names accepted as hidden aliases.
const (
	ToolSpawn    = "actors_run_spawn"
	ToolInspect  = "actors_inspect"
	ToolControl  = "actors_control_apply"
	ToolRegister = "actors_tool_register"
)

var legacyAliases = map[string]string{"spawn": ToolSpawn, "inspect": ToolInspect, "message": ToolControl, "register_tool": ToolRegister}

// toolNamePattern is a registered tool's name: a functional owner and a
// function, as in audio_transcribe.
var toolNamePattern = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)

// reservedToolNames can never be registered: the public tools, their legacy
// aliases and the host's basic tools.
var reservedToolNames = map[string]bool{
	"read": true, "write": true, "edit": true, "bash": true, "find": true, "grep": true, "ls": true,
	"register_tool": true, "message": true, "spawn": true, "inspect": true,
	ToolSpawn: true, ToolInspect: true, ToolControl: true, ToolRegister: true,
}

// ToolSet exposes a Manager to agents: the actors_* tools, their legacy
// aliases, and the Recipes registered as persistent tools. Registered tools
// are kept in the store and, unless registered with expose:false, added to
// the tool registry (and so to the MCP tool list).
type ToolSet struct {
	m     *Manager
	reg   *tool.Registry
	props store.Proposals
	// principals tells whether a proposal's proposer still exists.
	principals store.Principals
	notes      func(ctx context.Context, id string) ([]ProposalNote, error)
	// deadlines keeps the proposals' deadlines; defaultDeadline applies
	// to a proposal that names none (none when zero).
	deadlines       store.Deadlines
	defaultDeadline time.Duration
	groups          store.Groups

	mu sync.Mutex // serializes registrations
}

// ToolStores are the stores a ToolSet needs besides its Manager's: the
// commands of agents without GrantCommandExecute are filed in Proposals for
// a person's approval, and a proposal is carried out only while its
// proposer, looked up in Principals, exists and is not revoked.
type ToolStores struct {
	Proposals  store.Proposals
	Principals store.Principals
	// Notes, when set, returns what people wrote to the proposer on
	// proposal id (a note with an approval, a decline's reason, an answer
	// without deciding), which the proposal's view shows.
	Notes func(ctx context.Context, id string) ([]ProposalNote, error)
	// Deadlines, when set, keeps the deadline of each proposal that has
	// one: its own deadline_seconds, or DefaultDeadline when positive.
	// Past it, ExpireDue declines the proposal.
	Deadlines       store.Deadlines
	DefaultDeadline time.Duration
	// Groups, when set, is where a proposal's escalate_to group is looked
	// up; without it a proposal may not name one.
	Groups store.Groups
}

// NewToolSet returns the tools of m, to be added to reg. Both stores of st
// are needed.
func NewToolSet(m *Manager, reg *tool.Registry, st ToolStores) (*ToolSet, error) {
	switch {
	case m == nil || reg == nil:
		return nil, errors.New("run: a tool set needs a Manager and a tool registry")
	case st.Proposals == nil:
		return nil, errors.New("run: a tool set needs a proposals store")
	case st.Principals == nil:
		return nil, errors.New("run: a tool set needs a principals store")
	}
	return &ToolSet{m: m, reg: reg, props: st.Proposals, principals: st.Principals, notes: st.Notes,
		deadlines: st.Deadlines, defaultDeadline: st.DefaultDeadline, groups: st.Groups}, nil
}

// Register adds the actors_* tools and their hidden aliases to the
// registry, then every exposed registered tool from the store. A stored
// tool whose name now collides with another tool is skipped and logged.
func (ts *ToolSet) Register(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	for _, t := range ts.Tools() {
		if err := ts.reg.Register(t); err != nil {
			return err
		}
	}
	recs, err := ts.m.st.ListTools(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if !rec.Expose {
			continue
		}
		t, err := ts.recipeTool(rec)
		if err == nil {
			err = ts.reg.Register(t)
		}
		if err != nil {
			ts.m.log.Warn("registered tool not exposed", "tool", rec.Name, "err", err)
		}
	}
	return nil
}

// spawnArgs are actors_run_spawn's arguments.
type spawnArgs struct {
	Recipe           string                     `json:"recipe,omitempty" jsonschema:"Recipe file stem under <data>/recipes"`
	File             string                     `json:"file,omitempty" jsonschema:"alias of recipe"`
	Template         json.RawMessage            `json:"template,omitempty" type:"string,array,object" jsonschema:"inline command template: a string, a list (sequence) or an object node"`
	Values           map[string]json.RawMessage `json:"values,omitempty" jsonschema:"argument values"`
	As               string                     `json:"as,omitempty" jsonschema:"run:<id>"`
	Artifacts        map[string]Artifact        `json:"artifacts,omitempty"`
	TransportContext map[string]any             `json:"transport_context,omitempty"`
	Verbose          bool                       `json:"verbose,omitempty"`
	Reason           string                     `json:"reason,omitempty" jsonschema:"why you ask, in a sentence the person reads on the card when the call waits for their approval (at most 500 characters)"`
	DeadlineSeconds  int64                      `json:"deadline_seconds,omitempty" minimum:"1" maximum:"2592000" jsonschema:"when the call waits for approval: seconds until it is declined with the reason 'no decision before the deadline' if no person decides (default: the server's --decision-deadline for command)"`
	EscalateTo       string                     `json:"escalate_to,omitempty" jsonschema:"when the call waits for approval: the group (with members) the proposal is routed to at its deadline, which then has as long again to decide; needs deadline_seconds or the server's default"`
}

// inspectArgs are actors_inspect's arguments.
type inspectArgs struct {
	Target   string          `json:"target" jsonschema:"runtime, run:<id>, recipes, tool:<name> or proposal:<id>"`
	View     string          `json:"view" jsonschema:"runtime: status|runs|triage; run:<id>: status|recipe|trace|control; recipes: summary|status; tool:<name>: status|schema; proposal:<id>: status"`
	Identity string          `json:"identity,omitempty"`
	Lines    json.RawMessage `json:"lines,omitempty" type:"string,integer"`
	Source   string          `json:"source,omitempty"`
	Status   string          `json:"status,omitempty"`
	Verbose  bool            `json:"verbose,omitempty"`
}

// controlArgs are actors_control_apply's arguments.
type controlArgs struct {
	Target  string          `json:"target" jsonschema:"run:<id>"`
	Action  string          `json:"action" jsonschema:"a declared action, or kill, archive, prune"`
	Input   json.RawMessage `json:"input,omitempty" type:"string,object,array"`
	Verbose bool            `json:"verbose,omitempty"`
}

// registerArgs are actors_tool_register's arguments.
type registerArgs struct {
	Name            string                     `json:"name,omitempty" jsonschema:"owner_function, e.g. audio_transcribe; omit to list"`
	Description     string                     `json:"description,omitempty"`
	From            *string                    `json:"from,omitempty" type:"string" jsonschema:"Recipe file stem"`
	Template        json.RawMessage            `json:"template,omitempty" type:"string,array,object,null" jsonschema:"command template; null or \"\" deletes"`
	Defaults        map[string]json.RawMessage `json:"defaults,omitempty"`
	Args            string                     `json:"args,omitempty" jsonschema:"e.g. file:path,lang=ru"`
	Async           *bool                      `json:"async,omitempty" type:"boolean"`
	Update          bool                       `json:"update,omitempty"`
	Expose          *bool                      `json:"expose,omitempty" type:"boolean"`
	Reason          string                     `json:"reason,omitempty" jsonschema:"why you ask, in a sentence the person reads on the card when the call waits for their approval (at most 500 characters)"`
	DeadlineSeconds int64                      `json:"deadline_seconds,omitempty" minimum:"1" maximum:"2592000" jsonschema:"when the call waits for approval: seconds until it is declined with the reason 'no decision before the deadline' if no person decides (default: the server's --decision-deadline for command)"`
	EscalateTo      string                     `json:"escalate_to,omitempty" jsonschema:"when the call waits for approval: the group (with members) the proposal is routed to at its deadline, which then has as long again to decide; needs deadline_seconds or the server's default"`
}

// Arguments the actors_* tools no longer take, with the hint a call that
// sends one gets.
var (
	spawnRetired    = map[string]string{"state_dir": "spawn.state_dir is not supported; run state is runtime-owned so run:<id> remains addressable and retention-safe."}
	registerRetired = map[string]string{
		"values": "register_tool values was removed. Next: pass defaults={...}.",
		"draft":  "register_tool draft is not supported; use from=<recipe> or template=...",
	}
	controlRetired = func() map[string]string {
		m := map[string]string{}
		for _, k := range []string{"body", "correlation_id", "from", "metadata", "reply_to", "summary", "to", "type"} {
			m[k] = "actor-message fields are removed; use target, action, input, verbose"
		}
		return m
	}()
)

// recipeResultSchema is the output schema of a registered Recipe tool run
// inline; schema.go generates the others from the result types.
var recipeResultSchema = json.RawMessage(`{"type":"object","properties":{
"exit_code":{"type":"integer"},
"stdout":{"type":"string"},
"stderr":{"type":"string"}},
"required":["exit_code","stdout","stderr"],"additionalProperties":true}`)

// RunURL is the web page of Run id.
func (ts *ToolSet) RunURL(id string) string {
	return strings.TrimRight(ts.m.cfg.URL, "/") + "/runs/" + id
}

// Tools returns the actors_* tools and their hidden legacy aliases.
func (ts *ToolSet) Tools() []tool.Tool {
	schemas := outputSchemas()
	main := []tool.Tool{
		tool.New(tool.Spec[spawnArgs]{Name: ToolSpawn, Title: "Spawn Run", Description: "Start a long-running Run from a Recipe or an inline command template. Returns the Run's status; steer it with actors_control_apply and watch it with actors_inspect. An inline template from an agent without the command.execute grant is filed for a person's approval instead: the answer has status pending_approval and a proposal id to inspect.",
			OutputSchema: schemas.spawn, Annotations: tool.Annotations{OpenWorld: true}, Retired: spawnRetired,
			Example: spawnArgs{Template: json.RawMessage(`"sleep 30"`), As: "run:example-1"}}, ts.spawn),
		tool.New(tool.Spec[inspectArgs]{Name: ToolInspect, Title: "Inspect", Description: "Read a view of the Runs runtime: runtime status|runs|triage, run:<id> status|recipe|trace|control, recipes summary, tool:<name> status|schema, proposal:<id> status. Only your own Runs, tools and proposals are visible.",
			OutputSchema: schemas.inspect, Annotations: tool.Annotations{ReadOnly: true, Idempotent: true},
			Example: inspectArgs{Target: "runtime", View: "status"}}, ts.inspect),
		tool.New(tool.Spec[controlArgs]{Name: ToolControl, Title: "Control", Description: "Apply one Control action to an existing Run: an action its Recipe declares, or the runtime's kill (running), archive or prune (terminal).",
			OutputSchema: schemas.control, Annotations: tool.Annotations{Destructive: true, OpenWorld: true}, Retired: controlRetired,
			Example: controlArgs{Target: "run:example-1", Action: "kill"}}, ts.control),
		tool.New(tool.Spec[registerArgs]{Name: ToolRegister, Title: "Register tool", Description: "Register a Recipe as a persistent tool named owner_function (from a Recipe file or a template), replace it with update:true, keep it unexposed with expose:false, delete it with template:null, or list tools when no name is given. A registration by an agent without the command.execute grant waits for a person's approval (status pending_approval). A registered tool is visible only to you until a person publishes it.",
			OutputSchema: schemas.register, Annotations: tool.Annotations{Destructive: true}, Retired: registerRetired,
			Example: registerArgs{}}, ts.register),
	}
	out := append([]tool.Tool(nil), main...)
	byName := map[string]tool.Tool{}
	for _, t := range main {
		byName[t.Name] = t
	}
	for _, alias := range slices.Sorted(maps.Keys(legacyAliases)) {
		t := byName[legacyAliases[alias]]
		t.Name, t.Hidden = alias, true
		t.Description = "Legacy name of " + legacyAliases[alias] + ". " + t.Description
		out = append(out, t)
	}
	return out
}

func toolError(err error) error {
	err = fromRecipe(err)
	var e *Error
	if errors.As(err, &e) {
		return &tool.Error{Code: e.Code, Message: e.Message, Data: e.Details}
	}
	return err
}

// result answers with a one-line summary followed by the data itself, so a
// client that shows the model only text content still gives it everything
// structuredContent carries. verbose indents the data.
func result(summary string, v any, verbose bool) *tool.Reply[any] {
	var b []byte
	if verbose {
		b, _ = json.MarshalIndent(v, "", "  ")
	} else {
		b, _ = json.Marshal(v)
	}
	return &tool.Reply[any]{Text: summary + "\n" + string(b), Out: v}
}

func (ts *ToolSet) spawn(ctx context.Context, call tool.Call, in spawnArgs) (*tool.Reply[any], error) {
	if in.Recipe == "" {
		in.Recipe = in.File
	}
	why, rerr := tool.CheckReason(in.Reason)
	if rerr != nil {
		return nil, rerr
	}
	if err := checkDeadlineSeconds(in.DeadlineSeconds); err != nil {
		return nil, toolError(err)
	}
	req := SpawnRequest{Recipe: in.Recipe, Template: in.Template, Values: in.Values, Artifacts: in.Artifacts, Reason: why, DeadlineSeconds: in.DeadlineSeconds, EscalateTo: in.EscalateTo}
	if in.As != "" {
		if !strings.HasPrefix(strings.TrimSpace(in.As), "run:") {
			return nil, &tool.Error{Code: CodeInvalidRequest, Message: "spawn.as accepts only run:<id>; received: " + in.As}
		}
		id, err := ParseTarget(in.As)
		if err != nil {
			return nil, &tool.Error{Code: CodeInvalidRequest, Message: "invalid spawn Run target: " + in.As}
		}
		req.RunID = id
	}
	if string(bytes.TrimSpace(req.Template)) == "null" {
		req.Template = nil
	}
	if len(req.Template) > 0 && !MayExecute(call.Principal) {
		return ts.proposeSpawn(ctx, call.Principal, req)
	}
	v, err := ts.m.Spawn(ctx, call.Principal.ID, req)
	if err != nil {
		return nil, toolError(err)
	}
	id := v.ID
	res := SpawnResult{Run: v, URL: ts.RunURL(id),
		NextActions: []tool.Next{inspectNext("run:"+id, "recipe"), inspectNext("run:"+id, "trace"), inspectNext("run:"+id, "control")}}
	text := fmt.Sprintf("run=%s status=%s launch_kind=%s pid=%d next=actors_inspect target=run:%s view=trace", id, v.Status, v.LaunchKind, v.PID, id)
	return result(text, res, in.Verbose), nil
}

func (ts *ToolSet) inspect(ctx context.Context, call tool.Call, in inspectArgs) (*tool.Reply[any], error) {
	lines := 0
	if l := strings.Trim(string(in.Lines), `" `); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return nil, &tool.Error{Code: CodeInvalidRequest, Message: "inspect.lines must be a number"}
		}
		lines = n
	}
	target := strings.TrimSpace(in.Target)
	if strings.HasPrefix(target, "tool:") {
		v, err := ts.toolView(ctx, call.Principal, strings.TrimPrefix(target, "tool:"), in.View)
		if err != nil {
			return nil, toolError(err)
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		if in.View == "schema" {
			return &tool.Reply[any]{Text: string(b), Out: v}, nil
		}
		return result(fmt.Sprintf("tool=%s callable_now=%v", v["name"], v["callable_now"]), v, in.Verbose), nil
	}
	if id, ok := strings.CutPrefix(target, "proposal:"); ok {
		v, err := ts.proposalView(ctx, call.Principal, strings.TrimSpace(id))
		if err != nil {
			return nil, toolError(err)
		}
		return result(v.Compact(), v, in.Verbose), nil
	}
	v, err := ts.m.Inspect(ctx, call.Principal.ID, InspectRequest{Target: target, View: in.View, Lines: lines, Status: in.Status, Source: in.Source})
	if err != nil {
		return nil, toolError(err)
	}
	return result(v.Compact(), v, in.Verbose), nil
}

func (ts *ToolSet) control(ctx context.Context, call tool.Call, in controlArgs) (*tool.Reply[any], error) {
	target := strings.TrimSpace(in.Target)
	switch {
	case target == "":
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "control.target is required"}
	case target == "runtime":
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "unsupported runtime Control action: " + in.Action + "; the runtime target takes no Control actions here"}
	case !strings.HasPrefix(target, "run:"):
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "unsupported control target: " + target + "; use run:<id> or runtime"}
	}
	id, err := ParseTarget(target)
	if err != nil {
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "invalid control Run target: " + target}
	}
	if strings.TrimSpace(in.Action) == "" {
		return nil, &tool.Error{Code: CodeInvalidControl, Message: "control.action is required"}
	}
	res, err := ts.m.Apply(ctx, call.Principal.ID, id, in.Action, in.Input)
	if err != nil {
		return nil, toolError(err)
	}
	status := "accepted"
	if res.Delivery != nil {
		status = res.Delivery.Delivery
	}
	text := fmt.Sprintf("target=%s action=%s status=%s", target, in.Action, status)
	if res.Delivery != nil {
		text += fmt.Sprintf(" control=%s next=actors_inspect target=%s view=control", res.Delivery.ControlID, target)
	}
	if res.Kill != nil && res.Kill.Reason != "" {
		text += " reason=" + strings.ReplaceAll(res.Kill.Reason, " ", "_")
	}
	return result(text, ControlApplied{Control: ControlTarget{Target: target, Action: in.Action}, Result: res}, in.Verbose), nil
}

// toolDoc is what a registered tool keeps in the store.
type toolDoc struct {
	Description string                     `json:"description,omitempty"`
	From        string                     `json:"from,omitempty"`
	Template    json.RawMessage            `json:"template,omitempty"`
	Args        []string                   `json:"args,omitempty"`
	Defaults    map[string]json.RawMessage `json:"defaults,omitempty"`
	Async       *bool                      `json:"async,omitempty"`
	// Published is set when a person publishes the tool to every
	// principal; any change by its owner clears it.
	Published   bool   `json:"published,omitempty"`
	PublishedBy string `json:"published_by,omitempty"`
	PublishedAt string `json:"published_at,omitempty"`
}

// splitArgs splits "file:path,mode:enum(a,b)=a" on the commas outside
// parentheses.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

// recipe resolves a registered tool's Recipe.
func (ts *ToolSet) recipe(d toolDoc) (*Recipe, error) { return toolRecipe(d, ts.loadRecipe) }

func (ts *ToolSet) register(ctx context.Context, call tool.Call, in registerArgs) (*tool.Reply[any], error) {
	var hasTemplate bool
	{
		var m map[string]json.RawMessage
		_ = json.Unmarshal(call.Args, &m)
		_, hasTemplate = m["template"]
	}
	if in.From != nil && strings.TrimSpace(*in.From) == "" {
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "Tool from must be a non-empty Recipe reference."}
	}
	modes := 0
	for _, b := range []bool{in.From != nil, hasTemplate} {
		if b {
			modes++
		}
	}
	if modes > 1 {
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "Use exactly one register_tool source mode: from or template."}
	}
	if in.From != nil && (in.Args != "" || in.Async != nil) {
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "register_tool from inherits args and async behavior."}
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	caller := call.Principal
	name := strings.TrimSpace(in.Name)
	if name == "" {
		recs, err := ts.m.st.ListTools(ctx)
		if err != nil {
			return nil, err
		}
		names := []string{}
		text := "No registered tools."
		for _, r := range recs {
			if recordVisible(r, caller) {
				names = append(names, r.Name)
			}
		}
		if len(names) > 0 {
			text = "Registered tools:\n- " + strings.Join(names, "\n- ")
		}
		return &tool.Reply[any]{Text: text, Out: &ToolList{Tools: names}}, nil
	}
	// Deletion: template null or "".
	if hasTemplate && (string(bytes.TrimSpace(in.Template)) == "null" || string(bytes.TrimSpace(in.Template)) == `""`) {
		rec, err := ts.m.st.Tool(ctx, name)
		if errors.Is(err, store.ErrNotFound) || err == nil && rec.OwnerID != caller.ID {
			return &tool.Reply[any]{Text: fmt.Sprintf("Tool %q not found.", name), Out: &ToolDeletion{Tool: name}}, nil
		}
		if err != nil {
			return nil, err
		}
		if err := ts.m.st.DeleteTool(ctx, name); err != nil {
			return nil, err
		}
		if t, ok := ts.reg.Lookup(name); ok && isRecipeTool(t) {
			ts.reg.Remove(name)
		}
		return &tool.Reply[any]{Text: fmt.Sprintf("Deleted tool %q.", name), Out: &ToolDeletion{Tool: name, Deleted: true}}, nil
	}
	direct := MayExecute(caller)
	prev, mine, err := ts.checkToolName(ctx, caller, name, in.Update, direct)
	if err != nil {
		return nil, err
	}
	var d toolDoc
	if mine {
		_ = json.Unmarshal(prev.Doc, &d)
	}
	// A changed tool is private again until a person publishes it anew.
	d.Published, d.PublishedBy, d.PublishedAt = false, "", ""
	if in.From != nil {
		d = toolDoc{From: strings.TrimSpace(*in.From), Description: d.Description}
	}
	if hasTemplate {
		if len(bytes.TrimSpace(in.Template)) > 0 && in.Template[0] == '{' {
			var probe map[string]json.RawMessage
			_ = json.Unmarshal(in.Template, &probe)
			var inner string
			if json.Unmarshal(probe["template"], &inner) == nil && recipeStemPattern.MatchString(inner) && !strings.Contains(inner, " ") {
				if _, _, err := ts.m.LoadRecipe(inner); err == nil {
					return nil, &tool.Error{Code: CodeInvalidRequest, Message: "Nested Recipe-shaped templates are not a register_tool source mode. Next: retry with from=" + inner + " and defaults={...}."}
				}
			}
		}
		d.From, d.Template = "", in.Template
	}
	if in.Description != "" {
		d.Description = in.Description
	}
	if in.Args != "" {
		d.Args = splitArgs(in.Args)
	}
	if in.Async != nil {
		d.Async = in.Async
	}
	if in.Defaults != nil {
		d.Defaults = in.Defaults
	}
	if d.From == "" && len(d.Template) == 0 {
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "A new tool needs a source: from=<recipe> or template=..."}
	}
	if d.From == "" && d.Description == "" {
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "Tool description is required for command-template registration."}
	}
	r, err := ts.recipe(d)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, &tool.Error{Code: e.Code, Message: "Tool recipe validation failed: " + e.Message}
		}
		return nil, err
	}
	expose := in.Expose == nil || *in.Expose
	if in.Expose == nil && mine {
		expose = prev.Expose
	}
	if !direct {
		why, rerr := tool.CheckReason(in.Reason)
		if rerr != nil {
			return nil, rerr
		}
		if err := checkDeadlineSeconds(in.DeadlineSeconds); err != nil {
			return nil, toolError(err)
		}
		return ts.proposeTool(ctx, caller, name, d, r, expose, in.Update && mine, why, deadlineReq{in.DeadlineSeconds, in.EscalateTo})
	}
	v, err := ts.install(ctx, caller.ID, name, d, r, expose, in.Update)
	if err != nil {
		return nil, err
	}
	verb := "Registered"
	if v.Updated {
		verb = "Updated"
	}
	return &tool.Reply[any]{Text: fmt.Sprintf("%s tool %q (source=%s callable_now=%v).", verb, name, v.Source, v.CallableNow), Out: v}, nil
}

// recordVisible reports whether p may see the registered tool rec: its
// owner's, or published by a person.
func recordVisible(rec store.ToolRecord, p store.Principal) bool {
	if p.ID != "" && rec.OwnerID == p.ID {
		return true
	}
	var d toolDoc
	_ = json.Unmarshal(rec.Doc, &d)
	return d.Published
}

// errNameUnavailable is the one answer for a tool name that cannot be
// used: taken by a tool of assent, by another principal's tool (published
// or not) or by a look-alike name. It does not say which, so a private tool
// cannot be discovered by trying names.
func errNameUnavailable(name string) *tool.Error {
	return &tool.Error{Code: CodeToolCollision, Message: fmt.Sprintf("Tool name %q is not available; choose another owner_function name.", name)}
}

// checkToolName checks that caller may register name and returns caller's
// own registered tool of that name (mine). With direct false (a proposal),
// tools caller cannot see are ignored: whether the name is free of them is
// checked when a person approves, so filing a proposal reveals nothing.
func (ts *ToolSet) checkToolName(ctx context.Context, caller store.Principal, name string, update, direct bool) (prev store.ToolRecord, mine bool, err error) {
	if !toolNamePattern.MatchString(name) || len(name) > 64 {
		return prev, false, &tool.Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("Invalid tool name %q: name a tool owner_function in lowercase (letters, digits, underscores), e.g. audio_transcribe, at most 64 characters.", name)}
	}
	if reservedToolNames[name] {
		return prev, false, &tool.Error{Code: CodeReservedName, Message: "Reserved tool name: " + name}
	}
	prev, err = ts.m.st.Tool(ctx, name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return prev, false, err
	}
	mine = exists && prev.OwnerID == caller.ID
	if exists && !mine && (direct || recordVisible(prev, caller)) {
		return prev, false, errNameUnavailable(name)
	}
	if mine && !update {
		return prev, true, &tool.Error{Code: CodeToolExists, Message: fmt.Sprintf("Tool %q already registered. Use update=true to overwrite.", name)}
	}
	// A normalized collision with any tool that is not this registered
	// tool refuses exposure and update.
	if t, ok := ts.reg.Colliding(name); ok && !(mine && t.Name == name && isRecipeTool(t)) {
		if direct || t.VisibleTo(caller) {
			return prev, mine, errNameUnavailable(name)
		}
	}
	return prev, mine, nil
}

// install stores and exposes the registered tool name of ownerID with the
// definition d (already validated as r). It is how a direct registration
// and an approved proposal both end.
func (ts *ToolSet) install(ctx context.Context, ownerID, name string, d toolDoc, r *Recipe, expose, update bool) (*ToolRegistration, error) {
	owner := store.Principal{ID: ownerID}
	prev, mine, err := ts.checkToolName(ctx, owner, name, update, true)
	if err != nil {
		return nil, err
	}
	doc, _ := json.Marshal(d)
	now := ts.m.now()
	rec := store.ToolRecord{Name: name, OwnerID: ownerID, Expose: expose, Doc: doc, CreatedAt: now, UpdatedAt: now}
	t, err := ts.recipeTool(rec)
	if err != nil {
		return nil, toolError(err)
	}
	if err := ts.m.st.PutTool(ctx, rec, update); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, &tool.Error{Code: CodeToolExists, Message: fmt.Sprintf("Tool %q already registered. Use update=true to overwrite.", name)}
		}
		return nil, err
	}
	active := false
	if expose {
		if err := ts.reg.Replace(t); err != nil {
			// Roll back to the previous definition.
			if mine {
				_ = ts.m.st.PutTool(ctx, prev, true)
			} else {
				_ = ts.m.st.DeleteTool(ctx, name)
			}
			return nil, &tool.Error{Code: CodeToolCollision, Message: fmt.Sprintf("Tool registration transaction failed at runtime_activation: %v", err)}
		}
		active = true
	} else if old, ok := ts.reg.Lookup(name); ok && isRecipeTool(old) {
		ts.reg.Remove(name)
	}
	required, optional := argSplit(r, d.Defaults)
	if r.Async {
		optional = append(optional, "run_id")
	}
	source := "template"
	if d.From != "" {
		source = d.From
	}
	v := &ToolRegistration{Tool: name, Source: source, Persisted: true, Resolved: true, Validated: true,
		RegistryActive: true, HostRegistered: active, ActiveTool: active, CallableNow: active, Expose: expose,
		Activation: "current_session", ActivationBoundary: "current_session",
		Args: nonNilStrings(r.Args), RequiredArgs: required, OptionalArgs: optional, Async: r.Async, Updated: mine,
		NextActions: []tool.Next{inspectNext("tool:"+name, "status")}}
	if active {
		v.NextActions = append([]tool.Next{callNext(name, required)}, v.NextActions...)
	} else {
		v.ActivationBoundary = "host_registration"
	}
	return v, nil
}

// recipeToolMeta marks registry entries that are registered Recipes.
const recipeToolMeta = "assent/recipe_tool"

func isRecipeTool(t tool.Tool) bool { return t.Meta != nil && t.Meta[recipeToolMeta] == true }

func argSplit(r *Recipe, defaults map[string]json.RawMessage) (required, optional []string) {
	required, optional = []string{}, []string{}
	for _, a := range r.ArgList() {
		_, hasDef := r.Defaults[a.Name]
		if _, ok := defaults[a.Name]; ok {
			hasDef = true
		}
		if _, ok := r.Values[a.Name]; ok {
			hasDef = true
		}
		if a.HasDefault || hasDef {
			optional = append(optional, a.Name)
		} else {
			required = append(required, a.Name)
		}
	}
	return required, optional
}

// schemaFor builds the JSON Schema of a registered tool from its args.
func schemaFor(r *Recipe, defaults map[string]json.RawMessage) json.RawMessage {
	props := map[string]any{}
	for _, a := range r.ArgList() {
		p := map[string]any{}
		switch a.Type {
		case "int":
			p["type"] = "integer"
		case "number":
			p["type"] = "number"
		case "bool":
			p["type"] = "boolean"
		case "array":
			p["type"] = "array"
			p["items"] = map[string]any{"type": []string{"string", "number"}}
		case "enum":
			p["type"], p["enum"] = "string", a.Enum
		default:
			p["type"] = "string"
		}
		if a.Default != nil {
			p["default"] = *a.Default
		}
		props[a.Name] = p
	}
	if len(r.Args) == 0 {
		for _, name := range r.Placeholders() {
			if _, ok := defaults[name]; !ok && !RuntimeOwned(name) && name != "run_id" {
				props[name] = map[string]any{"type": "string"}
			}
		}
	}
	if r.Async && !r.Singleton {
		props["run_id"] = map[string]any{"type": "string", "description": "Run id for the launched Run"}
	}
	required, _ := argSplit(r, defaults)
	sch := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		sch["required"] = required
	}
	b, _ := json.Marshal(sch)
	return b
}

// recipeTool builds the registry entry of a registered tool.
func (ts *ToolSet) recipeTool(rec store.ToolRecord) (tool.Tool, error) {
	var d toolDoc
	if err := json.Unmarshal(rec.Doc, &d); err != nil {
		return tool.Tool{}, fmt.Errorf("registered tool %s: %w", rec.Name, err)
	}
	r, err := ts.recipe(d)
	if err != nil {
		return tool.Tool{}, err
	}
	name := rec.Name
	desc := r.Description
	if desc == "" {
		desc = "Registered Recipe tool " + name
	}
	out := recipeResultSchema
	if r.Async {
		out = outputSchemas().recipeRun
	}
	return tool.Tool{Name: name, Description: desc, InputSchema: schemaFor(r, d.Defaults), OutputSchema: out,
		Annotations: tool.Annotations{OpenWorld: true}, Meta: map[string]any{recipeToolMeta: true},
		Owner: rec.OwnerID, Published: d.Published,
		Handler: func(ctx context.Context, call tool.Call) (*tool.Result, error) {
			return ts.callRecipeTool(ctx, name, call)
		},
	}, nil
}

// callRecipeTool runs a registered tool: async Recipes start a Run, the
// others run inline and return their output.
func (ts *ToolSet) callRecipeTool(ctx context.Context, name string, call tool.Call) (*tool.Result, error) {
	rec, err := ts.m.st.Tool(ctx, name)
	if err != nil || !recordVisible(rec, call.Principal) {
		return nil, tool.Errorf("unknown_tool", "no tool is named %q; list the tools to see what is available", name)
	}
	var d toolDoc
	_ = json.Unmarshal(rec.Doc, &d)
	r, err := ts.recipe(d)
	if err != nil {
		return nil, toolError(err)
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(call.Args, &values); err != nil {
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: "arguments must be a JSON object"}
	}
	runID := ""
	if v, ok := values["run_id"]; ok {
		_ = json.Unmarshal(v, &runID)
		delete(values, "run_id")
	}
	if r.Async {
		if r.Singleton {
			runID = name
		} else if runID == "" {
			runID = name + "-" + strconv.FormatInt(ts.m.now().UnixMilli(), 10)
		}
		v, err := ts.m.Spawn(ctx, call.Principal.ID, SpawnRequest{Definition: r, Values: values, RunID: runID, LaunchKind: "tool", Tool: name})
		if err != nil {
			return nil, toolError(err)
		}
		r := result(fmt.Sprintf("run=%s status=%s launch_kind=tool tool=%s", v.ID, v.Status, name), SpawnResult{Run: v, URL: ts.RunURL(v.ID)}, false)
		return &tool.Result{Text: r.Text, Structured: r.Out}, nil
	}
	vals, err := r.Resolve(values)
	if err != nil {
		required, optional := argSplit(r, d.Defaults)
		return nil, &tool.Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("%s. Expected call shape for %s: required=%v optional=%v", err.Error(), name, required, optional)}
	}
	dir, err := os.MkdirTemp("", "assent-tool-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	vals["state_dir"], vals["run_id"] = dir, name
	script, err := r.Script(vals)
	if err != nil {
		return nil, toolError(err)
	}
	return ts.runInline(ctx, script, dir, r.Environment(vals), secretValues(vals, maskSecrets(vals, r.SecretArgs(), nil)))
}

const toolOutputMax = 50 << 10

// runInline runs a script the way every Run process runs (the sandbox of
// the Manager: its own process group, the base environment plus env, dir
// as working directory and, when the server is root, a uid of its own or
// the shared run user) and returns its output, bounded; cancelling ctx
// kills the group.
//
// Secret values and bearer tokens are masked in the output.
func (ts *ToolSet) runInline(ctx context.Context, script, dir string, env, secrets []string) (*tool.Result, error) {
	who, err := ts.m.takeIdentity()
	if err != nil {
		return nil, toolError(err)
	}
	// The directory goes back to the server before the uid goes back to
	// the pool; the caller then removes it.
	defer ts.m.retire(dir, who)
	if err := ts.m.handOverTree(dir, who); err != nil {
		return nil, toolError(errorf(CodeSandbox, "the tool's directory cannot be given to its run user: %v", err))
	}
	cmd := ts.m.sandboxCommand(ctx, who, dir, env, false, "/bin/sh", "-c", script)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return nil, err
	}
	out := MaskString(stdout.String(), secrets)
	errText := MaskString(stderr.String(), secrets)
	if len(out) > toolOutputMax {
		out = out[len(out)-toolOutputMax:]
	}
	v := map[string]any{"exit_code": code, "stdout": out, "stderr": cut(errText, 4000)}
	if code != 0 {
		return nil, &tool.Error{Code: "tool_failed", Message: fmt.Sprintf("exit_code=%d\n%s", code, cut(errText, 4000)), Data: v}
	}
	if strings.TrimSpace(out) == "" {
		b, _ := json.Marshal(v)
		out = string(b)
	}
	return &tool.Result{Text: out, Structured: v}, nil
}

// toolView answers inspect tool:<name> status|schema.
func (ts *ToolSet) toolView(ctx context.Context, caller store.Principal, name, view string) (map[string]any, error) {
	if !runIDPattern.MatchString(name) {
		return nil, errorf(CodeInvalidRequest, "invalid tool target: tool:%s", name)
	}
	if view != "status" && view != "schema" {
		return nil, errorf(CodeInvalidRequest, "inspect tool:<name> supports view=status or view=schema.")
	}
	rec, err := ts.m.st.Tool(ctx, name)
	if err == nil && !recordVisible(rec, caller) {
		// Another principal's private tool is, to the caller, no tool.
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		if t, ok := ts.reg.Lookup(name); ok && !t.Hidden && t.Owner == "" {
			// A built-in tool: its live definition.
			var params any
			_ = json.Unmarshal(t.InputSchema, &params)
			return map[string]any{"name": t.Name, "description": t.Description, "parameters": params, "source": "builtin",
				"callable_now": true, "persisted": false}, nil
		}
		return nil, errorf(CodeNotFound, "Registered tool not found: %s. Next: inspect target=recipes view=summary; do not substitute spawn for tool invocation.", name)
	}
	if err != nil {
		return nil, err
	}
	var d toolDoc
	_ = json.Unmarshal(rec.Doc, &d)
	t, live := ts.reg.Lookup(name)
	live = live && isRecipeTool(t)
	r, rerr := ts.recipe(d)
	if view == "schema" {
		if !live || rerr != nil {
			return nil, errorf(CodeNotFound, "Tool %q is registered but its callable schema is unavailable; callable_now=false, activation_boundary=host_registration. Next: inspect target=tool:%s view=status.", name, name)
		}
		var params any
		_ = json.Unmarshal(t.InputSchema, &params)
		return map[string]any{"name": name, "description": t.Description, "parameters": params}, nil
	}
	source := "template"
	if d.From != "" {
		source = d.From
	}
	v := map[string]any{"name": name, "persisted": true, "registry_active": rerr == nil, "host_registered": live, "active_tool": live,
		"callable_now": live, "expose": rec.Expose, "source": source, "description": d.Description, "published": d.Published,
		"activation": "current_session", "activation_boundary": "current_session"}
	if !live {
		v["activation_boundary"] = "host_registration"
	}
	if rerr != nil {
		v["diagnostics"] = []string{rerr.Error()}
		return v, nil
	}
	required, optional := argSplit(r, d.Defaults)
	if r.Async {
		optional = append(optional, "run_id")
		v["launch_kind"] = "tool"
	}
	slices.Sort(optional)
	v["required_args"], v["optional_args"] = required, optional
	var params any
	_ = json.Unmarshal(schemaFor(r, d.Defaults), &params)
	v["parameters"] = params
	if live {
		v["next_actions"] = []tool.Next{callNext(name, required)}
	} else {
		v["next_actions"] = []tool.Next{tool.NextCall(ToolRegister, map[string]any{"name": name, "update": true, "expose": true})}
	}
	return v, nil
}

// Inspect answers every inspection target, tool:<name> and
// proposal:<id> included.
func (ts *ToolSet) Inspect(ctx context.Context, ownerID string, req InspectRequest) (View, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if name, ok := strings.CutPrefix(strings.TrimSpace(req.Target), "tool:"); ok {
		v, err := ts.toolView(ctx, store.Principal{ID: ownerID}, name, strings.TrimSpace(req.View))
		if err != nil {
			return nil, err
		}
		return toolViewResult(v), nil
	}
	if id, ok := strings.CutPrefix(strings.TrimSpace(req.Target), "proposal:"); ok {
		return ts.proposalView(ctx, store.Principal{ID: ownerID}, strings.TrimSpace(id))
	}
	return ts.m.Inspect(ctx, ownerID, req)
}

// SpawnResult is what actors_run_spawn and an asynchronous Recipe tool
// answer: the Run's view, its web page and what to do next.
type SpawnResult struct {
	*Run
	URL         string      `json:"url"`
	NextActions []tool.Next `json:"next_actions,omitempty"`
}

// ControlApplied is what actors_control_apply answers: the request and
// its result.
type ControlApplied struct {
	Control ControlTarget `json:"control"`
	Result  ControlResult `json:"result"`
}

// ControlTarget names the Run and action a Control was applied to.
type ControlTarget struct {
	Target string `json:"target"`
	Action string `json:"action"`
}

// ToolRegistration is what actors_tool_register answers when it registers
// or updates a tool directly (and what an approved registration records).
// Its fields are in the order of their JSON names.
type ToolRegistration struct {
	// Activation and ActivationBoundary say where the tool is callable:
	// current_session, or host_registration when it is not exposed yet.
	Activation         string `json:"activation"`
	ActivationBoundary string `json:"activation_boundary"`
	ActiveTool         bool   `json:"active_tool"`
	// Args are the declared arguments as written in the Recipe.
	Args           []string    `json:"args"`
	Async          bool        `json:"async"`
	CallableNow    bool        `json:"callable_now"`
	Expose         bool        `json:"expose"`
	HostRegistered bool        `json:"host_registered"`
	NextActions    []tool.Next `json:"next_actions"`
	OptionalArgs   []string    `json:"optional_args"`
	Persisted      bool        `json:"persisted"`
	// Published is false: a changed tool is private until a person
	// publishes it.
	Published      bool     `json:"published"`
	RegistryActive bool     `json:"registry_active"`
	RequiredArgs   []string `json:"required_args"`
	Resolved       bool     `json:"resolved"`
	// Source is the Recipe stem the tool comes from, or "template".
	Source    string `json:"source"`
	Tool      string `json:"tool"`
	Updated   bool   `json:"updated"`
	Validated bool   `json:"validated"`
}

// ToolList is what actors_tool_register answers without a name: the
// registered tools the caller can see.
type ToolList struct {
	Tools []string `json:"tools"`
}

// ToolDeletion is what actors_tool_register answers to a deletion;
// Deleted is false when the caller has no tool of that name.
type ToolDeletion struct {
	Deleted bool   `json:"deleted"`
	Tool    string `json:"tool"`
}

// toolViewResult is an inspect tool:<name> view. Its fields depend on
// whether the tool is built in or registered and on the view, so it stays
// a decoded object.
type toolViewResult map[string]any

// Compact implements View.
func (v toolViewResult) Compact() string {
	return fmt.Sprintf("tool=%v callable_now=%v", v["name"], v["callable_now"])
}

// inspectNext suggests actors_inspect of target in view; extra are further
// arguments as name, value pairs.
func inspectNext(target, view string, extra ...string) tool.Next {
	args := map[string]any{"target": target, "view": view}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i]] = extra[i+1]
	}
	return tool.NextCall(ToolInspect, args)
}

// callNext suggests calling the registered tool name when it needs no
// argument, and reading its schema first when it does.
func callNext(name string, required []string) tool.Next {
	if len(required) > 0 {
		return inspectNext("tool:"+name, "schema")
	}
	return tool.NextCall(name, nil)
}

// proposalNext suggests waiting for a person's decision on command
// proposal id, then reading its status.
func proposalNext(id string) []tool.Next {
	return []tool.Next{
		tool.NextCall("inbox_wait", map[string]any{"items": []any{map[string]any{"command_proposal": id}}}),
		inspectNext("proposal:"+id, "status"),
	}
}

package flows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// registerFlowEffects wires the effects the server can run: tool.call
// through the tool registry, control.apply through the control registry,
// and run.spawn through the Runs part when it is present. state.assign is
// built into the kernel.
func (s *Part) registerFlowEffects() error {
	if err := s.flowInv.RegisterEffect(flow.EffectToolCall, flow.CapabilityToolInvoke, flow.EffectFunc(s.toolCallEffect)); err != nil {
		return err
	}
	if err := s.flowInv.RegisterBinder(flow.EffectToolCall, flow.BinderFunc(s.toolCallBind)); err != nil {
		return err
	}
	if err := s.flowInv.RegisterEffect(flow.EffectControlApply, flow.CapabilityControlWrite, flow.EffectFunc(s.controlApplyEffect)); err != nil {
		return err
	}
	if err := s.flowInv.RegisterBinder(flow.EffectControlApply, flow.BinderFunc(s.controlApplyBind)); err != nil {
		return err
	}
	if s.runs != nil {
		s.flowRuns = newFlowRunWatch(s, s.runs)
		if err := s.flowInv.RegisterEffect(flow.EffectRunSpawn, flow.CapabilityCommandExecute, flow.EffectFunc(s.flowRuns.spawnEffect)); err != nil {
			return err
		}
		return s.flowInv.RegisterBinder(flow.EffectRunSpawn, flow.BinderFunc(s.flowRuns.spawnBind))
	}
	return nil
}

// flowCallKey marks the context of a tool called by a Flow transition's
// tool.call effect; its value is an EffectCall.
type flowCallKey struct{}

// EffectCall says which transition of which instance called a tool as the
// tool.call effect of that transition.
type EffectCall struct {
	// Instance is the id of the instance the transition was applied to.
	Instance string
	// Program is the fingerprint of the program the instance runs.
	Program string
	// Transition is the qualified id of the transition.
	Transition string
}

// EffectCallFrom returns the transition that called the tool running in
// ctx, when a Flow transition's tool.call effect called it. A tool
// registered with RegisterEffectOnlyTool reads it to act on the instance
// it was called for.
func EffectCallFrom(ctx context.Context) (EffectCall, bool) {
	c, ok := ctx.Value(flowCallKey{}).(EffectCall)
	return c, ok
}

// toolResultShape is what tool.call reads from a tool's structured result:
// facts to set on the instance ({facet: "value"} for a known value, or
// {facet: {status, value}}) and, when the transition has several target
// phases, the one reached.
type toolResultShape struct {
	Facts map[string]json.RawMessage `json:"facts"`
	Phase string                     `json:"phase"`
}

// toolRefusals are the tool error codes that mean the tool refused before
// acting: the call changed nothing. Any other failure of a tool that was
// reached (a non-zero exit, a callback answering 500, a timeout, a result
// marked as an error) may have acted.
var toolRefusals = map[string]bool{
	"invalid_request": true, "invalid_params": true, "unknown_tool": true, "forbidden": true, "not_found": true,
	"human_required": true, "unauthorized": true, "conflict": true, "limit_exceeded": true,
	"too_large": true, "rate_limited": true,
}

// toolCallName is the tool a tool.call transition names: its first
// prescription argument, or the operation when there are none.
func toolCallName(req *flow.EffectRequest) string {
	name := ""
	if ps := req.Transition.Prescription; ps != nil {
		name = ps.Operation
	}
	if len(req.Arguments) > 0 {
		name = req.Arguments[0]
	}
	return name
}

// toolCallBind records, for an approval, the tool a tool.call transition
// will call and a digest of its definition (name, title, description,
// input schema, owner), so that a tool replaced after the approval was
// filed makes it stale.
func (s *Part) toolCallBind(_ context.Context, req *flow.EffectRequest) ([]flow.Binding, error) {
	name := toolCallName(req)
	t, ok := s.Tools.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no tool is named %q", name)
	}
	h := sha256.New()
	for _, part := range []string{t.Name, t.Title, t.Description, string(t.InputSchema), t.Owner, fmt.Sprint(t.Published)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	value := t.Name
	if t.Title != "" {
		value += " (" + t.Title + ")"
	}
	return []flow.Binding{{Kind: "tool", Name: t.Name, Value: value, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}}, nil
}

// toolCallEffect is tool.call. It calls the tool named by the
// transition's first prescription argument (the operation when there are
// no arguments) with a JSON object of the transition's parameters (string
// values, secret ones included, since the tool needs them), as the
// principal that applies the transition. The tool's structured result may
// report "facts" and "phase". A tool's refusal (an error whose code is one
// of toolRefusals) changes nothing and fails the transition. Any other
// failure after the call left (another error code, a result marked as an
// error, a timeout, an unreadable result) leaves the outcome uncertain: the
// instance needs recovery and the facets of the transition's target
// conditions become "unknown" so that a RECOVERY transition can reconcile
// them; the transition is never applied again.
func (s *Part) toolCallEffect(ctx context.Context, req *flow.EffectRequest) flow.EffectResult {
	if err := req.Require(flow.CapabilityToolInvoke); err != nil {
		return flow.Fail(err)
	}
	name := toolCallName(req)
	if strings.HasPrefix(tool.Normalize(name), "flows_") {
		return flow.Fail(fmt.Errorf("tool.call cannot call the Flow tool %s; a transition cannot drive another one", name))
	}
	if _, ok := s.Tools.Lookup(name); !ok {
		return flow.Fail(fmt.Errorf("no tool is named %q; register it before applying %s", name, req.Transition.ID))
	}
	if err := checkBoundTool(ctx, s, req, name); err != nil {
		return flow.Fail(err)
	}
	params := req.Parameters
	if params == nil {
		params = map[string]string{}
	}
	args, err := json.Marshal(params)
	if err != nil {
		return flow.Fail(err)
	}
	caller := s.callerOf(ctx, req.Principal)
	ctx = context.WithValue(ctx, flowCallKey{}, EffectCall{Instance: req.Instance.ID, Program: req.Prescription.Program, Transition: req.Transition.ID})
	res, err := s.Tools.Call(ctx, name, tool.Call{Principal: caller, Args: args})
	if err != nil {
		var te *tool.Error
		if errors.As(err, &te) && toolRefusals[te.Code] {
			return flow.Fail(fmt.Errorf("tool %s refused: %s: %s", name, te.Code, te.Message))
		}
		if te != nil {
			return uncertain(req, fmt.Errorf("tool %s failed after the call was made (%s); whether it acted is unknown", name, te.Code))
		}
		return uncertain(req, fmt.Errorf("tool %s failed after the call was made; whether it acted is unknown", name))
	}
	if res == nil {
		res = &tool.Result{}
	}
	if res.IsError {
		return uncertain(req, fmt.Errorf("tool %s reported an error after it was called; whether it acted is unknown", name))
	}
	var shape toolResultShape
	if res.Structured != nil {
		b, err := json.Marshal(res.Structured)
		if err == nil {
			err = json.Unmarshal(b, &shape)
		}
		if err != nil {
			return uncertain(req, fmt.Errorf("tool %s returned a result that is not an object with facts: %v", name, err))
		}
	}
	facts, err := decodeToolFacts(shape.Facts)
	if err != nil {
		return uncertain(req, fmt.Errorf("tool %s: %v", name, err))
	}
	return flow.EffectResult{Outcome: flow.Succeeded, Facts: facts, Phase: shape.Phase}
}

// decodeToolFacts reads {facet: "value"} (a known value) or {facet:
// {status, value}}.
func decodeToolFacts(raw map[string]json.RawMessage) (map[string]flow.Fact, error) {
	facts := make(map[string]flow.Fact, len(raw))
	for facet, v := range raw {
		var str string
		if err := json.Unmarshal(v, &str); err == nil {
			facts[facet] = flow.Fact{Status: flow.StatusKnown, Value: str}
			continue
		}
		var f flow.Fact
		if err := json.Unmarshal(v, &f); err != nil || f.Status == "" {
			return nil, fmt.Errorf("fact %q must be a string or {status, value}", facet)
		}
		facts[facet] = f
	}
	return facts, nil
}

// checkBoundTool refuses, for a transition a person approved, a tool that is
// not the one the approval recorded.
func checkBoundTool(ctx context.Context, s *Part, req *flow.EffectRequest, name string) error {
	if req.Bindings == nil {
		return nil
	}
	now, err := s.toolCallBind(ctx, req)
	if err != nil {
		return err
	}
	for _, b := range req.Bindings {
		if b.Kind == "tool" && b == now[0] {
			return nil
		}
	}
	return &flow.Error{Code: flow.CodeStalePrescription, Message: fmt.Sprintf("tool %s is not the tool the approval recorded; nothing was applied", name)}
}

// uncertain reports an outcome that may or may not have happened: the
// facets of the transition's target conditions become "unknown".
func uncertain(req *flow.EffectRequest, err error) flow.EffectResult {
	facts := map[string]flow.Fact{}
	for _, c := range req.Transition.TargetConditions {
		if c.Facet != flow.PhaseFacet {
			facts[c.Facet] = flow.Fact{Status: flow.StatusUnknown}
		}
	}
	return flow.EffectResult{Outcome: flow.Uncertain, Facts: facts, Err: err}
}

// callerOf returns the store principal behind a kernel principal, so that
// a tool sees who applies the transition.
func (s *Part) callerOf(ctx context.Context, p flow.Principal) store.Principal {
	if sp, err := s.Store.Principal(ctx, p.ID); err == nil {
		return sp
	}
	return store.Principal{ID: p.ID, Kind: p.Kind, Grants: p.Grants}
}

// controlProposals returns the staged proposals that a control.apply
// transition names: "formId/controlId" for one control, or "formId" for
// every proposal staged on the form, on forms visible to the instance's
// owner. A stale proposal, or an argument with nothing staged, is an error.
func (s *Part) controlProposals(ctx context.Context, req *flow.EffectRequest) ([]control.Snapshot, error) {
	if len(req.Arguments) == 0 {
		return nil, fmt.Errorf("transition %s names no controls in its prescription arguments", req.Transition.ID)
	}
	owner := s.callerOf(ctx, flow.Principal{ID: req.Instance.Owner, Kind: flow.AuthorityAgent})
	var todo []control.Snapshot
	for _, arg := range req.Arguments {
		form, ctl, one := strings.Cut(arg, "/")
		found := false
		for _, snap := range s.controls.Registry().Proposals(ctx, form) {
			if one && snap.Identity.ControlID != ctl || !s.controls.FormVisible(ctx, owner, snap.Identity.FormID) {
				continue
			}
			if snap.State.Staged.Stale {
				return nil, fmt.Errorf("the proposal on %s/%s is stale; stage it again", snap.Identity.FormID, snap.Identity.ControlID)
			}
			todo = append(todo, snap)
			found = true
		}
		if !found {
			return nil, fmt.Errorf("nothing is staged on %s; stage a value before applying %s", arg, req.Transition.ID)
		}
	}
	return todo, nil
}

// controlApplyBind records, for an approval, each staged proposal a
// control.apply transition would apply: the control, its live value, the
// proposed value and the proposal's revision (values of redacted controls
// are hidden; the revision still binds them).
func (s *Part) controlApplyBind(ctx context.Context, req *flow.EffectRequest) ([]flow.Binding, error) {
	todo, err := s.controlProposals(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]flow.Binding, 0, len(todo))
	for _, snap := range todo {
		b := flow.Binding{Kind: "control", Name: bindingName(snap.Identity), Revision: snap.State.Staged.Revision}
		if snap.State.ValueRedacted || snap.State.StagedValueRedacted {
			b.Secret = true
		} else {
			b.Current, b.Value = controlText(snap.State.Value), controlText(snap.State.StagedValue)
		}
		out = append(out, b)
	}
	return out, nil
}

// controlText renders a control value for an approval card.
func controlText(v any) string {
	switch v := v.(type) {
	case nil:
		return "(empty)"
	case string:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// controlApplyEffect is control.apply. Each prescription argument names
// controls whose staged proposals to apply (see controlProposals).
// Applying is a person's act: the effect refuses any other principal (the
// kernel already resolves the transition as FRONTIER awaiting a person for
// them). When a person approved the transition, exactly the proposals the
// approval recorded are applied, each at its recorded revision: a
// proposal staged again since (even with the same value) is refused
// stale_revision and nothing is applied. Every proposal is checked before
// any is applied; if one fails after others were applied, the outcome is
// uncertain.
func (s *Part) controlApplyEffect(ctx context.Context, req *flow.EffectRequest) flow.EffectResult {
	if err := req.Require(flow.CapabilityControlWrite); err != nil {
		return flow.Fail(err)
	}
	if req.Principal.Kind != flow.AuthorityHuman {
		return flow.Fail(fmt.Errorf("only a person applies staged control values; %s is %s", req.Principal.ID, req.Principal.Kind))
	}
	caller := s.callerOf(ctx, req.Principal)
	todo, err := s.controlProposals(ctx, req)
	if err != nil {
		return flow.Fail(err)
	}
	if req.Bindings != nil {
		bound, err := s.boundProposals(ctx, req, todo)
		if err != nil {
			return flow.Fail(err)
		}
		todo = bound
	}
	for i, snap := range todo {
		res := s.controls.Exec(ctx, caller, control.Command{Action: control.Apply, Identity: snap.Identity, Revision: snap.State.Staged.Revision},
			control.CommandContext{Source: control.SourceUser, Confirmed: true})
		if res.OK {
			continue
		}
		err := fmt.Errorf("applying %s/%s was refused: %s: %s", snap.Identity.FormID, snap.Identity.ControlID, res.Reason, res.Message)
		if i == 0 {
			if res.Reason == control.ReasonStaleRevision {
				return flow.Fail(&flow.Error{Code: flow.CodeStalePrescription, Message: err.Error()})
			}
			return flow.Fail(err)
		}
		return uncertain(req, err)
	}
	return flow.EffectResult{Outcome: flow.Succeeded}
}

// boundProposals checks the proposals staged now against those a person
// approved: the same controls, each at the revision the approval recorded
// (which fixes the value). It returns the proposals to apply, with the
// recorded revisions.
func (s *Part) boundProposals(ctx context.Context, req *flow.EffectRequest, now []control.Snapshot) ([]control.Snapshot, error) {
	want := map[string]flow.Binding{}
	for _, b := range req.Bindings {
		if b.Kind == "control" {
			want[b.Name] = b
		}
	}
	if len(want) != len(now) {
		return nil, &flow.Error{Code: flow.CodeStalePrescription, Message: "the staged proposals are not the ones the approval recorded; nothing was applied"}
	}
	for _, snap := range now {
		name := bindingName(snap.Identity)
		b, ok := want[name]
		if !ok || b.Revision != snap.State.Staged.Revision {
			return nil, &flow.Error{Code: flow.CodeStalePrescription, Message: fmt.Sprintf("the proposal on %s changed since the approval was filed (%s: stale_revision); nothing was applied", name, control.ReasonStaleRevision)}
		}
	}
	return now, nil
}

// flowRunWatch runs run.spawn and turns the progress of the Runs it
// started into facts "run.<transition>" of their instances: "running" at
// start, then "succeeded" or "failed" when the Run ends.
type flowRunWatch struct {
	s      *Part
	runs   Runs
	sub    *event.Subscription
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	watched map[string]runWatch // by Run id
}

// runWatch is a Run started by a transition.
type runWatch struct {
	owner    string
	instance string
	facet    string
}

func newFlowRunWatch(s *Part, runs Runs) *flowRunWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &flowRunWatch{s: s, runs: runs, cancel: cancel, done: make(chan struct{}), watched: map[string]runWatch{}}
	w.sub = s.Bus.Subscribe(s.Bus.Seq(), 256, func(e event.Event) bool { return e.Type == "run.status" })
	go w.loop(ctx)
	return w
}

func (w *flowRunWatch) close() {
	w.cancel()
	w.sub.Close()
	<-w.done
}

func (w *flowRunWatch) loop(ctx context.Context) {
	defer close(w.done)
	// Events say when a Run changed; the ticker retries Runs whose end
	// could not be recorded yet (the instance was mid-apply).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	events := make(chan string)
	go func() {
		defer close(events)
		for {
			e, err := w.sub.Next(ctx)
			if err != nil {
				return
			}
			var d struct {
				Run string `json:"run"`
			}
			_ = json.Unmarshal(e.Data, &d)
			select {
			case events <- d.Run:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case id, ok := <-events:
			if !ok {
				return
			}
			if id != "" {
				w.check(ctx, id)
				continue
			}
			w.checkAll(ctx) // a lagged event
		case <-tick.C:
			w.checkAll(ctx)
		}
	}
}

func (w *flowRunWatch) checkAll(ctx context.Context) {
	w.mu.Lock()
	ids := make([]string, 0, len(w.watched))
	for id := range w.watched {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	for _, id := range ids {
		w.check(ctx, id)
	}
}

// check records the end of a watched Run as a fact of its instance.
func (w *flowRunWatch) check(ctx context.Context, id string) {
	w.mu.Lock()
	rw, ok := w.watched[id]
	w.mu.Unlock()
	if !ok {
		return
	}
	st, err := w.runs.Status(ctx, rw.owner, id)
	if err != nil {
		if ctx.Err() == nil {
			w.mu.Lock()
			delete(w.watched, id) // the Run is gone (pruned or archived)
			w.mu.Unlock()
		}
		return
	}
	value := ""
	switch st.Status {
	case run.StatusDone:
		value = "succeeded"
	case run.StatusFailed, run.StatusExited, run.StatusCancelled, run.StatusKilled, run.StatusLost:
		value = "failed"
	default:
		return
	}
	cur, err := w.s.flows.Instance(ctx, rw.instance)
	if err != nil || cur.Pending != "" {
		return // gone, or mid-apply: the ticker tries again
	}
	inst, err := w.s.flows.Observe(ctx, rw.instance, flow.Observation{
		Facts:         map[string]flow.Fact{rw.facet: {Status: flow.StatusKnown, Value: value}},
		CheckRevision: true, Revision: cur.Revision,
	})
	if err != nil {
		if !errors.Is(err, flow.ErrConflict) {
			w.s.Log.Warn("recording a Run's end on its flow instance failed", "run", id, "instance", rw.instance, "err", err)
		}
		return
	}
	w.mu.Lock()
	delete(w.watched, id)
	w.mu.Unlock()
	w.s.publishFlow("flow.instance", inst.Owner, map[string]any{"instance": inst.ID, "revision": inst.Revision})
}

// spawnValues turns a run.spawn transition's arguments after the Recipe
// name ("--name value" pairs) and its parameters into the Recipe's values.
// secret lists the parameters that are secret.
func spawnValues(req *flow.EffectRequest) (values map[string]json.RawMessage, secret []string, err error) {
	if len(req.Arguments) == 0 {
		return nil, nil, fmt.Errorf("transition %s names no Recipe in its prescription arguments", req.Transition.ID)
	}
	values = map[string]json.RawMessage{}
	rest := req.Arguments[1:]
	for i := 0; i < len(rest); i++ {
		key, ok := strings.CutPrefix(rest[i], "--")
		if !ok || key == "" || i+1 >= len(rest) {
			return nil, nil, fmt.Errorf("prescription argument %q of %s is not a \"--name value\" pair", rest[i], req.Transition.ID)
		}
		values[key], _ = json.Marshal(rest[i+1])
		i++
	}
	for k, v := range req.Parameters {
		values[k], _ = json.Marshal(v)
	}
	for _, prm := range req.Transition.Parameters {
		if _, ok := req.Parameters[prm.Name]; ok && prm.Secret {
			secret = append(secret, prm.Name)
		}
	}
	return values, secret, nil
}

// spawnBind records, for an approval, the Recipe a run.spawn transition
// will start (with a digest of its stored definition, so that a Recipe
// rewritten after the approval was filed makes it stale) and the values it
// will get, secret ones hidden.
func (w *flowRunWatch) spawnBind(_ context.Context, req *flow.EffectRequest) ([]flow.Binding, error) {
	values, secret, err := spawnValues(req)
	if err != nil {
		return nil, err
	}
	_, raw, err := w.runs.LoadRecipe(req.Arguments[0])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	b := flow.Binding{Kind: "recipe", Name: req.Arguments[0], Digest: "sha256:" + hex.EncodeToString(sum[:])}
	var args []string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v := string(values[k])
		if slices.Contains(secret, k) {
			v = "(secret)"
		}
		args = append(args, "--"+k+" "+v)
	}
	b.Value = strings.Join(args, " ")
	return []flow.Binding{b}, nil
}

// spawnEffect is run.spawn. The first prescription argument names a
// Recipe (<data>/recipes/<name>.json); the arguments after it are
// "--name value" pairs, and together with the transition's parameters they
// become the Recipe's values; the secret parameters are named to the Runs
// part, which masks them in every view and stored document. The Run, owned
// by the principal that applies the transition, is named
// "<instance>.<transition>.<revision>"; its progress becomes the fact
// "run.<transition>": "running" now, "succeeded" or "failed" when it ends.
// When a person approved the transition, the Recipe must still be the one
// the approval recorded.
func (w *flowRunWatch) spawnEffect(ctx context.Context, req *flow.EffectRequest) flow.EffectResult {
	if err := req.Require(flow.CapabilityCommandExecute); err != nil {
		return flow.Fail(err)
	}
	values, secret, err := spawnValues(req)
	if err != nil {
		return flow.Fail(err)
	}
	if req.Bindings != nil {
		now, err := w.spawnBind(ctx, req)
		if err != nil {
			return flow.Fail(err)
		}
		if !slices.Contains(req.Bindings, now[0]) {
			return flow.Fail(&flow.Error{Code: flow.CodeStalePrescription, Message: fmt.Sprintf("Recipe %s is not the one the approval recorded; nothing was started", req.Arguments[0])})
		}
	}
	id := fmt.Sprintf("%s.%s.%d", req.Instance.ID, flow.LocalID(req.Transition.ID), req.Instance.Revision)
	facet := flow.RunFacet(req.Transition.ID)
	if _, err := w.runs.Spawn(ctx, req.Principal.ID, run.SpawnRequest{Recipe: req.Arguments[0], Values: values, RunID: id, Secret: secret}); err != nil {
		return flow.Fail(fmt.Errorf("starting Recipe %s: %v", req.Arguments[0], err))
	}
	// Watched once started; an end reported before this is picked up by
	// the next tick.
	w.mu.Lock()
	w.watched[id] = runWatch{owner: req.Principal.ID, instance: req.Instance.ID, facet: facet}
	w.mu.Unlock()
	return flow.EffectResult{Outcome: flow.Succeeded, Facts: map[string]flow.Fact{facet: {Status: flow.StatusKnown, Value: "running"}}}
}

// EffectCaller names a program and one of its transitions that may call an
// effect-only tool. Program is a program fingerprint (sha256:…) or a
// program id; an id matches only programs that are active, that is loaded
// by a person or the operator, or approved by a person. Transition is the
// transition's local or qualified id.
type EffectCaller struct {
	Program    string
	Transition string
}

// RegisterEffectOnlyTool registers a tool that runs only as the tool.call
// effect of the listed transitions. It is never in an MCP tool list. Any other caller is refused with
// forbidden before the handler runs: an agent or service calling it
// directly, a transition not listed, and a program that is not active
// (one an agent loaded, whatever authority its transitions declare).
func (s *Part) RegisterEffectOnlyTool(t tool.Tool, callers ...EffectCaller) error {
	if len(callers) == 0 {
		return fmt.Errorf("effect-only tool %s: name at least one program transition that may call it", t.Name)
	}
	callers = slices.Clone(callers)
	// No agent can call it, so no agent is shown it.
	t.Hidden = true
	inner := t.Handler
	t.Handler = func(ctx context.Context, c tool.Call) (*tool.Result, error) {
		if err := s.mayCallEffectOnly(ctx, t.Name, callers); err != nil {
			return nil, err
		}
		return inner(ctx, c)
	}
	return s.Tools.Register(t)
}

// mayCallEffectOnly checks that the tool running in ctx was called by the
// tool.call effect of one of callers, in an active program.
func (s *Part) mayCallEffectOnly(ctx context.Context, name string, callers []EffectCaller) error {
	fc, ok := EffectCallFrom(ctx)
	if !ok {
		return tool.Errorf("forbidden", "%s runs only as the effect of a Flow transition allowed to call it; ask flows_prescribe for the next step of your instance", name)
	}
	refuse := tool.Errorf("forbidden", "%s may be called only by the program transitions it names; %s (program %s) is not one of them, or its program was not loaded by a person or the operator", name, fc.Transition, fc.Program)
	load, err := s.flows.ProgramLoad(ctx, fc.Program)
	if err != nil || !load.Trusted() {
		return refuse
	}
	for _, c := range callers {
		if c.Program != fc.Program && c.Program != load.ProgramID {
			continue
		}
		if c.Transition == fc.Transition || load.ProgramID+"/"+c.Transition == fc.Transition {
			return nil
		}
	}
	return refuse
}

// WarningPrefix begins a line of an approval summary that warns the person
// deciding (see RegisterApprovalSummary): the approval card shows that
// line, without the prefix, apart from the others, so it is read first.
const WarningPrefix = "Warning: "

// ApprovalSummaryFunc writes the summary of an approval of one program's
// transitions (see Part.RegisterApprovalSummary). Returning false leaves
// the approval to the summary of its transition's effect.
type ApprovalSummaryFunc func(ctx context.Context, req *flow.SummaryRequest) (flow.Summary, bool)

// perProgram holds what apps register for each program id: approval
// summaries, start checks.
type perProgram[F any] struct {
	mu sync.RWMutex
	m  map[string]F
}

func (p *perProgram[F]) set(programID string, f F) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]F{}
	}
	p.m[programID] = f
}

func (p *perProgram[F]) get(programID string) F {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.m[programID]
}

// RegisterApprovalSummary makes fn write the summary recorded on every
// approval filed for a transition of the program programID: the sentence
// a person reads first on the approval card. fn sees the instance's facts
// and the parameters with secret values hidden. Registering again for the
// same program replaces fn.
func (s *Part) RegisterApprovalSummary(programID string, fn ApprovalSummaryFunc) {
	s.flowSummaries.set(programID, fn)
}

// summarizeApproval is the kernel's Summarizer: the program's own summary
// when the app registered one, otherwise that of the transition's effect.
func (s *Part) summarizeApproval(ctx context.Context, req *flow.SummaryRequest) flow.Summary {
	fn := s.flowSummaries.get(req.Program.ID())
	if fn != nil {
		if sum, ok := fn(ctx, req); ok && sum.Text != "" {
			return sum
		}
	}
	return s.effectSummary(ctx, req)
}

// effectSummary says what a transition's effect will do, from what the
// approval records: the controls it applies with their current and
// proposed values, the Recipe it starts and its values, the tool it calls
// and its parameters, or the phase change and facts it assigns. Secret
// values are shown as "(secret)". The step the program takes after this
// one, when it does more than change state, is added as a line.
func (s *Part) effectSummary(ctx context.Context, req *flow.SummaryRequest) flow.Summary {
	t := &req.Transition
	var sum flow.Summary
	switch t.Effect {
	case flow.EffectControlApply:
		n := 0
		for _, b := range req.Bindings {
			if b.Kind != "control" {
				continue
			}
			n++
			label := s.controlLabel(ctx, b.Name)
			if b.Secret {
				sum.Lines = append(sum.Lines, fmt.Sprintf("%s: a hidden value (secret)", label))
				continue
			}
			sum.Lines = append(sum.Lines, fmt.Sprintf("%s: %s → %s", label, b.Current, b.Value))
		}
		switch n {
		case 0:
			sum.Text = "Apply the proposed changes"
		case 1:
			sum.Text = "Apply the proposed change: " + sum.Lines[0]
		default:
			sum.Text = fmt.Sprintf("Apply %d proposed changes", n)
		}
	case flow.EffectRunSpawn:
		recipe, args := recipeArguments(t, req.Parameters)
		sum.Text = "Start the Recipe " + recipe
		if len(args) > 0 {
			sum.Text += " with " + strings.Join(args, ", ")
		}
		sum.Lines = args
	case flow.EffectToolCall:
		name := t.ID
		if ps := t.Prescription; ps != nil {
			name = ps.Operation
			if len(ps.Arguments) > 0 {
				name = ps.Arguments[0]
			}
		}
		for _, b := range req.Bindings {
			if b.Kind == "tool" {
				name = b.Value
			}
		}
		sum.Text = "Call the tool " + name
		params := parameterLines(req.Parameters)
		if len(params) > 0 {
			sum.Text += " with " + strings.Join(params, ", ")
		}
		sum.Lines = params
	default:
		sum.Text = fmt.Sprintf("Move %s from %s to %s", req.Instance.ID, req.Instance.Phase, strings.Join(t.TargetPhases, " or "))
		for _, a := range t.Assignments {
			sum.Lines = append(sum.Lines, fmt.Sprintf("%s becomes “%s”", host.PlainName(a.Facet), host.PlainValue(a.Value)))
		}
		sum.Lines = append(sum.Lines, parameterLines(req.Parameters)...)
	}
	if next := nextStep(req.Program, t); next != "" {
		sum.Lines = append(sum.Lines, next)
	}
	return sum
}

// controlLabel is a control's label for a person, "form/control" when it
// has none or is no longer registered.
func (s *Part) controlLabel(ctx context.Context, name string) string {
	base, subject, about := strings.Cut(name, " for ")
	form, ctl, _ := strings.Cut(base, "/")
	label := base
	if snap, ok := s.controls.Registry().Get(ctx, control.Identity{FormID: form, ControlID: ctl}); ok && snap.Metadata.Label != "" {
		label = snap.Metadata.Label
	}
	if about {
		label += " for " + subject
	}
	return label
}

// bindingName names the control id in an approval's bindings: form/control,
// and the record it is about when it is about one ("accounts/limit for
// customer mallory (Mallory)"), so that two controls of one form that
// differ only by their record are bound, and shown, apart.
func bindingName(id control.Identity) string {
	name := id.FormID + "/" + id.ControlID
	if sub := id.Subject; sub != nil {
		name += " for " + sub.Type + " " + sub.ID
		if sub.Label != "" {
			name += " (" + sub.Label + ")"
		}
	}
	return name
}

// parameterLines renders parameters as "name: value", secret ones as
// "name: (secret)".
func parameterLines(params []flow.ApprovalParameter) []string {
	var out []string
	for _, p := range params {
		v := p.Value
		if p.Secret {
			v = "(secret)"
		}
		out = append(out, p.Name+": "+v)
	}
	return out
}

// recipeArguments is the Recipe a run.spawn transition starts and its
// values as "name: value" (its "--name value" prescription arguments, then
// its parameters, secret ones hidden), sorted by name.
func recipeArguments(t *flow.Transition, params []flow.ApprovalParameter) (string, []string) {
	var args []string
	if ps := t.Prescription; ps != nil {
		args = ps.Arguments
	}
	if len(args) == 0 {
		return "(none named)", nil
	}
	values := map[string]string{}
	rest := args[1:]
	for i := 0; i+1 < len(rest); i += 2 {
		if k, ok := strings.CutPrefix(rest[i], "--"); ok {
			values[k] = rest[i+1]
		}
	}
	for _, p := range params {
		values[p.Name] = p.Value
		if p.Secret {
			values[p.Name] = "(secret)"
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		out = append(out, k+": "+values[k])
	}
	return args[0], out
}

// nextStep describes the step a program takes after t when that step acts
// beyond the instance's state (calls a tool, starts a Recipe, applies
// controls), so that approving a state change shows its consequence. It
// names the first PROGRESS transition leaving one of t's target phases.
func nextStep(p *flow.Program, t *flow.Transition) string {
	if p == nil {
		return ""
	}
	for _, n := range p.Transitions() {
		if n.SelectionClass != "PROGRESS" || n.Effect == flow.EffectStateAssign || n.ID == t.ID {
			continue
		}
		if !slices.ContainsFunc(n.SourcePhases, func(ph string) bool { return slices.Contains(t.TargetPhases, ph) }) {
			continue
		}
		what := n.Effect
		if ps := n.Prescription; ps != nil {
			what = ps.Operation
			if len(ps.Arguments) > 0 {
				what += " " + strings.Join(ps.Arguments, " ")
			}
			if ps.ExpectedPostcondition != "" {
				what += " (" + ps.ExpectedPostcondition + ")"
			}
		}
		return fmt.Sprintf("Then %s: %s", flow.LocalID(n.ID), what)
	}
	return ""
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// registerFlowEffects wires the effects the server can run: tool.call
// through the tool registry, control.apply through the control registry,
// and run.spawn through the Runs part when it is present. state.assign is
// built into the kernel.
func (s *Server) registerFlowEffects() error {
	if err := s.flowInv.RegisterEffect(flow.EffectToolCall, flow.CapabilityToolInvoke, flow.EffectFunc(s.toolCallEffect)); err != nil {
		return err
	}
	if err := s.flowInv.RegisterEffect(flow.EffectControlApply, flow.CapabilityControlWrite, flow.EffectFunc(s.controlApplyEffect)); err != nil {
		return err
	}
	if s.runs != nil {
		s.flowRuns = newFlowRunWatch(s, s.runs)
		return s.flowInv.RegisterEffect(flow.EffectRunSpawn, flow.CapabilityCommandExecute, flow.EffectFunc(s.flowRuns.spawnEffect))
	}
	return nil
}

// flowCallKey marks the context of a tool called by a Flow transition's
// tool.call effect; its value is a flowCall.
type flowCallKey struct{}

// flowCall says which transition of which instance called a tool.
type flowCall struct {
	Instance   string
	Transition string
}

// flowCallFrom returns the transition that called the tool running in ctx,
// if a Flow effect called it.
func flowCallFrom(ctx context.Context) (flowCall, bool) {
	c, ok := ctx.Value(flowCallKey{}).(flowCall)
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

// toolCallEffect is tool.call. It calls the tool named by the
// transition's first prescription argument (the operation when there are
// no arguments) with a JSON object of the transition's parameters (string
// values, secret ones included, since the tool needs them), as the
// principal that applies the transition. The tool's structured result may
// report "facts" and "phase". A tool's refusal (a coded error, or a result
// marked as an error) changes nothing and fails the transition; any other
// failure leaves the outcome uncertain, and the facets of the transition's
// target conditions become "unknown" so that a RECOVERY transition can
// reconcile them.
func (s *Server) toolCallEffect(ctx context.Context, req *flow.EffectRequest) flow.EffectResult {
	if err := req.Require(flow.CapabilityToolInvoke); err != nil {
		return flow.Fail(err)
	}
	name := ""
	if ps := req.Transition.Prescription; ps != nil {
		name = ps.Operation
	}
	if len(req.Arguments) > 0 {
		name = req.Arguments[0]
	}
	if strings.HasPrefix(tool.Normalize(name), "flows_") {
		return flow.Fail(fmt.Errorf("tool.call cannot call the Flow tool %s; a transition cannot drive another one", name))
	}
	if _, ok := s.tools.Lookup(name); !ok {
		return flow.Fail(fmt.Errorf("no tool is named %q; register it before applying %s", name, req.Transition.ID))
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
	ctx = context.WithValue(ctx, flowCallKey{}, flowCall{Instance: req.Instance.ID, Transition: req.Transition.ID})
	res, err := s.tools.Call(ctx, name, tool.Call{Principal: caller, Args: args})
	if err != nil {
		var te *tool.Error
		if errors.As(err, &te) {
			return flow.Fail(fmt.Errorf("tool %s refused: %s: %s", name, te.Code, te.Message))
		}
		return uncertain(req, fmt.Errorf("tool %s failed; whether it acted is unknown", name))
	}
	if res == nil {
		res = &tool.Result{}
	}
	if res.IsError {
		return flow.Fail(fmt.Errorf("tool %s reported an error; nothing was applied", name))
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
func (s *Server) callerOf(ctx context.Context, p flow.Principal) store.Principal {
	if sp, err := s.store.Principal(ctx, p.ID); err == nil {
		return sp
	}
	return store.Principal{ID: p.ID, Kind: p.Kind, Grants: p.Grants}
}

// controlApplyEffect is control.apply. Each prescription argument names
// controls whose staged proposals to apply: "formId/controlId" for one
// control, or "formId" for every proposal staged on the form. Applying is a
// person's act: the effect refuses any other principal (the kernel already
// resolves the transition as FRONTIER awaiting a person for them). Every
// proposal is checked before any is applied; if one fails after others
// were applied, the outcome is uncertain.
func (s *Server) controlApplyEffect(ctx context.Context, req *flow.EffectRequest) flow.EffectResult {
	if err := req.Require(flow.CapabilityControlWrite); err != nil {
		return flow.Fail(err)
	}
	if req.Principal.Kind != flow.AuthorityHuman {
		return flow.Fail(fmt.Errorf("only a person applies staged control values; %s is %s", req.Principal.ID, req.Principal.Kind))
	}
	if len(req.Arguments) == 0 {
		return flow.Fail(fmt.Errorf("transition %s names no controls in its prescription arguments", req.Transition.ID))
	}
	caller := s.callerOf(ctx, req.Principal)
	var todo []control.Snapshot
	for _, arg := range req.Arguments {
		form, ctl, one := strings.Cut(arg, "/")
		found := false
		for _, snap := range s.controls.Proposals(ctx, form) {
			if one && snap.Identity.ControlID != ctl || !s.formVisible(caller, snap.Identity.FormID) {
				continue
			}
			if snap.State.Staged.Stale {
				return flow.Fail(fmt.Errorf("the proposal on %s/%s is stale; stage it again", snap.Identity.FormID, snap.Identity.ControlID))
			}
			todo = append(todo, snap)
			found = true
		}
		if !found {
			return flow.Fail(fmt.Errorf("nothing is staged on %s; stage a value before applying %s", arg, req.Transition.ID))
		}
	}
	for i, snap := range todo {
		res := s.execControl(ctx, caller, control.Command{Action: control.Apply, Identity: snap.Identity, Revision: snap.State.Staged.Revision},
			control.CommandContext{Source: control.SourceUser, Confirmed: true})
		if res.OK {
			continue
		}
		err := fmt.Errorf("applying %s/%s was refused: %s: %s", snap.Identity.FormID, snap.Identity.ControlID, res.Reason, res.Message)
		if i == 0 {
			return flow.Fail(err)
		}
		return uncertain(req, err)
	}
	return flow.EffectResult{Outcome: flow.Succeeded}
}

// runSpawner starts Recipes and reports on Runs; *run.Manager is one.
type runSpawner interface {
	Spawn(ctx context.Context, ownerID string, req run.SpawnRequest) (map[string]any, error)
	Status(ctx context.Context, ownerID, id string) (map[string]any, error)
}

// flowRunWatch runs run.spawn and turns the progress of the Runs it
// started into facts "run.<transition>" of their instances: "running" at
// start, then "succeeded" or "failed" when the Run ends.
type flowRunWatch struct {
	s      *Server
	runs   runSpawner
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

func newFlowRunWatch(s *Server, runs runSpawner) *flowRunWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &flowRunWatch{s: s, runs: runs, cancel: cancel, done: make(chan struct{}), watched: map[string]runWatch{}}
	w.sub = s.bus.Subscribe(s.bus.Seq(), 256, func(e event.Event) bool { return e.Type == "run.status" })
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
	switch st["status"] {
	case "done":
		value = "succeeded"
	case "failed", "exited", "cancelled", "killed":
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
			w.s.log.Warn("recording a Run's end on its flow instance failed", "run", id, "instance", rw.instance, "err", err)
		}
		return
	}
	w.mu.Lock()
	delete(w.watched, id)
	w.mu.Unlock()
	w.s.publishFlow("flow.instance", inst.Owner, map[string]any{"instance": inst.ID, "revision": inst.Revision})
}

// spawnEffect is run.spawn. The first prescription argument names a
// Recipe (<data>/recipes/<name>.json); the arguments after it are
// "--name value" pairs, and together with the transition's parameters they
// become the Recipe's values. The Run, owned by the principal that applies
// the transition, is named "<instance>.<transition>.<revision>"; its
// progress becomes the fact "run.<transition>": "running" now, "succeeded"
// or "failed" when it ends.
func (w *flowRunWatch) spawnEffect(ctx context.Context, req *flow.EffectRequest) flow.EffectResult {
	if err := req.Require(flow.CapabilityCommandExecute); err != nil {
		return flow.Fail(err)
	}
	if len(req.Arguments) == 0 {
		return flow.Fail(fmt.Errorf("transition %s names no Recipe in its prescription arguments", req.Transition.ID))
	}
	values := map[string]json.RawMessage{}
	rest := req.Arguments[1:]
	for i := 0; i < len(rest); i++ {
		key, ok := strings.CutPrefix(rest[i], "--")
		if !ok || key == "" || i+1 >= len(rest) {
			return flow.Fail(fmt.Errorf("prescription argument %q of %s is not a \"--name value\" pair", rest[i], req.Transition.ID))
		}
		values[key], _ = json.Marshal(rest[i+1])
		i++
	}
	for k, v := range req.Parameters {
		values[k], _ = json.Marshal(v)
	}
	id := fmt.Sprintf("%s.%s.%d", req.Instance.ID, flow.LocalID(req.Transition.ID), req.Instance.Revision)
	facet := flow.RunFacet(req.Transition.ID)
	if _, err := w.runs.Spawn(ctx, req.Principal.ID, run.SpawnRequest{Recipe: req.Arguments[0], Values: values, RunID: id}); err != nil {
		return flow.Fail(fmt.Errorf("starting Recipe %s: %v", req.Arguments[0], err))
	}
	// Watched once started; an end reported before this is picked up by
	// the next tick.
	w.mu.Lock()
	w.watched[id] = runWatch{owner: req.Principal.ID, instance: req.Instance.ID, facet: facet}
	w.mu.Unlock()
	return flow.EffectResult{Outcome: flow.Succeeded, Facts: map[string]flow.Fact{facet: {Status: flow.StatusKnown, Value: "running"}}}
}

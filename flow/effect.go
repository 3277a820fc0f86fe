package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Outcome is how an effect ended.
type Outcome int

const (
	// Succeeded: the effect did what the transition asked. The kernel
	// verifies the result and commits it.
	Succeeded Outcome = iota
	// Failed: the effect failed and changed nothing outside the kernel (or
	// undid what it changed). The instance is left as it was.
	Failed
	// Uncertain: the effect may or may not have taken place. The instance
	// enters recovery mode.
	Uncertain
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	case Uncertain:
		return "uncertain"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// EffectRequest is everything an effect may use. It carries only the
// effective capabilities of the admission; an effect must check its own
// minimum with Require before acting.
type EffectRequest struct {
	// Instance is the state before the transition.
	Instance Instance
	// Transition is the transition being applied (qualified id).
	Transition Transition
	// Prescription is the prescription being applied.
	Prescription Prescription
	// Capabilities is the effective capability set, sorted.
	Capabilities []string
	// Parameters are the parameter values, secrets included. Effects must
	// not log or return secret values.
	Parameters map[string]string
	// Arguments are the transition's prescription arguments, in source
	// order.
	Arguments []string
	// Principal is who applies the transition.
	Principal Principal
	// Bindings, when the transition is applied by a person's approval, is
	// what the approval recorded and the person saw: the effect must act
	// on exactly that (for example the staged revisions it names) and fail
	// rather than act on anything else.
	Bindings []Binding
}

// Binding is one thing an approval will act on, recorded when the approval
// is filed and shown to the person who decides: a staged control value and
// its revision, a parameter, a tool, a Recipe, a fact. Approving applies
// exactly the recorded bindings; when any of them has moved the approval is
// refused as stale.
type Binding struct {
	// Kind is what is bound: "control", "parameter", "tool", "recipe",
	// "fact" or an application's own kind.
	Kind string `json:"kind"`
	// Name identifies it within its kind (a control "form/control", a
	// parameter or tool name, a facet).
	Name string `json:"name"`
	// Current is the value in effect now, when that differs from what
	// will be applied (a control's live value).
	Current string `json:"current,omitempty"`
	// Value is what will be applied or used; empty when Secret.
	Value string `json:"value,omitempty"`
	// Revision is the revision of what is bound, when it has one (a
	// staged control proposal).
	Revision int64 `json:"revision,omitempty"`
	// Secret hides Value; Digest still detects a change.
	Secret bool   `json:"secret,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// Binder is implemented by effects that can say, before they run, what
// they would act on. The kernel calls Bind when an approval is filed and
// again when a person approves it; the two must be equal or the approval
// is stale. Bind must not change anything.
type Binder interface {
	Bind(ctx context.Context, req *EffectRequest) ([]Binding, error)
}

// BinderFunc adapts a function to Binder.
type BinderFunc func(ctx context.Context, req *EffectRequest) ([]Binding, error)

// Bind calls f.
func (f BinderFunc) Bind(ctx context.Context, req *EffectRequest) ([]Binding, error) {
	return f(ctx, req)
}

func cloneBindings(b []Binding) []Binding {
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

// Require returns an EFFECT_CAPABILITY_DENIED error unless capability is in
// the effective set.
func (r *EffectRequest) Require(capability string) error {
	if _, ok := slices.BinarySearch(r.Capabilities, capability); ok {
		return nil
	}
	return &Error{Code: CodeEffectCapabilityDenied, Message: fmt.Sprintf("the effect of %s needs capability %q, which the admission did not make effective", r.Transition.ID, capability)}
}

// EffectResult reports an effect's outcome and the state it produced.
type EffectResult struct {
	Outcome Outcome
	// Phase is the phase reached; it must be one of the transition's target
	// phases. Empty means the single target phase.
	Phase string
	// Facts are facts to set on the instance. On an Uncertain outcome they
	// record what the effect knows (for example status unknown).
	Facts map[string]Fact
	// Err explains a Failed or Uncertain outcome.
	Err error
}

// Effect performs a transition's change in the world. Apply must honour ctx
// and must never run without its kernel minimum among req.Capabilities.
type Effect interface {
	Apply(ctx context.Context, req *EffectRequest) EffectResult
}

// EffectFunc adapts a function to Effect.
type EffectFunc func(ctx context.Context, req *EffectRequest) EffectResult

// Apply calls f.
func (f EffectFunc) Apply(ctx context.Context, req *EffectRequest) EffectResult { return f(ctx, req) }

// Fail returns a Failed result for err.
func Fail(err error) EffectResult { return EffectResult{Outcome: Failed, Err: err} }

// assignState is the built-in state.assign effect: it sets each assignment's
// facet to a known value and moves to the single target phase.
func assignState(ctx context.Context, req *EffectRequest) EffectResult {
	if err := req.Require(CapabilityStateWrite); err != nil {
		return Fail(err)
	}
	if err := ctx.Err(); err != nil {
		return Fail(err)
	}
	facts := make(map[string]Fact, len(req.Transition.Assignments))
	for _, a := range req.Transition.Assignments {
		facts[a.Facet] = Fact{Status: StatusKnown, Value: a.Value}
	}
	return EffectResult{Outcome: Succeeded, Facts: facts}
}

// VerifyRequest is what a verifier checks: the state before and after the
// transition and the effect's result.
type VerifyRequest struct {
	Transition Transition
	Before     Instance
	After      Instance
	Result     EffectResult
}

// Verifier checks that a transition reached its target. A non-nil error
// means the outcome cannot be trusted: the instance enters recovery mode.
type Verifier interface {
	Verify(ctx context.Context, req *VerifyRequest) error
}

// VerifierFunc adapts a function to Verifier.
type VerifierFunc func(ctx context.Context, req *VerifyRequest) error

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, req *VerifyRequest) error { return f(ctx, req) }

// verifyConditions is conditions.match: the new phase is a target phase and
// every target condition holds.
func verifyConditions(_ context.Context, req *VerifyRequest) error {
	t, after := &req.Transition, &req.After
	if !contains(t.TargetPhases, after.Phase) {
		return fmt.Errorf("phase %s is not a target phase of %s", after.Phase, t.ID)
	}
	if i := after.firstFailing(t.TargetConditions); i >= 0 {
		c := &t.TargetConditions[i]
		f := after.Fact(c.Facet)
		return fmt.Errorf("target condition on %s does not hold (fact is %s%s)", c.Facet, f.Status, valueSuffix(f))
	}
	return nil
}

// verifyRunSucceeded is run.succeeded: conditions.match, and every Run the
// transition depends on finished with success. Those Runs are the facets
// named "run.…" in its source or target conditions, and, for a transition
// with an effect, its own Run RunFacet(id). Each must be known with value
// "succeeded".
func verifyRunSucceeded(ctx context.Context, req *VerifyRequest) error {
	if err := verifyConditions(ctx, req); err != nil {
		return err
	}
	t := &req.Transition
	var facets []string
	if t.Effect != "" {
		facets = append(facets, RunFacet(t.ID))
	}
	for _, cs := range [][]Condition{t.SourceConditions, t.TargetConditions} {
		for _, c := range cs {
			if strings.HasPrefix(c.Facet, "run.") && !slices.Contains(facets, c.Facet) {
				facets = append(facets, c.Facet)
			}
		}
	}
	for _, facet := range facets {
		if f := req.After.Fact(facet); f.Status != StatusKnown || f.Value != "succeeded" {
			return fmt.Errorf("fact %s is %s%s, not known \"succeeded\"", facet, f.Status, valueSuffix(f))
		}
	}
	return nil
}

// RunFacet returns the facet under which a Run started by transition id
// reports its progress: "run." and the local transition id.
func RunFacet(transition string) string { return "run." + LocalID(transition) }

var errEffectPanicked = errors.New("the effect panicked")

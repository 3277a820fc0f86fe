package flow

import (
	"fmt"
	"strings"
	"testing"
)

// referenceReason formats why t is not a candidate the plain way, one
// fmt.Sprintf per reason: the texts Resolve must reproduce exactly.
func referenceReason(t *Transition, inst *Instance, objective string, requested *Transition) *Reason {
	r := func(code, format string, args ...any) *Reason {
		return &Reason{Transition: t.ID, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case requested != nil && t != requested:
		return r(ReasonNotRequested, "another transition was requested")
	case !t.Controllable():
		return r(ReasonObservedOnly, "OBSERVED_EXTERNAL transitions record outside events and are never applied")
	case inst.Recovery != nil && t.SelectionClass != Recovery:
		return r(ReasonRecoveryMode, "the instance needs recovery after %s; only RECOVERY transitions are selectable", inst.Recovery.Transition)
	case !contains(t.SourcePhases, inst.Phase):
		return r(ReasonSourcePhase, "phase %s is not among its source phases %s", inst.Phase, strings.Join(t.SourcePhases, ", "))
	}
	if i := inst.firstFailing(t.SourceConditions); i >= 0 {
		c := &t.SourceConditions[i]
		f := inst.Fact(c.Facet)
		suffix := ""
		if f.Value != "" {
			suffix = fmt.Sprintf(" %q", f.Value)
		}
		return r(ReasonSourceCondition, "source condition on %s does not hold (fact is %s%s)", c.Facet, f.Status, suffix)
	}
	if len(t.Objectives) > 0 && !contains(t.Objectives, objective) {
		if objective == "" {
			return r(ReasonObjectiveScope, "it serves objectives %s and the instance has none", strings.Join(t.Objectives, ", "))
		}
		return r(ReasonObjectiveScope, "it does not serve objective %q", objective)
	}
	if requested == nil {
		if Rank(t.SelectionClass) > 3 {
			return r(ReasonExplicitOnly, "%s transitions are taken only when requested", t.SelectionClass)
		}
		if contains(t.TargetPhases, inst.Phase) && inst.firstFailing(t.TargetConditions) < 0 {
			return r(ReasonAlreadySatisfied, "its target phase and conditions already hold")
		}
	}
	return nil
}

// TestReasonTexts checks every reason of a range of decisions, code and
// message, against the plain formatting.
func TestReasonTexts(t *testing.T) {
	p := mustLoad(t, fullProgram(t))
	inv := testInventory()
	pr := agent(CapabilityStateWrite)
	pr.Policy = true
	params := map[string]string{"warehouse": "north"}
	tests := []struct {
		name string
		inst func(in *Instance)
		req  Request
		kind Kind
	}{
		{name: "prescribed", req: Request{Parameters: params}, kind: Prescribed},
		{name: "requested", req: Request{Transition: "cancel"}, kind: Frontier},
		{name: "requested does not apply", req: Request{Transition: "ship"}, kind: Refused},
		{name: "marked", inst: func(in *Instance) { in.Phase = "shipped"; in.Facts["carrier.label"] = known("L1") }, kind: Marked},
		{name: "fact absent", inst: func(in *Instance) { delete(in.Facts, "payment.status") }, kind: Blocked},
		{name: "fact value needing quotes", inst: func(in *Instance) {
			in.Facts["payment.status"] = Fact{Status: StatusStale, Value: "say \"hi\"\\\n\tà\u2028\x7f"}
		}, kind: Blocked},
		{name: "already satisfied", inst: func(in *Instance) {
			in.Phase, in.Objective = "shipped", ""
			in.Facts["run.rebuild-index"] = known("succeeded")
		}, kind: Blocked},
		{name: "no objective", inst: func(in *Instance) { in.Objective = "" }, req: Request{Parameters: params}, kind: Blocked},
		{name: "other objective", req: Request{Parameters: params}, inst: func(in *Instance) { in.Objective = "cancelled" }},
		{name: "recovery", inst: func(in *Instance) {
			in.Phase = "reserved"
			in.Facts["stock.reserved"] = Fact{Status: StatusUnknown}
			in.Recovery = &RecoveryMark{Transition: "order-fulfilment/ship", Prescription: "prx-x", Cause: "timeout"}
		}, kind: Prescribed},
		{name: "tied or outranked", inst: func(in *Instance) { in.Phase = "reserved" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newOrder(p)
			if tt.inst != nil {
				tt.inst(&in)
			}
			d := Resolve(p, inv, &in, &pr, tt.req, t0)
			if tt.kind != "" && d.Kind != tt.kind {
				t.Fatalf("decision = %s %s: %s, want %s", d.Kind, d.Code, d.Message, tt.kind)
			}
			objective := in.Objective
			if tt.req.Objective != "" {
				objective = tt.req.Objective
			}
			var requested *Transition
			if tt.req.Transition != "" {
				requested = p.lookup(tt.req.Transition)
			}
			got := make(map[string]Reason, len(d.Reasons))
			for _, r := range d.Reasons {
				got[r.Transition] = r
			}
			for _, tr := range p.registry {
				want := referenceReason(tr, &in, objective, requested)
				r, ok := got[tr.ID]
				switch {
				case want == nil && ok && r.Code != ReasonOutranked && r.Code != ReasonObjectiveMet:
					t.Errorf("%s: reason %s %q for a candidate", tr.ID, r.Code, r.Message)
				case want == nil && ok && r.Code == ReasonOutranked && r.Message != "outranked by "+d.Transition:
					t.Errorf("%s: outranked message %q, want by %s", tr.ID, r.Message, d.Transition)
				case want == nil && ok && r.Code == ReasonObjectiveMet && r.Message != fmt.Sprintf("objective %q is met", objective):
					t.Errorf("%s: objective met message %q", tr.ID, r.Message)
				case want != nil && (!ok || r != *want):
					t.Errorf("%s: reason %+v, want %+v", tr.ID, r, *want)
				}
			}
			if d.Kind == Refused && d.Code == CodeTransitionInapplicable {
				if want := referenceReason(requested, &in, objective, requested); want == nil || d.Message != want.Message {
					t.Errorf("refusal message %q, want %+v", d.Message, want)
				}
			}
		})
	}
}

// TestReasonTextsLarge compares the reasons of a decision over 1,000
// transitions, which fill several chunks of the reason buffer.
func TestReasonTextsLarge(t *testing.T) {
	p := mustLoad(t, genProgram(1000))
	inv := testInventory()
	for _, phase := range []string{"s0", "s500", "s999_retry", "elsewhere"} {
		in := Instance{ID: "i", Program: p.Fingerprint(), Phase: phase, Objective: "done",
			Facts: map[string]Fact{"ledger.balance": known("ok"), "queue.depth": known("3")}}
		pr := agent(CapabilityStateWrite)
		d := Resolve(p, inv, &in, &pr, Request{Parameters: map[string]string{"reference": "r"}}, t0)
		n := 0
		for _, tr := range p.registry {
			want := referenceReason(tr, &in, "done", nil)
			if want == nil {
				continue
			}
			if n >= len(d.Reasons) || d.Reasons[n] != *want {
				t.Fatalf("phase %s: reason %d = %+v, want %+v", phase, n, d.Reasons[min(n, len(d.Reasons)-1)], *want)
			}
			n++
		}
		if n != len(d.Reasons) {
			t.Fatalf("phase %s: %d reasons, want %d", phase, len(d.Reasons), n)
		}
	}
}

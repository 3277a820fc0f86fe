package flow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/assent-run/assent/flow"
)

// refund is a small program: an agent drafts a refund, a person approves
// it, and state.assign records each step.
const refund = `{
  "schema_version": 1, "program_id": "refund", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["human.approve", "state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "refunded", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["approved"]}]}],
  "transitions": [
    {"id": "draft", "selection_class": "PROGRESS", "priority": 1,
     "source_phases": ["new"], "target_phases": ["drafted"], "authority": ["agent"],
     "assignments": [{"facet": "refund.amount", "value": "40.00"}],
     "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "draft_refund", "expected_postcondition": "a refund is drafted"}},
    {"id": "approve", "selection_class": "PROGRESS", "priority": 1,
     "source_phases": ["drafted"], "target_phases": ["approved"], "authority": ["human"],
     "required_capabilities": ["human.approve", "state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "approve_refund", "expected_postcondition": "a person approved the refund"}}
  ]
}`

func ExampleLoad() {
	p, err := flow.Load([]byte(refund), flow.NewInventory("0.1.0"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.ID(), p.Len())
	for _, t := range p.Transitions() {
		fmt.Println(t.ID, t.SelectionClass)
	}
	_, err = flow.Load([]byte(`{"schema_version": 2}`), flow.NewInventory("0.1.0"))
	fmt.Println(flow.ErrorCode(err))
	// Output:
	// refund 2
	// refund/approve PROGRESS
	// refund/draft PROGRESS
	// PROGRAM_SCHEMA_UNSUPPORTED
}

func ExampleResolve() {
	inv := flow.NewInventory("0.1.0")
	p, err := flow.Load([]byte(refund), inv)
	if err != nil {
		panic(err)
	}
	inst := flow.Instance{ID: "r-1", Program: p.Fingerprint(), Phase: "new", Objective: "refunded"}
	bot := flow.Principal{ID: "bot", Kind: "agent", Grants: []string{"state.write"}}
	d := flow.Resolve(p, inv, &inst, &bot, flow.Request{}, time.Now())
	fmt.Println(d.Kind, d.Transition, d.Prescription.EffectiveCapabilities)

	inst.Phase = "drafted"
	d = flow.Resolve(p, inv, &inst, &bot, flow.Request{}, time.Now())
	fmt.Println(d.Kind, d.Transition, "awaiting", d.Awaiting)
	// Output:
	// PRESCRIBED refund/draft [state.write]
	// FRONTIER refund/approve awaiting human
}

// ExampleKernel shows the path from an agent's request to a person's
// approval and the receipt the agent then sees.
func ExampleKernel() {
	ctx := context.Background()
	k := flow.NewKernel(flow.NewMemoryStore(), flow.NewInventory("0.1.0"))
	p, err := k.AddProgram(ctx, []byte(refund))
	if err != nil {
		panic(err)
	}
	if _, err := k.Start(ctx, flow.Instance{ID: "r-1", Program: p.Fingerprint(), Phase: "new"}); err != nil {
		panic(err)
	}
	bot := flow.Principal{ID: "bot", Kind: "agent", Grants: []string{"state.write"}}

	// The agent drafts: prescribed, then applied.
	d, _ := k.Prescribe(ctx, "r-1", bot, flow.Request{})
	r, err := k.Apply(ctx, d.Prescription.ID, bot)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Transition, "revision", r.Revision)

	// Approval needs a person: the agent files a request.
	a, err := k.RequestApproval(ctx, "r-1", bot, flow.Request{})
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Status, a.Transition, a.Operation)

	// A person approves in the inbox.
	alice := flow.Principal{ID: "alice", Kind: "human", Grants: []string{"state.write"}}
	r, err = k.Approve(ctx, a.ID, alice)
	if err != nil {
		panic(err)
	}
	a, _ = k.Approval(ctx, a.ID)
	fmt.Println(a.Status, a.Receipt == r.ID, r.Phase, "revision", r.Revision)
	// Output:
	// refund/draft revision 1
	// pending refund/approve approve_refund
	// approved true approved revision 2
}

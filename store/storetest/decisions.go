package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
)

// decisionProgram is a Control Program with one transition that only a
// person may allow (cancel) and one that an agent takes alone (archive).
const decisionProgram = `{
 "schema_version": 1,
 "program_id": "decisions",
 "program_version": "1.0.0",
 "requires_runtime": ">=0.1.0",
 "capabilities": {
  "effects": ["state.assign"],
  "verifiers": ["conditions.match"],
  "capability_surface": ["state.write", "human.approve"]
 },
 "owned_resources": [],
 "objective_contracts": [
  {"objective": "closed", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["cancelled", "archived"]}]}
 ],
 "transitions": [
  {
   "id": "cancel",
   "selection_class": "EXPLICIT_ONLY",
   "priority": 1,
   "source_phases": ["new"],
   "target_phases": ["cancelled"],
   "authority": ["human"],
   "required_capabilities": ["human.approve", "state.write"],
   "effect": "state.assign",
   "verifier": "conditions.match",
   "prescription": {"operation": "cancel_order", "expected_postcondition": "the order is cancelled"}
  },
  {
   "id": "archive",
   "selection_class": "EXPLICIT_ONLY",
   "priority": 1,
   "source_phases": ["new"],
   "target_phases": ["archived"],
   "authority": ["agent"],
   "required_capabilities": ["state.write"],
   "effect": "state.assign",
   "verifier": "conditions.match",
   "prescription": {"operation": "archive_order", "expected_postcondition": "the order is archived"}
  }
 ]
}`

// decisionRounds is how many approve-against-decline races FlowDecisions
// runs.
const decisionRounds = 100

// FlowDecisions races decisions through two Flow kernels on one store: two
// nodes, each with its own in-process locks, sharing the database. A
// person's approve and another person's decline of the same approval are
// released together, round after round; exactly one wins, the loser is
// told APPROVAL_CLOSED, and the store agrees with the winner (an approved
// approval has the receipt of a committed transition, a declined one left
// the instance as it was). The same prescription applied on both nodes at
// once commits one revision and both answer its receipt.
func FlowDecisions(t *testing.T, open func(t *testing.T) store.Store) {
	st := open(t).Flows()
	ctx := context.Background()
	kernels := [2]*flow.Kernel{
		flow.NewKernel(st, flow.NewInventory("0.1.0")),
		flow.NewKernel(st, flow.NewInventory("0.1.0")),
	}
	p, err := kernels[0].AddProgram(ctx, []byte(decisionProgram))
	if err != nil {
		t.Fatal(err)
	}
	bot := flow.Principal{ID: "agent-1", Kind: flow.AuthorityAgent, Grants: []string{flow.CapabilityStateWrite}}
	alice := flow.Principal{ID: "alice", Kind: flow.AuthorityHuman, Grants: []string{flow.CapabilityStateWrite}}
	bob := flow.Principal{ID: "bob", Kind: flow.AuthorityHuman, Grants: []string{flow.CapabilityStateWrite}}

	t.Run("approve against decline", func(t *testing.T) {
		wins := map[string]int{}
		for round := range decisionRounds {
			id := fmt.Sprintf("race-%03d", round)
			if _, err := kernels[0].Start(ctx, flow.Instance{ID: id, Program: p.Fingerprint(), Phase: "new"}); err != nil {
				t.Fatal(err)
			}
			a, err := kernels[0].RequestApproval(ctx, id, bot, flow.Request{Transition: "cancel"})
			if err != nil {
				t.Fatal(err)
			}
			// Alternate which node approves, so both orders are tried.
			approver, decliner := kernels[round%2], kernels[1-round%2]
			var receipt flow.Receipt
			errs := race(2, func(i int) error {
				if i == 0 {
					r, err := approver.Approve(ctx, a.ID, alice)
					receipt = r
					return err
				}
				_, err := decliner.Decline(ctx, a.ID, bob, "no")
				return err
			})
			got, err := kernels[round%2].Approval(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := kernels[0].Instance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case errs[0] == nil && errs[1] == nil:
				t.Fatalf("round %d: approve and decline both succeeded; approval %s, instance phase %s", round, got.Status, inst.Phase)
			case errs[0] == nil:
				wins["approve"]++
				if flow.ErrorCode(errs[1]) != flow.CodeApprovalClosed {
					t.Errorf("round %d: the losing decline = %v, want APPROVAL_CLOSED", round, errs[1])
				}
				if got.Status != flow.ApprovalApproved || got.Decider != "alice" || got.Receipt != receipt.ID || receipt.ID == "" {
					t.Errorf("round %d: approve won, but the approval reads %s by %s with receipt %q (want %q)", round, got.Status, got.Decider, got.Receipt, receipt.ID)
				}
				if inst.Phase != "cancelled" || inst.Revision != 1 {
					t.Errorf("round %d: approve won, but the instance is %s at revision %d", round, inst.Phase, inst.Revision)
				}
			case errs[1] == nil:
				wins["decline"]++
				if flow.ErrorCode(errs[0]) != flow.CodeApprovalClosed {
					t.Errorf("round %d: the losing approve = %v, want APPROVAL_CLOSED", round, errs[0])
				}
				if got.Status != flow.ApprovalDeclined || got.Decider != "bob" || got.Receipt != "" {
					t.Errorf("round %d: decline won, but the approval reads %s by %s with receipt %q", round, got.Status, got.Decider, got.Receipt)
				}
				if inst.Phase != "new" || inst.Revision != 0 || inst.Pending != "" {
					t.Errorf("round %d: decline won, but the instance is %s at revision %d (pending %q)", round, inst.Phase, inst.Revision, inst.Pending)
				}
			default:
				t.Fatalf("round %d: neither won: approve %v, decline %v", round, errs[0], errs[1])
			}
		}
		t.Logf("%d rounds: %v", decisionRounds, wins)
	})

	t.Run("many instances applied at once", func(t *testing.T) {
		// Steps of different instances do not conflict: each must commit,
		// none may be left for recovery because the store could not
		// order it among the others.
		const n = 16
		for round := range 3 {
			ids := make([]string, n)
			prx := make([]string, n)
			for i := range n {
				ids[i] = fmt.Sprintf("many-%d-%02d", round, i)
				if _, err := kernels[0].Start(ctx, flow.Instance{ID: ids[i], Program: p.Fingerprint(), Phase: "new"}); err != nil {
					t.Fatal(err)
				}
				d, err := kernels[0].Prescribe(ctx, ids[i], bot, flow.Request{Transition: "archive"})
				if err != nil || d.Kind != flow.Prescribed {
					t.Fatalf("prescribe = %+v, %v", d, err)
				}
				prx[i] = d.Prescription.ID
			}
			errs := race(n, func(i int) error {
				_, err := kernels[i%2].Apply(ctx, prx[i], bot)
				return err
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d: apply on instance %s = %v", round, ids[i], err)
				}
			}
		}
	})

	t.Run("one prescription applied on two nodes", func(t *testing.T) {
		for round := range 20 {
			id := fmt.Sprintf("apply-%02d", round)
			if _, err := kernels[0].Start(ctx, flow.Instance{ID: id, Program: p.Fingerprint(), Phase: "new"}); err != nil {
				t.Fatal(err)
			}
			d, err := kernels[0].Prescribe(ctx, id, bot, flow.Request{Transition: "archive"})
			if err != nil || d.Kind != flow.Prescribed {
				t.Fatalf("prescribe = %+v, %v", d, err)
			}
			receipts := make([]flow.Receipt, 4)
			errs := race(4, func(i int) error {
				r, err := kernels[i%2].Apply(ctx, d.Prescription.ID, bot)
				receipts[i] = r
				return err
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d: apply %d = %v; every applier of one prescription gets its receipt", round, i, err)
				}
				if receipts[i].ID != receipts[0].ID || receipts[i].Revision != 1 {
					t.Fatalf("round %d: apply %d answered receipt %s at revision %d, apply 0 %s", round, i, receipts[i].ID, receipts[i].Revision, receipts[0].ID)
				}
			}
			inst, err := kernels[1].Instance(ctx, id)
			if err != nil || inst.Revision != 1 || inst.Phase != "archived" {
				t.Fatalf("round %d: instance = %+v, %v; want archived at revision 1", round, inst, err)
			}
		}
	})
}

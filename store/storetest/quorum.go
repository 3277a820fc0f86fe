package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
)

// quorumRounds is how many races FlowQuorum runs of each kind.
const quorumRounds = 30

// FlowQuorum races approvals of a transition that needs two people,
// through two Flow kernels on one store. Two different people approving
// at once are each counted once and the transition is applied once, by
// whichever approval came second; the same person approving twice at once
// is counted once, one answer MORE_PEOPLE_NEEDED and the other
// ALREADY_APPROVED, and nothing is applied.
func FlowQuorum(t *testing.T, open func(t *testing.T) store.Store) {
	st := open(t).Flows()
	ctx := context.Background()
	kernels := [2]*flow.Kernel{
		flow.NewKernel(st, flow.NewInventory("0.1.0")),
		flow.NewKernel(st, flow.NewInventory("0.1.0")),
	}
	src := strings.Replace(decisionProgram, `"authority": ["human"],`, `"authority": ["human"], "approval": {"quorum": 2},`, 1)
	p, err := kernels[0].AddProgram(ctx, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	bot := flow.Principal{ID: "agent-1", Kind: flow.AuthorityAgent, Grants: []string{flow.CapabilityStateWrite}}
	people := map[string]flow.Principal{}
	for _, id := range []string{"alice", "bob"} {
		people[id] = flow.Principal{ID: id, Kind: flow.AuthorityHuman, Grants: []string{flow.CapabilityStateWrite}}
	}
	for _, tc := range []struct {
		name string
		who  [2]string
	}{
		{"two people at once", [2]string{"alice", "bob"}},
		{"one person twice at once", [2]string{"alice", "alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range quorumRounds {
				id := fmt.Sprintf("quorum-%s-%02d", tc.who[1], round)
				if _, err := kernels[0].Start(ctx, flow.Instance{ID: id, Program: p.Fingerprint(), Phase: "new"}); err != nil {
					t.Fatal(err)
				}
				a, err := kernels[0].RequestApproval(ctx, id, bot, flow.Request{Transition: "cancel"})
				if err != nil {
					t.Fatal(err)
				}
				errs := race(2, func(i int) error {
					_, err := kernels[(round+i)%2].Approve(ctx, a.ID, people[tc.who[i]])
					return err
				})
				codes := []string{flow.ErrorCode(errs[0]), flow.ErrorCode(errs[1])}
				slices.Sort(codes)
				got, err := kernels[1].Approval(ctx, a.ID)
				if err != nil {
					t.Fatal(err)
				}
				inst, err := kernels[0].Instance(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var approvers []string
				for _, v := range got.Approvers {
					approvers = append(approvers, v.Person)
				}
				if tc.who[0] != tc.who[1] {
					if codes[0] != "" || codes[1] != flow.CodeMorePeopleNeeded {
						t.Fatalf("round %d: answers %v %v; want one MORE_PEOPLE_NEEDED and one receipt", round, errs[0], errs[1])
					}
					slices.Sort(approvers)
					if got.Status != flow.ApprovalApproved || !slices.Equal(approvers, []string{"alice", "bob"}) || got.Receipt == "" {
						t.Fatalf("round %d: approval %s with approvers %v, receipt %q", round, got.Status, approvers, got.Receipt)
					}
					if inst.Phase != "cancelled" || inst.Revision != 1 {
						t.Fatalf("round %d: instance %s at revision %d; want cancelled once", round, inst.Phase, inst.Revision)
					}
					continue
				}
				if codes[0] != flow.CodeAlreadyApproved || codes[1] != flow.CodeMorePeopleNeeded {
					t.Fatalf("round %d: answers %v, %v; want ALREADY_APPROVED and MORE_PEOPLE_NEEDED", round, errs[0], errs[1])
				}
				if got.Status != flow.ApprovalPending || !slices.Equal(approvers, []string{"alice"}) || got.Needs() != 1 {
					t.Fatalf("round %d: approval %s with approvers %v", round, got.Status, approvers)
				}
				if inst.Phase != "new" || inst.Revision != 0 {
					t.Fatalf("round %d: instance %s at revision %d; nothing may be applied", round, inst.Phase, inst.Revision)
				}
			}
		})
	}
}

package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
)

// SeedExpenseID is the expense instance the workspace's agent starts when
// seeding, so that the person's first visit finds an approval waiting.
// ExpenseID stays free for an agent to ask about.
const SeedExpenseID = "expense-1000"

// Seeded reports what Seed found or put in place.
type Seeded struct {
	// Proposal is the control with the agent's open proposal
	// ("profile/plan").
	Proposal string
	// Screen is the id of the payment screen.
	Screen string
	// Approval is the id of the expense approval, whatever its status.
	Approval string
	// ApprovalStatus is "pending" until a person decides it.
	ApprovalStatus string
	// SecondPerson is the name of the demo's second person, who with the
	// owner can approve an expense over the two-person limit.
	SecondPerson string
}

// SecondPersonName is the name of the person Seed adds beside the owner,
// so that an expense over the two-person limit (see LargeExpenseID) can
// get its two approvals. A one-time sign-in link for them comes from
// "assent token link ben".
const SecondPersonName = "ben"

// secondPersonID is the second person's principal id; a fixed one keeps
// Seed from adding them twice.
const secondPersonID = "p_demo_ben"

// ensureSecondPerson adds the demo's second person unless they exist. They
// hold the grants approving an expense needs besides the human.approve an
// approval adds.
func (a *App) ensureSecondPerson(ctx context.Context) (store.Principal, error) {
	ps := a.st.Principals()
	p, err := ps.Principal(ctx, secondPersonID)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return p, err
	}
	p = store.Principal{ID: secondPersonID, Kind: store.KindHuman, Name: SecondPersonName,
		Grants: []string{"state.write", "tool.invoke", "control.write"}, CreatedAt: a.now().UTC()}
	if err := ps.CreatePrincipal(ctx, p, nil); err != nil && !errors.Is(err, store.ErrConflict) {
		return p, err
	}
	return ps.Principal(ctx, secondPersonID)
}

// Seed puts into the workspace one item of each kind an agent brings a
// person, acting as the workspace's agent, as an agent would: a proposed
// profile change (plan → pro), the payment screen, and an expense that
// waits for a person's approval; and it adds a second person
// (SecondPersonName) beside the owner. It needs a bootstrapped workspace
// (auth.EnsureBootstrap).
//
// It is idempotent: what is already there is kept, and what is missing is
// put back. Proposals and screens live in memory, so each start seeds them
// again; the expense lives in the store, so a decided approval stays
// decided and is not filed again.
func (a *App) Seed(ctx context.Context) (Seeded, error) {
	var out Seeded
	agentID, err := a.st.Settings().Setting(ctx, auth.SettingAgent)
	if errors.Is(err, store.ErrNotFound) {
		return out, errors.New("demo: no workspace yet; bootstrap it (auth.EnsureBootstrap) before seeding the demo")
	}
	if err != nil {
		return out, fmt.Errorf("demo: the workspace's agent: %w", err)
	}
	agent, err := a.st.Principals().Principal(ctx, agentID)
	if err != nil {
		return out, fmt.Errorf("demo: the workspace's agent: %w", err)
	}
	if out.Proposal, err = a.seedProposal(ctx, agent); err != nil {
		return out, err
	}
	if out.Screen, err = a.seedScreen(ctx, agent); err != nil {
		return out, err
	}
	ap, err := a.seedApproval(ctx, agent)
	if err != nil {
		return out, err
	}
	out.Approval, out.ApprovalStatus = ap.ID, string(ap.Status)
	second, err := a.ensureSecondPerson(ctx)
	if err != nil {
		return out, fmt.Errorf("demo: the second person: %w", err)
	}
	out.SecondPerson = second.Name
	return out, nil
}

// seedApproval starts the seeded expense as agent when it does not exist,
// and while it is still submitted asks for its next step, which files (or
// finds) the request for a person's approval.
func (a *App) seedApproval(ctx context.Context, agent store.Principal) (flow.Approval, error) {
	part := a.srv.Flows()
	inst, err := part.Kernel().Instance(ctx, SeedExpenseID)
	if flow.ErrorCode(err) == flow.CodeNotFound {
		// The agent drafts the expense and submits it through the
		// program, as any agent would; the amount sets the band.
		inst, err = part.Start(ctx, agent, flows.StartRequest{
			Program: expenseProgram, ID: SeedExpenseID, Phase: "draft", Objective: "expense-paid",
			Facts: map[string]flow.Fact{
				expenseAmountFacet:      {Status: flow.StatusKnown, Value: "860.00 EUR"},
				expenseDescriptionFacet: {Status: flow.StatusKnown, Value: "Team dinner after the launch"},
				expensePayeeFacet:       {Status: flow.StatusKnown, Value: PayeeIBAN},
			},
		})
	}
	if err != nil {
		return flow.Approval{}, fmt.Errorf("demo: seeding the expense: %w", err)
	}
	if inst.Owner == agent.ID && inst.Phase == "draft" {
		res, err := part.Prescribe(ctx, agent, inst.ID, flow.Request{})
		if err != nil {
			return flow.Approval{}, fmt.Errorf("demo: submitting the expense: %w", err)
		}
		if res.Decision.Prescription == nil {
			return flow.Approval{}, fmt.Errorf("demo: submitting the expense: the program did not prescribe a step (%s): %s", res.Decision.Kind, res.Next)
		}
		if _, err := part.Apply(ctx, agent, res.Decision.Prescription.ID, nil); err != nil {
			return flow.Approval{}, fmt.Errorf("demo: submitting the expense: %w", err)
		}
		if inst, err = part.Kernel().Instance(ctx, inst.ID); err != nil {
			return flow.Approval{}, fmt.Errorf("demo: submitting the expense: %w", err)
		}
	}
	if inst.Owner != agent.ID || inst.Phase != "submitted" {
		// Someone moved it on (a person approved it): nothing to re-file.
		return flow.Approval{}, nil
	}
	res, err := part.Prescribe(ctx, agent, inst.ID, flow.Request{})
	if err != nil {
		return flow.Approval{}, fmt.Errorf("demo: seeding the approval: %w", err)
	}
	if res.Approval == nil {
		return flow.Approval{}, fmt.Errorf("demo: seeding the approval: the expense did not wait for a person (%s): %s", res.Decision.Kind, res.Next)
	}
	return *res.Approval, nil
}

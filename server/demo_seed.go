package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/store"
)

// demoSeedExpenseID is the expense instance the demo workspace's agent
// starts so that the person's first visit finds an approval waiting. The
// instance demoExpenseID stays free for an agent to ask about.
const demoSeedExpenseID = "expense-1000"

// demoPaymentTitle is the heading of the demo payment screen.
const demoPaymentTitle = "Confirm payment"

// DemoSeed reports what SeedDemo found or put in place.
type DemoSeed struct {
	// Proposal is the control with the agent's open proposal
	// ("profile/plan").
	Proposal string
	// Screen is the id of the payment screen.
	Screen string
	// Approval is the id of the expense approval, whatever its status.
	Approval string
	// ApprovalStatus is "pending" until a person decides it.
	ApprovalStatus string
}

// SeedDemo puts into the demo workspace one item of each kind an agent
// brings a person, acting as the workspace's agent: a proposed profile
// change (plan → pro), the payment screen, and an expense that waits for a
// person's approval. It needs Config.Demo and a bootstrapped workspace.
//
// It is idempotent: what is already there is kept, and what is missing is
// put back. Proposals and screens live in memory, so each start seeds them
// again; the expense lives in the store, so a decided approval stays
// decided and is not filed again.
func (s *Server) SeedDemo(ctx context.Context) (DemoSeed, error) {
	var out DemoSeed
	if !s.cfg.Demo {
		return out, errors.New("server: the demo workspace is not loaded; start with Config.Demo")
	}
	agentID, err := s.store.Setting(ctx, settingAgent)
	if errors.Is(err, store.ErrNotFound) {
		return out, errors.New("server: no workspace yet; bootstrap it (EnsureBootstrap) before seeding the demo")
	}
	if err != nil {
		return out, err
	}
	agent, err := s.store.Principal(ctx, agentID)
	if err != nil {
		return out, fmt.Errorf("server: the workspace's agent: %w", err)
	}
	if out.Proposal, err = s.seedDemoProposal(ctx, agent); err != nil {
		return out, err
	}
	if out.Screen, err = s.seedDemoScreen(ctx, agent); err != nil {
		return out, err
	}
	a, err := s.seedDemoApproval(ctx, agent)
	if err != nil {
		return out, err
	}
	out.Approval, out.ApprovalStatus = a.ID, string(a.Status)
	return out, nil
}

// seedDemoProposal stages plan = "pro" on the demo profile as agent unless
// a proposal for the plan is already open.
func (s *Server) seedDemoProposal(ctx context.Context, agent store.Principal) (string, error) {
	id := control.Identity{FormID: "profile", ControlID: "plan"}
	for _, snap := range s.controls.Proposals(ctx, id.FormID) {
		if snap.Identity.ControlID == id.ControlID && snap.Identity.Subject == nil {
			return id.FormID + "/" + id.ControlID, nil
		}
	}
	res := s.execControl(ctx, agent, control.Command{Action: control.Stage, Identity: id, Value: "pro"},
		control.CommandContext{Source: control.SourceAgent})
	if !res.OK {
		return "", fmt.Errorf("server: seeding the demo proposal: %s: %s", res.Reason, res.Message)
	}
	return id.FormID + "/" + id.ControlID, nil
}

// seedDemoScreen makes sure a payment screen is open (the demo shows one
// at start), showing it as agent when none is.
func (s *Server) seedDemoScreen(ctx context.Context, agent store.Principal) (string, error) {
	s.scrMu.Lock()
	open := make([]*liveScreen, 0, len(s.screens))
	for _, sc := range s.screens {
		open = append(open, sc)
	}
	s.scrMu.Unlock()
	for _, sc := range open {
		sc.mu.Lock()
		title := render.Title(sc.doc)
		sc.mu.Unlock()
		if title == demoPaymentTitle {
			return sc.id, nil
		}
	}
	id, err := s.ShowScreen(ctx, agent, builtinScreens()["payment"], ScreenOptions{})
	if err != nil {
		return "", fmt.Errorf("server: seeding the demo screen: %w", err)
	}
	return id, nil
}

// seedDemoApproval starts the seeded expense as agent when it does not
// exist, and while it is still submitted asks for its next step, which
// files (or finds) the request for a person's approval.
func (s *Server) seedDemoApproval(ctx context.Context, agent store.Principal) (flow.Approval, error) {
	inst, err := s.flows.Instance(ctx, demoSeedExpenseID)
	if flow.ErrorCode(err) == flow.CodeNotFound {
		inst, err = s.flowStart(ctx, agent, startRequest{
			Program: "expense-approval", ID: demoSeedExpenseID, Phase: "submitted", Objective: "expense-paid",
			Facts: map[string]flow.Fact{
				"expense.amount_band": {Status: flow.StatusKnown, Value: "over_limit"},
				"expense.amount":      {Status: flow.StatusKnown, Value: "860.00 EUR"},
				"expense.description": {Status: flow.StatusKnown, Value: "Team dinner after the launch"},
				"expense.payee_iban":  {Status: flow.StatusKnown, Value: demoPayeeIBAN},
				"expense.status":      {Status: flow.StatusKnown, Value: "submitted"},
			},
		})
	}
	if err != nil {
		return flow.Approval{}, fmt.Errorf("server: seeding the demo expense: %w", err)
	}
	if inst.Owner != agent.ID || inst.Phase != "submitted" {
		// Someone moved it on (a person approved it): nothing to re-file.
		return flow.Approval{}, nil
	}
	res, err := s.flowPrescribe(ctx, agent, inst.ID, flow.Request{})
	if err != nil {
		return flow.Approval{}, fmt.Errorf("server: seeding the demo approval: %w", err)
	}
	if res.Approval == nil {
		return flow.Approval{}, fmt.Errorf("server: seeding the demo approval: the expense did not wait for a person (%s): %s", res.Decision.Kind, res.Next)
	}
	return *res.Approval, nil
}

package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
)

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
	if !s.host.Config.Demo {
		return out, errors.New("server: the demo workspace is not loaded; start with Config.Demo")
	}
	agentID, err := s.host.Store.Setting(ctx, auth.SettingAgent)
	if errors.Is(err, store.ErrNotFound) {
		return out, errors.New("server: no workspace yet; bootstrap it (EnsureBootstrap) before seeding the demo")
	}
	if err != nil {
		return out, err
	}
	agent, err := s.host.Store.Principal(ctx, agentID)
	if err != nil {
		return out, fmt.Errorf("server: the workspace's agent: %w", err)
	}
	if out.Proposal, err = s.controls.SeedDemoProposal(ctx, agent); err != nil {
		return out, err
	}
	if out.Screen, err = s.screens.SeedDemoScreen(ctx, agent); err != nil {
		return out, err
	}
	a, err := s.flows.SeedDemoApproval(ctx, agent)
	if err != nil {
		return out, err
	}
	out.Approval, out.ApprovalStatus = a.ID, string(a.Status)
	return out, nil
}

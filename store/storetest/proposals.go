package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func testProposals(t *testing.T, open func(*testing.T) store.Store) {
	props := open(t).Proposals()
	spawn := store.Proposal{ID: "prop_1", Kind: store.ProposalSpawn, ProposerID: "p_a", SupervisorID: "p_h", Target: "r1",
		Recipe: json.RawMessage(`{"template":"echo {x}"}`), Script: "echo 'y'", WorkDir: "/data/runs/r1",
		EnvNames: []string{"PATH", "HOME"}, Controls: []string{"pause"}, Values: map[string]json.RawMessage{"x": json.RawMessage(`"y"`)},
		Request: json.RawMessage(`{"artifacts":["out.txt"]}`), Why: "the nightly export failed; <b>rerun</b> it\nbefore 9:00",
		CreatedAt: at(time.Second), Status: store.ProposalPending}
	tool := store.Proposal{ID: "prop_2", Kind: store.ProposalTool, ProposerID: "p_b", Target: "text_x",
		Recipe: json.RawMessage(`{}`), CreatedAt: at(2 * time.Second)} // an empty Status files it pending
	third := store.Proposal{ID: "prop_0", Kind: store.ProposalSpawn, ProposerID: "p_a", Target: "r3",
		Recipe: json.RawMessage(`{}`), CreatedAt: at(3 * time.Second)}
	// Filed out of order, with ids that do not sort by time: lists are
	// ordered by creation time.
	for _, p := range []store.Proposal{third, spawn, tool} {
		if err := props.CreateProposal(ctx(t), p); err != nil {
			t.Fatalf("CreateProposal(%s) = %v", p.ID, err)
		}
	}

	t.Run("create refused", func(t *testing.T) {
		tests := []struct {
			name string
			p    store.Proposal
			want error
		}{
			{"existing id", store.Proposal{ID: "prop_1", Kind: store.ProposalTool, ProposerID: "p_b", Target: "other", CreatedAt: epoch}, store.ErrConflict},
			{"unknown kind", store.Proposal{ID: "prop_x", Kind: "shell", ProposerID: "p_a", CreatedAt: epoch}, store.ErrInvalid},
			{"no id", store.Proposal{Kind: store.ProposalTool, ProposerID: "p_a", CreatedAt: epoch}, store.ErrInvalid},
			{"no proposer", store.Proposal{ID: "prop_y", Kind: store.ProposalTool, CreatedAt: epoch}, store.ErrInvalid},
			{"filed decided", store.Proposal{ID: "prop_z", Kind: store.ProposalTool, ProposerID: "p_a", Status: store.ProposalApproved, CreatedAt: epoch}, store.ErrInvalid},
		}
		for _, tc := range tests {
			if err := props.CreateProposal(ctx(t), tc.p); !errors.Is(err, tc.want) {
				t.Errorf("%s: CreateProposal = %v, want %v", tc.name, err, tc.want)
			}
		}
		for _, id := range []string{"prop_x", "prop_y", "prop_z"} {
			if _, err := props.Proposal(ctx(t), id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("refused proposal %s was stored: %v", id, err)
			}
		}
		if got, _ := props.Proposal(ctx(t), "prop_1"); got.Target != "r1" {
			t.Errorf("a refused duplicate changed prop_1: %+v", got)
		}
	})

	t.Run("read back", func(t *testing.T) {
		got, err := props.Proposal(ctx(t), "prop_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != spawn.ID || got.Kind != spawn.Kind || got.ProposerID != spawn.ProposerID || got.SupervisorID != spawn.SupervisorID ||
			got.Target != spawn.Target || !sameJSON(got.Recipe, spawn.Recipe) || got.Script != spawn.Script || got.WorkDir != spawn.WorkDir ||
			!slices.Equal(got.EnvNames, spawn.EnvNames) || !slices.Equal(got.Controls, spawn.Controls) ||
			len(got.Values) != 1 || !sameJSON(got.Values["x"], spawn.Values["x"]) || !sameJSON(got.Request, spawn.Request) ||
			got.Why != spawn.Why || !got.CreatedAt.Equal(spawn.CreatedAt) || got.Status != store.ProposalPending ||
			got.DecidedBy != "" || !got.DecidedAt.IsZero() || got.Reason != "" || len(got.Result) != 0 {
			t.Errorf("proposal read back as\n\t%+v\nwant\n\t%+v", got, spawn)
		}
		if got, err := props.Proposal(ctx(t), "prop_2"); err != nil || got.Status != store.ProposalPending || got.Why != "" {
			t.Errorf("proposal filed with an empty status = %q, %v; want pending", got.Status, err)
		}
		if _, err := props.Proposal(ctx(t), "prop_none"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("decide", func(t *testing.T) {
		decided := at(time.Minute)
		tests := []struct {
			name string
			d    store.ProposalDecision
			want error
		}{
			{"approve", store.ProposalDecision{ID: "prop_1", From: store.ProposalPending, To: store.ProposalApproved, DecidedBy: "p_h", DecidedAt: decided}, nil},
			{"decline after approval", store.ProposalDecision{ID: "prop_1", From: store.ProposalPending, To: store.ProposalDeclined, DecidedBy: "p_h"}, store.ErrConflict},
			{"record result", store.ProposalDecision{ID: "prop_1", From: store.ProposalApproved, To: store.ProposalApproved, DecidedBy: "p_h", DecidedAt: decided, Result: json.RawMessage(`{"run":"r1"}`)}, nil},
			{"decline", store.ProposalDecision{ID: "prop_2", From: store.ProposalPending, To: store.ProposalDeclined, DecidedBy: "p_h", DecidedAt: decided, Reason: "not now"}, nil},
			{"leave declined", store.ProposalDecision{ID: "prop_2", From: store.ProposalDeclined, To: store.ProposalPending}, store.ErrInvalid},
			{"approve declined", store.ProposalDecision{ID: "prop_2", From: store.ProposalDeclined, To: store.ProposalApproved}, store.ErrInvalid},
			{"pending to pending", store.ProposalDecision{ID: "prop_0", From: store.ProposalPending, To: store.ProposalPending}, store.ErrInvalid},
			{"unknown status", store.ProposalDecision{ID: "prop_0", From: store.ProposalPending, To: "maybe"}, store.ErrInvalid},
			{"unknown id", store.ProposalDecision{ID: "prop_none", From: store.ProposalPending, To: store.ProposalApproved}, store.ErrNotFound},
		}
		for _, tc := range tests {
			if err := props.DecideProposal(ctx(t), tc.d); !errors.Is(err, tc.want) {
				t.Errorf("%s: DecideProposal = %v, want %v", tc.name, err, tc.want)
			}
		}
		checks := []struct {
			id, status, by, reason, result string
		}{
			{"prop_1", store.ProposalApproved, "p_h", "", `{"run":"r1"}`},
			{"prop_2", store.ProposalDeclined, "p_h", "not now", ""},
			{"prop_0", store.ProposalPending, "", "", ""},
		}
		for _, c := range checks {
			got, err := props.Proposal(ctx(t), c.id)
			if err != nil || got.Status != c.status || got.DecidedBy != c.by || got.Reason != c.reason || string(got.Result) != c.result {
				t.Errorf("%s after decisions = %+v, %v; want status %s by %q reason %q result %s", c.id, got, err, c.status, c.by, c.reason, c.result)
			}
			if c.by != "" && !got.DecidedAt.Equal(decided) {
				t.Errorf("%s decided at %v, want %v", c.id, got.DecidedAt, decided)
			}
		}
		// An approval that could not be carried out goes back to pending
		// and can be decided again.
		back := store.ProposalDecision{ID: "prop_1", From: store.ProposalApproved, To: store.ProposalPending, Reason: "Approval could not be carried out"}
		if err := props.DecideProposal(ctx(t), back); err != nil {
			t.Fatalf("approved back to pending: %v", err)
		}
		if err := props.DecideProposal(ctx(t), store.ProposalDecision{ID: "prop_1", From: store.ProposalPending, To: store.ProposalDeclined, DecidedBy: "p_h"}); err != nil {
			t.Errorf("declining a proposal back to pending: %v", err)
		}
	})

	t.Run("list", func(t *testing.T) {
		// Status now: prop_1 declined, prop_2 declined, prop_0 pending;
		// created in that order.
		tests := []struct {
			status, proposer string
			limit            int
			want             []string
		}{
			{"", "", 0, []string{"prop_1", "prop_2", "prop_0"}},
			{"", "", 2, []string{"prop_1", "prop_2"}},
			{"", "", -1, []string{"prop_1", "prop_2", "prop_0"}},
			{store.ProposalPending, "", 0, []string{"prop_0"}},
			{store.ProposalDeclined, "", 0, []string{"prop_1", "prop_2"}},
			{"", "p_a", 0, []string{"prop_1", "prop_0"}},
			{store.ProposalDeclined, "p_b", 0, []string{"prop_2"}},
			{store.ProposalApproved, "", 0, []string{}},
		}
		for _, tc := range tests {
			list, err := props.ListProposals(ctx(t), tc.status, tc.proposer, tc.limit)
			if err != nil {
				t.Errorf("ListProposals(%q, %q, %d) = %v", tc.status, tc.proposer, tc.limit, err)
				continue
			}
			got := []string{}
			for _, p := range list {
				got = append(got, p.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ListProposals(%q, %q, %d) = %v, want %v (oldest first)", tc.status, tc.proposer, tc.limit, got, tc.want)
			}
		}
	})

	t.Run("concurrent decisions", func(t *testing.T) {
		if err := props.CreateProposal(ctx(t), store.Proposal{ID: "prop_raced", Kind: store.ProposalTool, ProposerID: "p_a", Target: "t", Recipe: json.RawMessage(`{}`), CreatedAt: epoch}); err != nil {
			t.Fatal(err)
		}
		to := func(i int) string {
			if i%2 == 0 {
				return store.ProposalApproved
			}
			return store.ProposalDeclined
		}
		errs := race(8, func(i int) error {
			return props.DecideProposal(ctx(t), store.ProposalDecision{ID: "prop_raced", From: store.ProposalPending, To: to(i), DecidedBy: fmt.Sprint("p_h", i), DecidedAt: epoch})
		})
		winner := exactlyOne(t, "DecideProposal of one pending proposal", errs, store.ErrConflict)
		if winner < 0 {
			return
		}
		got, err := props.Proposal(ctx(t), "prop_raced")
		if err != nil || got.Status != to(winner) || got.DecidedBy != fmt.Sprint("p_h", winner) {
			t.Errorf("after the race = %s by %s, %v; want the winner's decision, %s by p_h%d", got.Status, got.DecidedBy, err, to(winner), winner)
		}
	})
}

// sameJSON reports whether a and b encode the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

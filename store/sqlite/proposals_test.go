package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func TestProposals(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var _ store.Proposals = db
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := store.Proposal{ID: "prop_1", Kind: store.ProposalSpawn, ProposerID: "a", Target: "r1",
		Recipe: json.RawMessage(`{"template":"echo {x}"}`), Script: "echo 'y'", WorkDir: "/d/runs/r1",
		EnvNames: []string{"PATH"}, Controls: []string{}, Values: map[string]json.RawMessage{"x": json.RawMessage(`"y"`)},
		CreatedAt: at, Status: store.ProposalPending}
	if err := db.CreateProposal(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateProposal(ctx, p); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	if err := db.CreateProposal(ctx, store.Proposal{ID: "prop_2", Kind: store.ProposalTool, ProposerID: "b", Target: "text_x", Recipe: json.RawMessage(`{}`), CreatedAt: at.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Proposal(ctx, "prop_1")
	if err != nil || got.Script != p.Script || got.WorkDir != p.WorkDir || string(got.Values["x"]) != `"y"` || !got.CreatedAt.Equal(at) || got.Status != store.ProposalPending {
		t.Fatalf("read back: %+v %v", got, err)
	}
	if _, err := db.Proposal(ctx, "prop_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	tests := []struct {
		name string
		d    store.ProposalDecision
		want error
	}{
		{"claim", store.ProposalDecision{ID: "prop_1", From: store.ProposalPending, To: store.ProposalApproved, DecidedBy: "h", DecidedAt: at}, nil},
		{"claim again", store.ProposalDecision{ID: "prop_1", From: store.ProposalPending, To: store.ProposalDeclined, DecidedBy: "h"}, store.ErrConflict},
		{"record result", store.ProposalDecision{ID: "prop_1", From: store.ProposalApproved, To: store.ProposalApproved, DecidedBy: "h", DecidedAt: at, Result: json.RawMessage(`{"run":"r1"}`)}, nil},
		{"unknown", store.ProposalDecision{ID: "prop_none", From: store.ProposalPending, To: store.ProposalApproved}, store.ErrNotFound},
	}
	for _, tc := range tests {
		if err := db.DecideProposal(ctx, tc.d); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	got, _ = db.Proposal(ctx, "prop_1")
	if got.Status != store.ProposalApproved || got.DecidedBy != "h" || !got.DecidedAt.Equal(at) || string(got.Result) != `{"run":"r1"}` {
		t.Fatalf("decided: %+v", got)
	}
	for _, tc := range []struct {
		status, proposer string
		want             int
	}{{"", "", 2}, {store.ProposalPending, "", 1}, {"", "a", 1}, {store.ProposalApproved, "b", 0}} {
		list, err := db.ListProposals(ctx, tc.status, tc.proposer, 0)
		if err != nil || len(list) != tc.want {
			t.Errorf("list %q %q: %d %v", tc.status, tc.proposer, len(list), err)
		}
	}
	if list, _ := db.ListProposals(ctx, "", "", 1); len(list) != 1 || list[0].ID != "prop_1" {
		t.Errorf("limit: %+v", list)
	}
}

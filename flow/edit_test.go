package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// editFixture is the kernel fixture whose cancel transition takes an
// amount, a payee and a secret pin, under the approval rule rule; the
// application's check refuses an amount over 1000.
func editFixture(t testing.TB, rule any) *fixture {
	t.Helper()
	src := variant(t, fullProgram(t), func(m doc) {
		for _, tr := range m["transitions"].([]any) {
			if tr := tr.(doc); tr["id"] == "cancel" {
				tr["approval"] = rule
				tr["parameters"] = []any{doc{"name": "amount", "required": true}, doc{"name": "payee"}, doc{"name": "pin", "secret": true}}
			}
		}
	})
	check := ParameterCheckFunc(func(_ context.Context, _ *Program, tr *Transition, params map[string]string) error {
		if v, ok := params["amount"]; ok && len(v) > 3 {
			return errors.New("the amount is over 1000")
		}
		return nil
	})
	inv := testInventory()
	f := &fixture{clk: &clock{t: t0}, inv: inv, store: NewMemoryStore()}
	f.k = NewKernel(f.store, inv, WithClock(f.clk.now), WithParameterCheck(check))
	p, err := f.k.AddProgram(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	f.prog = p
	if _, err := f.k.Start(context.Background(), Instance{ID: "d", Program: p.Fingerprint(), Phase: "new", Objective: "shipped"}); err != nil {
		t.Fatal(err)
	}
	return f
}

func editRequest() Request {
	return Request{Transition: "cancel", Parameters: map[string]string{"amount": "900", "payee": "acme", "pin": "1234"}}
}

// appliedParameters is what the prescription of rc bound.
func appliedParameters(t *testing.T, f *fixture, rc Receipt) map[string]string {
	t.Helper()
	var rec PrescriptionRecord
	if err := f.store.View(context.Background(), func(tx Tx) error {
		var err error
		rec, err = tx.Prescription(rc.Prescription)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rec.Prescription.Parameters
}

// A person changes the amount before approving: what is applied is the
// person's amount, and the approval records who changed what from which
// value to which.
func TestApproveEditedAppliesThePersonsValues(t *testing.T) {
	ctx := context.Background()
	f := editFixture(t, doc{})
	bot := agent(CapabilityStateWrite)
	a, err := f.k.RequestApproval(ctx, "d", bot, editRequest())
	if err != nil {
		t.Fatal(err)
	}
	alice := named("alice", CapabilityStateWrite)
	rc, err := f.k.ApproveEdited(ctx, a.ID, alice, Edit{Values: map[string]string{"amount": "750", "payee": "acme"}, Requester: bot})
	if err != nil {
		t.Fatalf("approve with a changed amount: %v", err)
	}
	if got := appliedParameters(t, f, rc); got["amount"] != "750" || got["payee"] != "acme" {
		t.Fatalf("applied %v, want amount 750 and payee acme", got)
	}
	got, _ := f.k.Approval(ctx, a.ID)
	if got.Status != ApprovalApproved || got.Decider != "alice" {
		t.Fatalf("approval %+v", got)
	}
	want := []ParameterChange{{Name: "amount", Was: "900", Now: "750"}}
	if len(got.Edits) != 1 || got.Edits[0].Person != "alice" || len(got.Edits[0].Changes) != 1 || got.Edits[0].Changes[0] != want[0] {
		t.Fatalf("edits %+v, want alice's %v", got.Edits, want)
	}
	if ch := got.ChangedParameters(); len(ch) != 1 || ch[0] != want[0] || ch[0].String() != `amount: "900" → "750"` {
		t.Fatalf("changed parameters %v", ch)
	}
	for _, p := range got.Parameters {
		if p.Name == "amount" && p.Value != "750" {
			t.Fatalf("the approval shows amount %q, want 750", p.Value)
		}
	}
}

// A refused change changes nothing: the approval keeps its values, its
// approvers and its edition, and stays pending.
func TestApproveEditedRefusals(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		edit   func(bot Principal) Edit
		code   string
		person *Principal // who changes it; alice with state.write when nil
	}{
		{"unknown parameter", func(bot Principal) Edit {
			return Edit{Values: map[string]string{"colour": "red"}, Requester: bot}
		}, CodeParameterUnknown, nil},
		{"secret parameter", func(bot Principal) Edit {
			return Edit{Values: map[string]string{"pin": "0000"}, Requester: bot}
		}, CodeParameterNotEditable, nil},
		{"the application's check", func(bot Principal) Edit {
			return Edit{Values: map[string]string{"amount": "5000"}, Requester: bot}
		}, CodeParameterInvalid, nil},
		{"not text", func(bot Principal) Edit {
			return Edit{Values: map[string]string{"payee": "a\x00b"}, Requester: bot}
		}, CodeParameterInvalid, nil},
		{"too long", func(bot Principal) Edit {
			return Edit{Values: map[string]string{"payee": strings.Repeat("x", maxEditedValue+1)}, Requester: bot}
		}, CodeParameterInvalid, nil},
		{"an older card", func(bot Principal) Edit {
			return Edit{Values: map[string]string{"amount": "100"}, Edition: 1, Requester: bot}
		}, CodeApprovalChanged, nil},
		{"another requester", func(Principal) Edit {
			return Edit{Values: map[string]string{"amount": "100"}, Requester: named("mallory")}
		}, CodeEditRefused, nil},
		{"a person who may not apply it", func(bot Principal) Edit {
			return Edit{Values: map[string]string{"amount": "100"}, Requester: bot}
		}, CodeEditRefused, &Principal{ID: "carol", Kind: AuthorityHuman}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := editFixture(t, doc{"quorum": 2})
			bot := agent(CapabilityStateWrite)
			a, err := f.k.RequestApproval(ctx, "d", bot, editRequest())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.k.Approve(ctx, a.ID, named("bob", CapabilityStateWrite)); ErrorCode(err) != CodeMorePeopleNeeded {
				t.Fatal(err)
			}
			before, _ := f.k.Approval(ctx, a.ID)
			alice := named("alice", CapabilityStateWrite)
			if tt.person != nil {
				alice = *tt.person
			}
			_, err = f.k.ApproveEdited(ctx, a.ID, alice, tt.edit(bot))
			if ErrorCode(err) != tt.code {
				t.Fatalf("ApproveEdited = %v, want %s", err, tt.code)
			}
			after, _ := f.k.Approval(ctx, a.ID)
			if after.Status != ApprovalPending || after.Edition() != 0 || len(after.Approvers) != 1 || after.Approvers[0].Person != "bob" {
				t.Fatalf("after a refused change: %+v", after)
			}
			if len(after.Parameters) != len(before.Parameters) || after.Parameters[0] != before.Parameters[0] {
				t.Fatalf("parameters %v, were %v", after.Parameters, before.Parameters)
			}
		})
	}
}

// The application's check refuses the agent's own request as it refuses
// a person's change.
func TestParameterCheckRefusesTheRequest(t *testing.T) {
	f := editFixture(t, doc{})
	req := editRequest()
	req.Parameters["amount"] = "5000"
	if _, err := f.k.RequestApproval(context.Background(), "d", agent(CapabilityStateWrite), req); ErrorCode(err) != CodeParameterInvalid {
		t.Fatalf("RequestApproval over the limit = %v, want %s", err, CodeParameterInvalid)
	}
}

// With two people needed, a change resets the count: the earlier approval
// was of other values. A decision on the card before the change is
// refused; the second person approves what the first one changed.
func TestApproveEditedResetsTheQuorum(t *testing.T) {
	ctx := context.Background()
	f := editFixture(t, doc{"quorum": 2})
	bot := agent(CapabilityStateWrite)
	a, err := f.k.RequestApproval(ctx, "d", bot, editRequest())
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := named("alice", CapabilityStateWrite), named("bob", CapabilityStateWrite)
	if _, err := f.k.Approve(ctx, a.ID, bob); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatal(err)
	}
	if _, err := f.k.ApproveEdited(ctx, a.ID, alice, Edit{Values: map[string]string{"amount": "500"}, Requester: bot}); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatalf("alice's change = %v, want %s", err, CodeMorePeopleNeeded)
	}
	got, _ := f.k.Approval(ctx, a.ID)
	if got.Edition() != 1 || len(got.Approvers) != 1 || got.Approvers[0].Person != "alice" || got.Needs() != 1 {
		t.Fatalf("after alice's change: edition %d approvers %+v needs %d", got.Edition(), got.Approvers, got.Needs())
	}
	// Bob's card showed the old values.
	if _, err := f.k.ApproveEdited(ctx, a.ID, bob, Edit{Values: map[string]string{"amount": "600"}, Requester: bot}); ErrorCode(err) != CodeApprovalChanged {
		t.Fatalf("bob on the old card = %v, want %s", err, CodeApprovalChanged)
	}
	// Alice cannot count twice, not even by changing the values again.
	if _, err := f.k.ApproveEdited(ctx, a.ID, alice, Edit{Values: map[string]string{"amount": "400"}, Edition: 1, Requester: bot}); ErrorCode(err) != CodeAlreadyApproved {
		t.Fatalf("alice again = %v, want %s", err, CodeAlreadyApproved)
	}
	rc, err := f.k.ApproveEdited(ctx, a.ID, bob, Edit{Values: map[string]string{"amount": "500"}, Edition: 1, Requester: bot})
	if err != nil {
		t.Fatalf("bob approves the changed values: %v", err)
	}
	if got := appliedParameters(t, f, rc); got["amount"] != "500" {
		t.Fatalf("applied %v, want amount 500", got)
	}
}

// BenchmarkApproveEdited compares a person's approval as filed with one
// that changes a parameter first (checked as the requester's request,
// recorded, then approved), on the memory store.
func BenchmarkApproveEdited(b *testing.B) {
	for _, edited := range []bool{false, true} {
		b.Run(fmt.Sprintf("edited=%v", edited), func(b *testing.B) {
			ctx := context.Background()
			f := editFixture(b, doc{})
			bot, alice := agent(CapabilityStateWrite), named("alice", CapabilityStateWrite)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				id := fmt.Sprintf("b%d", i)
				if _, err := f.k.Start(ctx, Instance{ID: id, Program: f.prog.Fingerprint(), Phase: "new", Objective: "shipped"}); err != nil {
					b.Fatal(err)
				}
				a, err := f.k.RequestApproval(ctx, id, bot, editRequest())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if edited {
					_, err = f.k.ApproveEdited(ctx, a.ID, alice, Edit{Values: map[string]string{"amount": "750"}, Requester: bot})
				} else {
					_, err = f.k.Approve(ctx, a.ID, alice)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

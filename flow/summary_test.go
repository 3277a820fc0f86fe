package flow

import (
	"context"
	"strings"
	"testing"
)

// TestApprovalRecordsTheSummary: the summary a Summarizer writes is
// recorded on the approval when it is filed, stays on the stored record,
// and the Summarizer never sees a secret parameter's value.
func TestApprovalRecordsTheSummary(t *testing.T) {
	ctx := context.Background()
	inv := testInventory()
	b := &bank{staged: "ada.new@example.com"}
	if err := inv.RegisterEffect(EffectToolCall, CapabilityToolInvoke, b); err != nil {
		t.Fatal(err)
	}
	var seen []ApprovalParameter
	sum := SummarizerFunc(func(_ context.Context, req *SummaryRequest) Summary {
		seen = req.Parameters
		return Summary{
			Text:  "Pay " + req.Instance.Fact("amount").Value + " via " + LocalID(req.Transition.ID) + " of " + req.Program.ID(),
			Lines: []string{strings.Repeat("x", 2000), "second"},
		}
	})
	k := NewKernel(NewMemoryStore(), inv, WithClock((&clock{t: t0}).now), WithSummarizer(sum))
	p, err := k.AddProgram(ctx, []byte(payProgram))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Start(ctx, Instance{ID: "s1", Program: p.Fingerprint(), Phase: "approved", Facts: map[string]Fact{"amount": known("120")}}); err != nil {
		t.Fatal(err)
	}
	a, err := k.RequestApproval(ctx, "s1", agent(CapabilityToolInvoke), Request{Transition: "confirm", Parameters: map[string]string{"iban": iban}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Pay 120 via confirm of " + p.ID(); a.Summary != want {
		t.Fatalf("summary = %q, want %q", a.Summary, want)
	}
	if len(a.SummaryLines) != 2 || len(a.SummaryLines[0]) != maxSummaryBytes || a.SummaryLines[1] != "second" {
		t.Fatalf("lines = %d %q", len(a.SummaryLines), a.SummaryLines[1:])
	}
	if len(seen) != 1 || !seen[0].Secret || seen[0].Value != "" || seen[0].Digest == "" {
		t.Fatalf("the summarizer saw parameters %+v", seen)
	}
	got, err := k.Approval(ctx, a.ID)
	if err != nil || got.Summary != a.Summary {
		t.Fatalf("stored approval: %+v %v", got, err)
	}
}

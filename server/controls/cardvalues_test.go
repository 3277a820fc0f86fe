package controls_test

import (
	"context"
	"strings"
	"testing"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server/controls"
)

// TestProposalCardShowsUnitsAndLabels: a proposed change reads as the
// person would say it, with the control's unit and a choice's label, and
// keeps the form and control ids under its technical details.
func TestProposalCardShowsUnitsAndLabels(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := context.Background()
	err := f.Srv.Controls().DeclareForm(ctx, "", "limits", []controls.HostedControl{
		{ControlID: "cap", Metadata: control.Metadata{Kind: control.KindNumber, Label: "Monthly cap", Unit: "EUR"}, Value: 500},
		{ControlID: "tier", Metadata: control.Metadata{Kind: control.KindSelect, Label: "Tier", Options: []control.Option{
			{Value: "b", Label: "Bronze"}, {Value: "g", Label: "Gold"},
		}}, Value: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for id, v := range map[string]any{"cap": 1250, "tier": "g"} {
		if out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": map[string]any{"formId": "limits", "controlId": id}, "value": v}); isErr {
			t.Fatalf("stage %s: %v", id, out)
		}
	}
	cookie, _ := f.SignIn()
	page := assenttest.ReadAll(f.Get("/inbox", cookie))
	for _, tc := range []struct{ label, card, want string }{
		{"Monthly cap", "<dt>Now</dt><dd>500 EUR</dd>", "<dt>Proposed</dt><dd>1250 EUR</dd>"},
		{"Tier", "<dt>Now</dt><dd>Bronze</dd>", "<dt>Proposed</dt><dd>Gold</dd>"},
	} {
		i := strings.Index(page, "<h3>"+tc.label+"</h3>")
		if i < 0 {
			t.Fatalf("no card for %s:\n%s", tc.label, page)
		}
		card := page[i:]
		card = card[:strings.Index(card, "</li>")]
		fold := strings.Index(card, "Technical details")
		for _, want := range []string{tc.card, tc.want} {
			if j := strings.Index(card, want); j < 0 || j > fold {
				t.Errorf("the %s card lacks %s before its technical details:\n%s", tc.label, want, card)
			}
		}
		if j := strings.Index(card, "<dt>Form</dt><dd>limits</dd>"); j < fold {
			t.Errorf("the %s card does not fold its form id:\n%s", tc.label, card)
		}
	}
	// The audit page shows the staged amount with its currency too.
	audit := assenttest.ReadAll(f.Get("/audit", cookie))
	if !strings.Contains(audit, ">1250 EUR<") {
		i := strings.Index(audit, "<tbody")
		t.Errorf("the audit page shows the staged cap without its currency:\n%s", audit[max(i, 0):])
	}
}

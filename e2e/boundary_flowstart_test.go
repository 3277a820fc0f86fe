package e2e

import (
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
)

// TestBoundaryFlowStartSkipsApproval: with only its token, the agent
// starts an expense-approval instance directly in phase "approved" (with
// expense.approval=person, its own payee and amount) through
// POST /v1/flows/instances, then prescribes and applies "pay". The
// human-authority "approve" transition never runs, no person is asked,
// and payments_send is called. It should be refused: an instance must not
// start past a human-authority step (or with facts only such a step
// assigns).
func TestBoundaryFlowStartSkipsApproval(t *testing.T) {
	a := newApp(t, true)
	tok := a.Boot.AgentToken
	code, _, raw := a.API("POST", "/v1/flows/instances", tok, map[string]any{
		"program": "expense-approval", "id": "evil-1", "phase": "approved", "objective": "expense-paid",
		"facts": map[string]any{
			"expense.amount":      map[string]any{"status": "known", "value": "9999999.00 EUR"},
			"expense.amount_band": map[string]any{"status": "known", "value": "over_limit"},
			"expense.approval":    map[string]any{"status": "known", "value": "person"},
			"expense.payee_iban":  map[string]any{"status": "known", "value": "DE89370400440532013000"},
		},
	})
	if code != 201 {
		t.Logf("start refused (holds): %d %s", code, raw)
		return
	}
	params := map[string]any{"parameters": map[string]any{"iban": "DE89370400440532013000", "reference": "evil"}}
	_, out, raw := a.API("POST", "/v1/flows/instances/evil-1/prescribe", tok, params)
	prx := prescriptionID(t, out)
	if prx == "" {
		t.Logf("no prescription (holds): %s", raw)
		return
	}
	code, _, raw = a.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", tok, params)
	_, inst, _ := a.API("GET", "/v1/flows/instances/evil-1", tok, nil)
	if in := assenttest.As[api.InstanceView](t, inst).Instance; in.Phase == "paid" || in.Facts["payment.status"].Value == "sent" {
		t.Fatalf("an agent paid 9,999,999.00 EUR to its own IBAN with no person's approval: apply %d %s\ninstance: %+v", code, raw, in)
	}
}

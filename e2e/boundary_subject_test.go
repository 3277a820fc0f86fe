package e2e

import (
	"strings"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// TestBoundaryInboxHidesProposalSubject: a service hosts one control per
// record (the credit limit of each customer, told apart by subject). The
// agent stages a new limit on Mallory's row. The person's inbox item reads
// "Credit limit — Form accounts — 500 → 10000" and names no record: the
// person cannot tell that Apply raises Mallory's limit and not Alice's
// (the subject is only in hidden form inputs).
func TestBoundaryInboxHidesProposalSubject(t *testing.T) {
	a := newApp(t, false)
	svc, _ := a.Issue(store.KindService, "billing")
	code, _, raw := a.API("POST", "/v1/forms/accounts/controls", svc, map[string]any{"controls": []any{
		map[string]any{"controlId": "creditLimit", "subject": map[string]any{"type": "customer", "id": "alice", "label": "Alice Example"},
			"metadata": map[string]any{"kind": "number", "label": "Credit limit"}, "value": 500},
		map[string]any{"controlId": "creditLimit", "subject": map[string]any{"type": "customer", "id": "mallory", "label": "Mallory Attacker"},
			"metadata": map[string]any{"kind": "number", "label": "Credit limit"}, "value": 500},
	}})
	if code >= 300 {
		t.Fatalf("declare: %d %s", code, raw)
	}
	cs := a.agent()
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "value": 10000,
		"identity": map[string]any{"formId": "accounts", "controlId": "creditLimit", "subject": map[string]any{"type": "customer", "id": "mallory"}}})
	if isErr {
		t.Fatalf("stage: %v", out)
	}
	cookie, _ := a.SignIn()
	page := a.webPage("/inbox", cookie)
	i := strings.Index(page, "Credit limit")
	if i < 0 {
		t.Fatalf("no proposal in the inbox:\n%s", page)
	}
	item := page[i:]
	if j := strings.Index(item, "</li>"); j > 0 {
		item = item[:j]
	}
	// What a person reads: the item without its hidden inputs.
	visible := item
	for {
		s := strings.Index(visible, `<input type="hidden"`)
		if s < 0 {
			break
		}
		e := strings.Index(visible[s:], ">")
		visible = visible[:s] + visible[s+e+1:]
	}
	if !strings.Contains(visible, "Mallory Attacker") && !strings.Contains(visible, "mallory") {
		t.Fatalf("the inbox item a person applies does not say which record it changes (customer mallory):\n%s", visible)
	}
}

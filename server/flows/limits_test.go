package flows_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
)

// chainProgram is a program with id id whose n transitions lead from
// phase p0 through p1 … to pn, each a state.assign an agent may take.
func chainProgram(id string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"schema_version": 1, "program_id": %q, "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "done", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["p%d"]}]}],
  "transitions": [`, id, n)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `
    {"id": "t%d", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["p%d"], "target_phases": ["p%d"], "authority": ["agent"],
     "assignments": [{"facet": "step", "value": "%d"}], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "step_%d", "expected_postcondition": "p%d"}}`, i, i, i+1, i+1, i, i+1)
	}
	b.WriteString("]}")
	return b.String()
}

// TestFlowProposalBounds is the attack: with an agent's token only, an
// agent files an oversized program, a program of many transitions, more
// proposed programs and more approval requests than a person can read.
// Each past its bound is refused limit_exceeded and stores nothing;
// proposing again what already waits is not counted twice.
func TestFlowProposalBounds(t *testing.T) {
	f := assenttest.StartDemo(t)
	f.Srv.Flows().SetLimits(flows.Limits{ProgramBytes: 32 << 10, ProgramTransitions: 20, PendingPrograms: 2, PendingApprovals: 2})
	load := func(src string) (int, string) {
		code, out, raw := f.API("POST", "/v1/flows/programs", f.Token, []byte(src))
		code2 := string(errorOf(t, out).Code)
		_ = raw
		return code, code2
	}
	programs := func() int {
		_, out, _ := f.API("GET", "/v1/flows/programs", f.Token, nil)
		list, _ := out["programs"].([]any)
		return len(list)
	}
	before := programs()
	for _, tc := range []struct {
		name string
		src  string
	}{
		{"too many bytes", chainProgram("big-bytes", 200)},
		{"too many transitions", chainProgram("many-steps", 21)},
	} {
		if code, ec := load(tc.src); code != 413 || ec != "limit_exceeded" {
			t.Errorf("%s (%d bytes): %d %s, want 413 limit_exceeded", tc.name, len(tc.src), code, ec)
		}
	}
	if n := programs(); n != before {
		t.Fatalf("refused programs were stored: %d programs, want %d", n, before)
	}

	// Two proposals wait; the same one again is not a new one; a third is
	// refused until a person decides one.
	for _, id := range []string{"prop-1", "prop-2", "prop-1"} {
		if code, ec := load(chainProgram(id, 3)); code != 202 {
			t.Fatalf("propose %s: %d %s", id, code, ec)
		}
	}
	if code, ec := load(chainProgram("prop-3", 3)); code != 413 || ec != "limit_exceeded" {
		t.Fatalf("a third waiting proposal: %d %s, want 413 limit_exceeded", code, ec)
	}
	_, person := f.Issue(store.KindHuman, "approver", "state.write")
	cookie, csrf := f.SignInAs(person.ID)
	_, out, _ := f.API("GET", "/v1/flows/programs", f.Token, nil)
	var fp string
	for _, p := range out["programs"].([]any) {
		if m := p.(map[string]any); m["program_id"] == "prop-1" {
			fp, _ = m["fingerprint"].(string)
		}
	}
	f.Decide("/web/flows/programs/"+fp+"/decline", url.Values{"csrf": {csrf}, "reason": {"no"}}, cookie)
	if code, ec := load(chainProgram("prop-3", 3)); code != 202 {
		t.Fatalf("a proposal once a person declined one: %d %s", code, ec)
	}

	// Approval requests: two wait; asking again for one is no new request;
	// a third is refused.
	approval := func(id string) (int, string) {
		t.Helper()
		code, _, raw := f.API("POST", "/v1/flows/instances", f.Token, map[string]any{"program": "expense-approval", "id": id, "phase": "draft", "objective": "expense-paid",
			"facts": map[string]any{"expense.amount": known("900.00 EUR"), "expense.payee_iban": known(demo.PayeeIBAN)}})
		switch code {
		case 201: // submit it
			_, out, raw := f.API("POST", "/v1/flows/instances/"+id+"/prescribe", f.Token, nil)
			prx := prescriptionID(t, out)
			if code, _, raw := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", f.Token, nil); prx == "" || code != 200 {
				t.Fatalf("submit %s: %d %s", id, code, raw)
			}
			_ = raw
		case 409: // started before
		default:
			t.Fatalf("start %s: %d %s", id, code, raw)
		}
		code, out, _ := f.API("POST", "/v1/flows/instances/"+id+"/prescribe", f.Token, nil)
		if code == 200 && approvalOf(t, out).ID == "" {
			t.Fatalf("%s: no approval was filed: %v", id, out)
		}
		ec := string(errorOf(t, out).Code)
		return code, ec
	}
	waiting := 0 // the demo's seeded approval, when there is one
	pending, err := f.Srv.Flows().Kernel().PendingApprovals(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range pending {
		if a.Requester == f.Boot.Agent.ID {
			waiting++
		}
	}
	f.Srv.Flows().SetLimits(flows.Limits{ProgramBytes: 32 << 10, ProgramTransitions: 20, PendingPrograms: 2, PendingApprovals: waiting + 2})
	for _, id := range []string{"bound-0", "bound-1", "bound-0"} {
		if code, ec := approval(id); code != 200 {
			t.Fatalf("approval for %s: %d %s", id, code, ec)
		}
	}
	if code, ec := approval("bound-extra"); code != 413 || ec != "limit_exceeded" {
		t.Fatalf("a third waiting approval: %d %s, want 413 limit_exceeded", code, ec)
	}
}

// TestFlowsPageSummarizesALargeProgram: a program of thousands of
// transitions shows on the Flows page as its summary, so the page stays
// small; the API serves it whole.
func TestFlowsPageSummarizesALargeProgram(t *testing.T) {
	f := assenttest.StartDemo(t)
	src := chainProgram("large", 2000)
	p, err := f.Srv.Flows().Kernel().AddProgram(t.Context(), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cookie, _ := f.SignIn()
	page := assenttest.ReadAll(f.Get("/flows", cookie))
	if !strings.Contains(page, "2000 transitions: too many to draw here") || !strings.Contains(page, p.Fingerprint()) {
		t.Fatalf("the page does not summarize the large program")
	}
	if strings.Contains(page, "step_1999") || len(page) > len(src)/4 {
		t.Fatalf("the page lists the large program's transitions (%d bytes for a %d-byte program)", len(page), len(src))
	}
	// The demo's programs are still drawn in full.
	if !strings.Contains(page, "Phase graph of expense-approval") {
		t.Fatal("the demo's programs are no longer drawn")
	}
}

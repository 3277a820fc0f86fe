package faults

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// TestDecisionRaceTwoNodes runs two `assent serve` nodes on one PostgreSQL
// database. Round after round the agent files a Flow approval and a person
// approves it on one node while declining it on the other, at once.
// Exactly one decision wins; the other is answered 409 already_decided;
// and the store agrees with the winner: an approved expense is approved
// with a receipt, a declined one stays submitted with none. 25 rounds, 100
// with -faults.long.
func TestDecisionRaceTwoNodes(t *testing.T) {
	storeURL, _ := pgtest.URL(t)
	exe := buildAssent(t)
	a := serve(t, exe, t.TempDir(), "ASSENT_STORE="+storeURL, "ASSENT_NODE=node-a")
	b := serve(t, exe, t.TempDir(), "ASSENT_STORE="+storeURL, "ASSENT_NODE=node-b")
	token := a.token
	if token == "" || a.link == "" {
		t.Fatal("the first node printed no agent token or sign-in link")
	}
	who := a.signIn(t)
	rounds := 25
	if *long {
		rounds = 100
	}
	wins := map[string]int{}
	for round := range rounds {
		id := fmt.Sprintf("race-%03d", round)
		apr := fileApproval(t, a, token, id)
		approver, decliner := a, b
		if round%2 == 1 {
			approver, decliner = b, a
		}
		var codes [2]int
		var bodies [2]map[string]any
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, node := range []*server{approver, decliner} {
			decision := []string{"approve", "decline"}[i]
			wg.Go(func() {
				<-start
				code, body, err := node.call("POST", "/web/flows/approvals/"+apr+"/"+decision, "", &who, url.Values{"csrf": {who.csrf}})
				if err != nil {
					t.Errorf("round %d: %s got no answer: %v", round, decision, err)
				}
				codes[i], bodies[i] = code, body
			})
		}
		close(start)
		wg.Wait()
		_, got, _ := b.call("GET", "/v1/flows/approvals/"+apr, token, nil, nil)
		_, inst, _ := a.call("GET", "/v1/flows/instances/"+id, token, nil, nil)
		phase, _ := dig(inst, "instance", "phase").(string)
		receipts, _ := inst["receipts"].([]any)
		status, _ := got["status"].(string)
		switch {
		case codes[0] == http.StatusOK && codes[1] == http.StatusOK:
			t.Fatalf("round %d: approve and decline both answered 200; approval %s, phase %s", round, status, phase)
		case codes[0] == http.StatusOK:
			wins["approve"]++
			if codes[1] != http.StatusConflict || errCode(bodies[1]) != "already_decided" {
				t.Errorf("round %d: the losing decline answered %d %v", round, codes[1], bodies[1])
			}
			if status != "approved" || phase != "approved" || len(receipts) != 2 {
				t.Errorf("round %d: approve won, but the approval is %s, the instance %s with %d receipts", round, status, phase, len(receipts))
			}
		case codes[1] == http.StatusOK:
			wins["decline"]++
			if codes[0] != http.StatusConflict || errCode(bodies[0]) != "already_decided" {
				t.Errorf("round %d: the losing approve answered %d %v", round, codes[0], bodies[0])
			}
			if status != "declined" || phase != "submitted" || len(receipts) != 1 {
				t.Errorf("round %d: decline won, but the approval is %s, the instance %s with %d receipts", round, status, phase, len(receipts))
			}
		default:
			t.Fatalf("round %d: neither won: approve %d %v, decline %d %v", round, codes[0], bodies[0], codes[1], bodies[1])
		}
	}
	t.Logf("%d approve-against-decline races on two PostgreSQL nodes, each decided once: %v", rounds, wins)
}

// fileApproval has the agent draft and submit an expense over the limit
// on s, which then waits for a person's approval, and returns the
// approval's id.
func fileApproval(t *testing.T, s *server, token, id string) string {
	t.Helper()
	code, body, err := s.call("POST", "/v1/flows/instances", token, nil, map[string]any{
		"program": "expense-approval", "id": id, "phase": "draft", "objective": "expense-paid",
		"facts": map[string]any{
			"expense.amount":      map[string]any{"status": "known", "value": "1200.00 EUR"},
			"expense.description": map[string]any{"status": "known", "value": "Race " + id},
			"expense.payee_iban":  map[string]any{"status": "known", "value": demo.PayeeIBAN},
		}})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("start %s: %d %v %v", id, code, body, err)
	}
	_, sub, _ := s.call("POST", "/v1/flows/instances/"+id+"/prescribe", token, nil, map[string]any{})
	rx, _ := dig(sub, "decision", "prescription", "id").(string)
	if rx == "" {
		t.Fatalf("prescribe submit: %v", sub)
	}
	if code, body, err := s.call("POST", "/v1/flows/prescriptions/"+rx+"/apply", token, nil, nil); err != nil || code != http.StatusOK {
		t.Fatalf("submit: %d %v %v", code, body, err)
	}
	_, pres, _ := s.call("POST", "/v1/flows/instances/"+id+"/prescribe", token, nil, map[string]any{})
	apr, _ := dig(pres, "approval", "id").(string)
	if apr == "" {
		t.Fatalf("prescribe: %v", pres)
	}
	return apr
}

// dig walks nested JSON objects by key.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

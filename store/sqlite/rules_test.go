package sqlite

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// BenchmarkLiveRulesOfAgent measures the read every staged value of an
// agent costs when standing rules exist: the live rules of one agent,
// among 1,000 rules of 20 agents, half of them revoked or expired.
func BenchmarkLiveRulesOfAgent(b *testing.B) {
	db := openTest(b)
	ctx := b.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 1000 {
		r := store.Rule{ID: fmt.Sprint("r", i), CreatedBy: "p_person", AgentID: fmt.Sprint("p_agent", i%20),
			FormID: "profile", ControlID: fmt.Sprint("c", i%7), Values: []json.RawMessage{json.RawMessage(`"pro"`)},
			CreatedAt: now, Until: now.Add(time.Duration(1+(i/20)%2) * time.Hour)}
		if err := db.CreateRule(ctx, r, store.AuditRecord{Time: now, PrincipalID: "p_person", Action: "rule.create", OK: true}); err != nil {
			b.Fatal(err)
		}
	}
	at := now.Add(90 * time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		rs, err := db.ListRules(ctx, store.RuleFilter{AgentID: "p_agent3", LiveAt: at})
		if err != nil || len(rs) != 25 {
			b.Fatalf("ListRules = %d, %v", len(rs), err)
		}
	}
}

package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func ruleOf(id string) store.Rule {
	return store.Rule{ID: id, CreatedBy: "alice", AgentID: "bot", FormID: "profile", ControlID: "plan",
		Values: []json.RawMessage{json.RawMessage(`"pro"`), json.RawMessage(`"team"`)},
		Until:  at(24 * time.Hour), CreatedAt: epoch}
}

func ruleAudit(action, id string) store.AuditRecord {
	return store.AuditRecord{Time: epoch, PrincipalID: "alice", Source: "user", FormID: "profile", ControlID: "plan",
		Action: action, OK: true, Detail: `{"rule":"` + id + `"}`}
}

// auditActions returns the actions of the audit log, oldest first.
func auditActions(t *testing.T, st store.Store) []string {
	t.Helper()
	recs, err := st.Audit().ListAudit(ctx(t), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Action)
	}
	return out
}

func testRules(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("create, read, list, revoke, each audited", func(t *testing.T) {
		st := open(t)
		rs := st.Rules()
		r := ruleOf("r1")
		if err := rs.CreateRule(ctx(t), r, ruleAudit("rule.create", "r1")); err != nil {
			t.Fatal(err)
		}
		lo, hi := 10.0, 500.5
		ranged := store.Rule{ID: "r2", CreatedBy: "bob", AgentID: "bot", FormID: "expense", ControlID: "amount",
			SubjectType: "expense", SubjectID: "e1", Min: &lo, Max: &hi, Until: at(time.Hour), CreatedAt: at(time.Second)}
		if err := rs.CreateRule(ctx(t), ranged, ruleAudit("rule.create", "r2")); err != nil {
			t.Fatal(err)
		}
		got, err := rs.Rule(ctx(t), "r1")
		if err != nil {
			t.Fatal(err)
		}
		if got.CreatedBy != "alice" || got.AgentID != "bot" || got.FormID != "profile" || got.ControlID != "plan" ||
			len(got.Values) != 2 || string(got.Values[1]) != `"team"` || !got.Until.Equal(r.Until) || !got.CreatedAt.Equal(epoch) ||
			!got.RevokedAt.IsZero() || got.Min != nil || got.Max != nil {
			t.Fatalf("Rule(r1) = %+v", got)
		}
		got, err = rs.Rule(ctx(t), "r2")
		if err != nil || got.Min == nil || *got.Min != lo || got.Max == nil || *got.Max != hi || got.Values != nil ||
			got.SubjectType != "expense" || got.SubjectID != "e1" {
			t.Fatalf("Rule(r2) = %+v, %v", got, err)
		}
		for _, c := range []struct {
			f    store.RuleFilter
			want []string
		}{
			{store.RuleFilter{}, []string{"r1", "r2"}},
			{store.RuleFilter{CreatedBy: "bob"}, []string{"r2"}},
			{store.RuleFilter{AgentID: "bot", LiveAt: at(2 * time.Hour)}, []string{"r1"}},
			{store.RuleFilter{AgentID: "other"}, nil},
			{store.RuleFilter{LiveAt: at(24 * time.Hour)}, nil},
		} {
			list, err := rs.ListRules(ctx(t), c.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range list {
				ids = append(ids, r.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.want) {
				t.Errorf("ListRules(%+v) = %v, want %v", c.f, ids, c.want)
			}
		}
		if err := rs.RevokeRule(ctx(t), "r1", "carol", at(time.Minute), ruleAudit("rule.revoke", "r1")); err != nil {
			t.Fatal(err)
		}
		got, err = rs.Rule(ctx(t), "r1")
		if err != nil || !got.RevokedAt.Equal(at(time.Minute)) || got.RevokedBy != "carol" || got.Live(at(2*time.Minute)) {
			t.Fatalf("revoked rule = %+v, %v", got, err)
		}
		if list, err := rs.ListRules(ctx(t), store.RuleFilter{LiveAt: at(2 * time.Minute)}); err != nil || len(list) != 1 || list[0].ID != "r2" {
			t.Fatalf("live after revoking r1 = %+v, %v", list, err)
		}
		if err := rs.RevokeRule(ctx(t), "r1", "carol", at(time.Hour), ruleAudit("rule.revoke", "r1")); !errors.Is(err, store.ErrConflict) {
			t.Errorf("revoke twice = %v, want ErrConflict", err)
		}
		if err := rs.RevokeRule(ctx(t), "nope", "carol", at(time.Hour), ruleAudit("rule.revoke", "nope")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoke unknown = %v, want ErrNotFound", err)
		}
		if _, err := rs.Rule(ctx(t), "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Rule(unknown) = %v, want ErrNotFound", err)
		}
		// Only what happened is in the audit log: refusals record nothing.
		if got := auditActions(t, st); fmt.Sprint(got) != "[rule.create rule.create rule.revoke]" {
			t.Errorf("audit = %v", got)
		}
	})

	t.Run("refuses bad rules and duplicate ids, recording nothing", func(t *testing.T) {
		st := open(t)
		rs := st.Rules()
		if err := rs.CreateRule(ctx(t), ruleOf("r1"), ruleAudit("rule.create", "r1")); err != nil {
			t.Fatal(err)
		}
		if err := rs.CreateRule(ctx(t), ruleOf("r1"), ruleAudit("rule.create", "r1")); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate id = %v, want ErrConflict", err)
		}
		one, two := 1.0, 2.0
		for name, mod := range map[string]func(*store.Rule){
			"no agent":        func(r *store.Rule) { r.AgentID = "" },
			"no creator":      func(r *store.Rule) { r.CreatedBy = "" },
			"no control":      func(r *store.Rule) { r.ControlID = "" },
			"half a subject":  func(r *store.Rule) { r.SubjectType = "expense" },
			"no bound":        func(r *store.Rule) { r.Values = nil },
			"both bounds":     func(r *store.Rule) { r.Min = &one },
			"min above max":   func(r *store.Rule) { r.Values, r.Min, r.Max = nil, &two, &one },
			"bad JSON value":  func(r *store.Rule) { r.Values = []json.RawMessage{json.RawMessage(`{`)} },
			"until in past":   func(r *store.Rule) { r.Until = at(-time.Hour) },
			"over 90 days":    func(r *store.Rule) { r.Until = at(store.RuleMaxDuration + time.Second) },
			"filed revoked":   func(r *store.Rule) { r.RevokedAt = at(time.Minute) },
			"too many values": func(r *store.Rule) { r.Values = make([]json.RawMessage, store.RuleMaxValues+1) },
		} {
			r := ruleOf("bad")
			mod(&r)
			if err := rs.CreateRule(ctx(t), r, ruleAudit("rule.create", "bad")); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		}
		if _, err := rs.Rule(ctx(t), "bad"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a refused rule was stored: %v", err)
		}
		if got := auditActions(t, st); fmt.Sprint(got) != "[rule.create]" {
			t.Errorf("audit = %v, want the one rule created", got)
		}
	})

	t.Run("concurrent revokes: one wins", func(t *testing.T) {
		st := open(t)
		rs := st.Rules()
		if err := rs.CreateRule(ctx(t), ruleOf("r1"), ruleAudit("rule.create", "r1")); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = rs.RevokeRule(ctx(t), "r1", fmt.Sprint("p", i), at(time.Minute), ruleAudit("rule.revoke", "r1"))
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrConflict) || store.Unavailable(err):
			default:
				t.Errorf("revoke: %v", err)
			}
		}
		if won != 1 {
			t.Errorf("%d revokes succeeded, want 1", won)
		}
		if got := auditActions(t, st); len(got) != 1+won {
			t.Errorf("audit = %v, want one revoke recorded", got)
		}
	})
}
